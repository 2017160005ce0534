import { lookup, Resolver } from 'node:dns/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export interface CallbackRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
  /** The POS's trustAllCertificates, where the deployment lets it take effect. */
  insecureTls: boolean;
  /** CALLBACK_ALLOW_PRIVATE: may the target be loopback or a private network. */
  allowPrivate: boolean;
  /**
   * CALLBACK_DNS_SERVERS: resolve the target with these servers (`ip`, `ip:port`, `[ipv6]:port`)
   * instead of the system resolver. Empty or absent: dns.lookup.
   */
  dnsServers?: readonly string[];
  timeoutMs: number;
}

export interface CallbackResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * Public unicast only: no loopback, private, link-local, metadata, CGNAT, multicast, reserved.
 * Nor IPv4-compatible IPv6 (`::a.b.c.d`, deprecated by RFC 4291): ipaddr.js calls it unicast,
 * and a host that still routes it would reach the IPv4 address inside (`[::127.0.0.1]`).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address); // unwraps IPv4-mapped IPv6
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0)) return false;
  return parsed.range() === 'unicast';
}

interface Resolved {
  address: string;
  family: number;
}

/** DNS answers that mean "no address of this family", as opposed to a failure. */
const NO_ADDRESS = new Set(['ENODATA', 'ENOTFOUND']);

/**
 * Every address of `hostname`: an IP literal as is; otherwise the system resolver (dns.lookup),
 * or A and AAAA queries to `servers` when CALLBACK_DNS_SERVERS is set.
 */
export async function resolveTarget(hostname: string, servers: readonly string[] | undefined, timeoutMs: number): Promise<Resolved[]> {
  const family = isIP(hostname);
  if (family !== 0) return [{ address: hostname, family }];
  if (!servers || servers.length === 0) {
    // The system resolver has no timeout of its own: bound it by the attempt's.
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no DNS answer in ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([lookup(hostname, { all: true, verbatim: true }), expired]);
    } finally {
      clearTimeout(timer);
    }
  }
  const resolver = new Resolver({ timeout: Math.max(1, Math.min(timeoutMs, 5000)), tries: 2 });
  resolver.setServers([...servers]);
  const query = async (type: 4 | 6): Promise<Resolved[] | Error> => {
    try {
      const addresses = type === 4 ? await resolver.resolve4(hostname) : await resolver.resolve6(hostname);
      return addresses.map((address) => ({ address, family: type }));
    } catch (error) {
      return error as Error;
    }
  };
  const answers = await Promise.all([query(4), query(6)]);
  const failure = answers.find(
    (a): a is NodeJS.ErrnoException => a instanceof Error && !NO_ADDRESS.has((a as NodeJS.ErrnoException).code ?? ''),
  );
  if (failure) throw failure;
  const addresses = answers.flatMap((a) => (a instanceof Error ? [] : a));
  if (addresses.length === 0) {
    const error = answers.find((a) => a instanceof Error);
    throw error ?? new Error(`no address for ${hostname}`);
  }
  return addresses;
}

/** How much of an answer's body is read, and for how long, before the connection is cut. */
const BODY_DRAIN_BYTES = 64 * 1024;
const BODY_DRAIN_MS = 1_000;

/**
 * One callback POST. When private targets are not allowed, the host is resolved once, every
 * address must be public, and the connection goes to that checked address (no second DNS
 * answer can rebind it). Redirects are not followed; only 2xx counts as delivered.
 */
export async function postCallback(request: CallbackRequest): Promise<CallbackResult> {
  const started = performance.now();
  const done = (statusCode: number | null, error: string | null): CallbackResult => ({
    statusCode,
    error,
    durationMs: Math.round(performance.now() - started),
  });
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return done(null, 'invalid URL');
  }
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  let pinned: Resolved | null = null;
  const dedicatedResolver = (request.dnsServers?.length ?? 0) > 0;
  if (!request.allowPrivate || dedicatedResolver) {
    // Resolved once here and connected to by that address: the check cannot be rebound, and
    // with CALLBACK_DNS_SERVERS the system resolver is never asked.
    let addresses: Resolved[];
    try {
      addresses = await resolveTarget(hostname, request.dnsServers, request.timeoutMs);
    } catch (error) {
      return done(null, `DNS lookup failed: ${(error as Error).message}`);
    }
    if (!request.allowPrivate) {
      const blocked = addresses.find((a) => !isPublicAddress(a.address));
      if (blocked || addresses.length === 0)
        return done(null, `refused: ${hostname} resolves to a non-public address (${blocked?.address ?? 'none'})`);
    }
    pinned = addresses[0] ?? null;
  }

  const pinnedLookup: LookupFunction | undefined = pinned
    ? (_host, options, callback) => {
        const { address, family } = pinned as Resolved;
        if ((options as { all?: boolean }).all)
          (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
        else callback(null, address, family);
      }
    : undefined;

  return new Promise<CallbackResult>((resolve) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(
      url,
      {
        method: 'POST',
        headers: {
          ...request.headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(request.body)),
          'user-agent': 'Lipa-Callbacks/1.0',
        },
        timeout: request.timeoutMs,
        ...(pinnedLookup ? { lookup: pinnedLookup } : {}),
        ...(url.protocol === 'https:'
          ? { rejectUnauthorized: !request.insecureTls, servername: isIP(hostname) ? undefined : hostname }
          : {}),
      },
      (response) => {
        // The status line is the answer. The body is not needed: a short one is drained, so
        // that the connection ends cleanly; one longer than BODY_DRAIN_BYTES or slower than
        // BODY_DRAIN_MS is cut, so a receiver cannot hold sockets open after answering.
        resolve(done(response.statusCode ?? null, null));
        let drained = 0;
        const cut = setTimeout(() => req.destroy(), BODY_DRAIN_MS);
        response.on('data', (chunk: Buffer) => {
          drained += chunk.length;
          if (drained > BODY_DRAIN_BYTES) req.destroy();
        });
        response.on('error', () => undefined);
        req.on('close', () => clearTimeout(cut));
      },
    );
    const deadline = setTimeout(() => req.destroy(new Error(`no answer in ${request.timeoutMs} ms`)), request.timeoutMs);
    req.on('timeout', () => req.destroy(new Error(`no answer in ${request.timeoutMs} ms`)));
    req.on('error', (error) => resolve(done(null, error.message)));
    req.on('close', () => clearTimeout(deadline));
    req.end(request.body);
  });
}

import { lookup } from 'node:dns/promises';
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
  timeoutMs: number;
}

export interface CallbackResult {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** Public unicast only: no loopback, private, link-local, metadata, CGNAT, multicast, reserved. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  return ipaddr.process(address).range() === 'unicast'; // process() unwraps IPv4-mapped IPv6
}

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
  let pinned: { address: string; family: number } | null = null;
  if (!request.allowPrivate) {
    let addresses: { address: string; family: number }[];
    try {
      addresses = isIP(hostname) ? [{ address: hostname, family: isIP(hostname) }] : await lookup(hostname, { all: true, verbatim: true });
    } catch (error) {
      return done(null, `DNS lookup failed: ${(error as Error).message}`);
    }
    const blocked = addresses.find((a) => !isPublicAddress(a.address));
    if (blocked || addresses.length === 0)
      return done(null, `refused: ${hostname} resolves to a non-public address (${blocked?.address ?? 'none'})`);
    pinned = addresses[0] ?? null;
  }

  const pinnedLookup: LookupFunction | undefined = pinned
    ? (_host, options, callback) => {
        const { address, family } = pinned as { address: string; family: number };
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
        response.resume(); // the answer's body is not needed; drain it so the socket closes
        response.on('end', () => resolve(done(response.statusCode ?? null, null)));
        response.on('error', (error) => resolve(done(response.statusCode ?? null, error.message)));
      },
    );
    const deadline = setTimeout(() => req.destroy(new Error(`no answer in ${request.timeoutMs} ms`)), request.timeoutMs);
    req.on('timeout', () => req.destroy(new Error(`no answer in ${request.timeoutMs} ms`)));
    req.on('error', (error) => resolve(done(null, error.message)));
    req.on('close', () => clearTimeout(deadline));
    req.end(request.body);
  });
}

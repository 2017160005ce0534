import type { FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { AppError } from './errors.js';

/**
 * An in-process fixed-window counter (per client IP, per key). Cheap enough for hot paths;
 * with several instances each counts its own share. Limits that must hold across
 * instances (failed logins) are kept in the database instead (auth/throttle.ts).
 */
export class WindowLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one hit; throws 429 with Retry-After when the window is already full. */
  hit(key: string): void {
    this.open(key).count++;
  }

  /**
   * Throws 429 with Retry-After when the key's window is full, without counting a hit, and
   * without opening a window: one starts at the first hit (the first wrong token, say).
   */
  check(key: string): void {
    const now = this.now();
    const window = this.windows.get(key);
    if (window && now - window.start < this.windowMs && window.count >= this.limit) {
      throw tooManyRequests(window.start + this.windowMs - now);
    }
  }

  /** The key's current window (a new one when the last has ended); 429 when it is full. */
  private open(key: string): { start: number; count: number } {
    const now = this.now();
    let window = this.windows.get(key);
    if (!window || now - window.start >= this.windowMs) {
      if (this.windows.size > 100_000) this.sweep(now);
      window = { start: now, count: 0 };
      this.windows.set(key, window);
    }
    if (window.count >= this.limit) throw tooManyRequests(window.start + this.windowMs - now);
    return window;
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) {
      if (now - window.start >= this.windowMs) this.windows.delete(key);
    }
  }
}

export function tooManyRequests(retryAfterMs: number): AppError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new AppError('rate_limited', `Too many requests; retry in ${seconds} s.`, undefined, { 'Retry-After': String(seconds) });
}

export function perIpLimit(limiter: WindowLimiter) {
  return async (request: FastifyRequest): Promise<void> => limiter.hit(clientOf(request));
}

/**
 * Who a per-client limit counts: the client's IPv4 address, or the /64 of its IPv6 address.
 * A subscriber or a host is given a whole /64 and may send from any of its 2^64 addresses,
 * so counting each address alone would be no limit at all.
 */
export function clientOf(request: FastifyRequest): string {
  const { ip } = request;
  if (!ip.includes(':') || !ipaddr.isValid(ip)) return ip;
  const address = ipaddr.process(ip); // an IPv4-mapped address is its IPv4 client
  if (address.kind() === 'ipv4') return address.toString();
  const parts = (address as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `${parts.join(':')}::/64`;
}

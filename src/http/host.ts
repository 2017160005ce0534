import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';

/**
 * A Host header's value (RFC 9110 §7.2): a host name or address as a URI writes it (RFC 3986
 * §3.2.2), then an optional port. Anything else (a path, a user, a quote) is not a host a
 * client could have called, and would otherwise be signed and put in paymentUrl as it came.
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+)(?::([0-9]{1,5}))?$/;

export function isValidHost(value: string): boolean {
  const match = HOST.exec(value);
  return match !== null && (match[1] === undefined || Number(match[1]) <= 65_535);
}

/** The address and port a connection came in on, as a Host header would write them. */
function localHostOf(socket: Socket): string {
  const address = (socket.localAddress ?? '').replace(/^::ffff:(?=\d+\.)/, '');
  return `${address.includes(':') ? `[${address}]` : address}:${socket.localPort}`;
}

/**
 * The host (and port) the client called (CONTRACT §5): its Host header, or, for an HTTP/1.0
 * request without one, the address and port it connected to.
 */
export function calledHost(request: FastifyRequest): string {
  return request.headers.host ?? localHostOf(request.raw.socket);
}

/** The origin the client called, e.g. `http://127.0.0.1:8080`. */
export const requestOrigin = (request: FastifyRequest): string => `${request.protocol}://${calledHost(request)}`;

import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';
import type { TSchema } from 'typebox';
import { messagingReply } from '../messaging/responses.js';
import { AppError, BODY_LIMIT, errorBody, errorHandler, sendError, shown, validationError } from './errors.js';
import { isValidHost } from './host.js';
import { parseStrictJson } from './json.js';
import { ErrorResponse } from './schemas.js';
import type { App } from './types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The exact body bytes, for signature checks (never re-serialised JSON). */
    rawBody: Buffer | null;
    /** On signed routes a JSON error waits until the signature is checked (403 comes first). */
    deferredBodyError: AppError | null;
  }
  interface FastifyContextConfig {
    /** The route is signed (CONTRACT §5): its body is checked only after the signature. */
    signed?: boolean;
    /** Answers for the OpenAPI description only, where a response schema would re-serialise them. */
    responseDocs?: Record<number, TSchema>;
    /** The body as /openapi.json describes it, when it says more than the validator checks. */
    bodyDocs?: TSchema;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const pathOf = (url: string) => url.split('?')[0] ?? '/';
const CHARSET = /;\s*charset=([^;\s]*)/i;
/** Names of UTF-8 (WHATWG Encoding), and ASCII, which is a part of it. */
const UTF8_NAMES = new Set(['utf-8', 'utf8', 'unicode-1-1-utf-8', 'us-ascii', 'ascii']);

/** How many times a request sends the header `lowerName` (of Host and Content-Type, Node keeps only the first in `headers`). */
function headerCount(rawHeaders: string[], lowerName: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) count++;
  }
  return count;
}

/**
 * An answer written straight to a connection, for what never becomes a request Fastify sees:
 * the one error body, an X-Request-Id and the headers every answer has; the connection closes.
 */
function writeRefusal(socket: Duplex, refusal: AppError): void {
  const requestId = randomUUID();
  const body = JSON.stringify(errorBody(refusal, requestId));
  socket.write(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\n` +
      `X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * Runs `then` once every request read whole on the connection so far has had its answer: they
 * are answered in the order they came (RFC 9112 §9.3.2), so a fault in a request pipelined
 * behind them must not cut them off (a payment made, its 201 lost).
 */
function afterAnswers(socket: Duplex, then: () => void): void {
  // Node's response being written on the connection; those queued behind it follow in turn.
  const answering = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!answering || socket.destroyed) return void then();
  // The fault is in this request's own body (a bad chunk, or it stopped coming: 408): it will
  // never be answered, so the fault's answer is due now, or, if its answer has begun, the end.
  if (!answering.req.complete) return void (answering.headersSent ? socket.destroy() : then());
  answering.once('close', () => setImmediate(() => afterAnswers(socket, then)));
}

/** The messaging API's paths, whose 404 has that API's own shape. */
const isMessagingPath = (path: string) => path === '/api/messages' || path.startsWith('/api/messages/');

/**
 * A Fastify instance with the HTTP hygiene every listener shares: request ids, the one
 * error body, 404 in that shape (with Allow when only the method is wrong), strict JSON
 * parsing from raw bytes, a body limit, timeouts, and security headers.
 */
export interface ServerOptions {
  /** Whether a request's api_key header names a live messaging key (endpoint 8 authenticates before its 404). */
  messagingKeyValid?: (request: FastifyRequest) => Promise<boolean>;
  /**
   * Production: browsers are told to use https only for a year (HSTS). Production is served
   * over https (PUBLIC_BASE_URL), and a browser ignores the header on plain http.
   */
  strictTransport?: boolean;
  /** Proxies whose X-Forwarded-For gives the client's address (request.ip); none by default. */
  trustProxy?: string[];
}

/** How each server starts refusing requests (refuseRequests). */
const refusers = new WeakMap<App, () => void>();

/**
 * From now on every request this server reads, on any connection, new or kept alive, gets
 * `503 stopping` with `Connection: close`, and the answers still to come close their
 * connections. close() does the same; calling this a moment before it lets a keep-alive
 * client that just had an answer get a 503 for its next request rather than a reset.
 */
export function refuseRequests(app: App): void {
  refusers.get(app)?.();
}

export function createServer(logger: FastifyBaseLogger, options: ServerOptions = {}): App {
  const faulted = new WeakSet<Duplex>();
  /** The headers of every answer, whether a route's, a hook's or the router's refusal. */
  const commonHeaders = (request: FastifyRequest, reply: FastifyReply): void => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
    if (options.strictTransport) reply.header('strict-transport-security', 'max-age=31536000');
    if (request.url.startsWith('/api/')) reply.header('cache-control', 'no-store');
  };
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: BODY_LIMIT,
    ...(options.trustProxy?.length ? { trustProxy: options.trustProxy } : {}),
    // As long as any URL Node accepts (its request line fits in 16 KiB of headers), so that an
    // over-long id reaches its route: authentication first, then a proper 404.
    routerOptions: { maxParamLength: 16 * 1024 },
    // Errors the router raises before any hook also get the error body of the API asked.
    frameworkErrors: (error, request, reply) => {
      commonHeaders(request, reply);
      if (error.code !== 'FST_ERR_BAD_URL' && error.statusCode !== 404) {
        request.log.error({ err: error }, 'router failed');
        return sendError(reply, new AppError('internal_error', 'Something went wrong on our side; retry later.'));
      }
      // A path that cannot be percent-decoded names no endpoint (the interface: 404).
      const path = pathOf(request.url);
      // Endpoint 8 with an id that cannot be decoded: its api_key is checked first (401), as always.
      if (isMessagingPath(path) && request.method === 'GET' && path !== '/api/messages') return lookupWithBadId(request, reply);
      const message = `No endpoint ${request.method} ${shown(path)}: the path is not valid percent-encoding.`;
      if (isMessagingPath(path)) return messagingReply.notFound(reply, message);
      sendError(reply, new AppError('not_found', message));
    },
    // A request Node's HTTP parser refuses (bad header bytes, no request line, a timeout)
    // never reaches a route; it still gets the one error body and an X-Request-Id.
    // The requests read before the fault on that connection are answered first.
    clientErrorHandler: (error, socket) => {
      if ((error as NodeJS.ErrnoException).code === 'ECONNRESET' || socket.destroyed || faulted.has(socket)) return;
      // Node's parser reports its fault again for every later chunk; it is answered once.
      faulted.add(socket);
      const code = (error as NodeJS.ErrnoException).code;
      const refusal =
        code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? new AppError('request_timeout', 'The request took too long to arrive.')
          : code === 'HPE_HEADER_OVERFLOW'
            ? new AppError('headers_too_large', 'The request headers are too large.')
            : new AppError('malformed_request', 'The request is not valid HTTP/1.1.');
      afterAnswers(socket, () => {
        if (socket.writable) writeRefusal(socket, refusal);
        socket.destroy(error);
      });
    },
    requestTimeout: 30_000,
    http: {
      // A request without Host gets the one error body (below) rather than Node's bare 400.
      requireHostHeader: false,
      // How often requestTimeout is checked: a slow request gets its 408 at 30–32 s, not up to 60 s.
      connectionsCheckingInterval: 2_000,
    },
    connectionTimeout: 60_000,
    keepAliveTimeout: 72_000,
    requestIdHeader: false,
    // Keep a caller's correlation id when it is safe to log; otherwise make one.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true } },
    // A request that comes while the server closes gets the API's own answer (onRequest below).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>();

  const lookupWithBadId = async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      if (!request.headers.api_key) return messagingReply.lookupAuthenticationFailed(reply, 'The api_key header is missing.');
      if (options.messagingKeyValid && !(await options.messagingKeyValid(request)))
        return messagingReply.lookupAuthenticationFailed(reply, 'The api_key is invalid or revoked.');
      return messagingReply.notFound(reply);
    } catch (error) {
      request.log.error({ err: error }, 'messaging key check failed');
      return messagingReply.internalError(reply);
    }
  };

  // An Expect other than 100-continue: Node would answer a bare 417 itself; it becomes a request
  // like any other, refused in onRequest with the error body and the usual headers.
  const unmetExpectations = new WeakSet<IncomingMessage>();
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    unmetExpectations.add(req);
    app.server.emit('request', req, res);
  });
  // CONNECT names no path of this service (it is not a proxy); Node would just close the connection.
  // Node has taken its own error handler and timeout off the socket by now: a reset must not
  // be an unhandled error, and the socket is closed once the answer is out, not left half-open.
  app.server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    writeRefusal(socket, new AppError('not_found', `No endpoint CONNECT ${shown(req.url ?? '')}: this service is not a proxy.`));
    socket.destroySoon();
  });

  app.addSchema(ErrorResponse);
  app.decorateRequest('principal', null);
  app.decorateRequest('rawBody', null);
  app.decorateRequest('deferredBodyError', null);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request: FastifyRequest, body: Buffer, done) => {
    request.rawBody = body;
    if (body.length === 0) return done(null, undefined);
    try {
      // JSON is UTF-8 (RFC 8259 §8.1): a body said to be in another charset is not read as if it were.
      const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1];
      if (charset !== undefined && !UTF8_NAMES.has(charset.replace(/^"(.*)"$/, '$1').toLowerCase())) {
        throw request.routeOptions.config.signed
          ? new AppError('invalid_json', `The body must be JSON in UTF-8, not ${shown(charset)}.`)
          : new AppError('unsupported_media_type', `Send the body as application/json in UTF-8, not ${shown(charset)}.`);
      }
      // A compressed body is not read as if it were plain (RFC 9110 §8.4: 415 for a coding the
      // server does not take).
      const coding = request.headers['content-encoding']?.trim().toLowerCase();
      if (coding !== undefined && coding !== '' && coding !== 'identity') {
        throw request.routeOptions.config.signed
          ? new AppError('invalid_json', `The body must be plain JSON, not ${shown(coding)}-encoded.`)
          : new AppError('unsupported_media_type', `Content-Encoding ${shown(coding)} is not supported: send the body uncompressed.`);
      }
      done(null, parseStrictJson(body));
    } catch (error) {
      const invalid = error as AppError;
      if (request.routeOptions.config.signed) {
        request.deferredBodyError = invalid;
        return done(null, undefined);
      }
      done(invalid, undefined);
    }
  });

  // Any other content type is refused (415); on a signed route only after the signature.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request: FastifyRequest, body: Buffer, done) => {
    if (!request.routeOptions.config.signed)
      return done(new AppError('unsupported_media_type', 'Send the body as application/json.'), undefined);
    // On a signed route, the interface's answer to a malformed payload: 422, after the signature.
    request.rawBody = body;
    request.deferredBodyError = new AppError('invalid_json', 'The body must be JSON (Content-Type: application/json).');
    done(null, undefined);
  });

  /** No such endpoint: 404 with Allow naming the methods the path takes (the messaging API's own shape under it). */
  const notFound = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const path = pathOf(request.url);
    const allowed = METHODS.filter((m) => known.find(m, path) !== null);
    // The route takes the method but had nothing to serve (a file under /docs that is not there).
    if ((allowed as readonly string[]).includes(request.method)) return sendError(reply, new AppError('not_found', 'Not found.'));
    if (allowed.length > 0) reply.header('allow', allowed.join(', '));
    const hint = allowed.length > 0 ? ` ${shown(path)} takes ${allowed.join(', ')}.` : '';
    const message = `No endpoint ${request.method} ${shown(path)}.${hint}`;
    if (isMessagingPath(path)) return messagingReply.notFound(reply, message);
    return sendError(reply, new AppError('not_found', message));
  };

  // Set once close() is called (SIGTERM): requests still arriving on open connections are refused.
  let closing = false;
  refusers.set(app, () => {
    closing = true;
  });
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  // And the answers to those in flight say the connection closes: a keep-alive client would
  // otherwise send its next request on it just as the stop closes it, and get no answer at all.
  // Unless a request pipelined behind one of them was read meanwhile: that one's 503 closes it.
  const refusedBehind = new WeakSet<object>();
  app.addHook('onSend', (request, reply, payload, done) => {
    if (closing && !refusedBehind.has(request.raw.socket)) reply.header('connection', 'close');
    done(null, payload);
  });

  // Every request passes here: a callback hook, which costs Fastify less than an async one.
  app.addHook('onRequest', (request, reply, done) => {
    commonHeaders(request, reply);
    // Stopping: nothing of the request is done (its nonce is not used up), and the connection
    // closes so that the client's next try opens a new one, to another instance or a restart.
    if (closing) {
      // Node answers pipelined requests in order; the one being answered is _httpMessage.
      if ((request.raw.socket as { _httpMessage?: unknown })._httpMessage !== reply.raw) refusedBehind.add(request.raw.socket);
      reply.header('connection', 'close');
      reply.header('retry-after', '1');
      const says = 'This instance is stopping and did nothing with the request; send it again.';
      if (isMessagingPath(pathOf(request.url))) return void messagingReply.internalError(reply, says);
      return void sendError(reply, new AppError('stopping', says));
    }
    // HTTP/1.1 needs exactly one Host (RFC 9112 §3.2), and merchants sign the host they called.
    if (request.raw.httpVersion !== '1.0' && headerCount(request.raw.rawHeaders, 'host') !== 1) {
      reply.header('connection', 'close');
      return void sendError(reply, new AppError('malformed_request', 'The request must have exactly one Host header.'));
    }
    const host = request.headers.host;
    if (host !== undefined && !isValidHost(host)) {
      reply.header('connection', 'close');
      return void sendError(reply, new AppError('malformed_request', 'The Host header must be a host name or address, and a port if any.'));
    }
    // Node reads the first of two Content-Types; a proxy in front may have read the other.
    if (request.headers['content-type'] !== undefined && headerCount(request.raw.rawHeaders, 'content-type') > 1) {
      reply.header('connection', 'close');
      const message = 'The request must have at most one Content-Type header.';
      if (isMessagingPath(pathOf(request.url))) return void messagingReply.badRequest(reply, message);
      return void sendError(reply, new AppError('malformed_request', message));
    }
    if (unmetExpectations.has(request.raw)) {
      reply.header('connection', 'close');
      const message = 'The only Expect this service meets is 100-continue.';
      // The messaging API has no 417 in the interface: its 400, as for its other malformed requests.
      if (isMessagingPath(pathOf(request.url))) return void messagingReply.badRequest(reply, message);
      return void sendError(reply, new AppError('expectation_failed', message));
    }
    // No endpoint: say so before reading the body, which is no one's (and may be over the limit).
    if (request.is404) return void notFound(request, reply);
    done();
  });

  // No text the service stores has a NUL character (PostgreSQL cannot store one), so an
  // identifier with one names nothing (404), and a query value with one is refused (422),
  // before any query is made. After authentication: a stranger still gets 401 first.
  app.addHook('preValidation', (request, reply, done) => {
    if (!request.url.includes('%00') || !request.url.startsWith('/api/')) return done();
    // Not on a signed endpoint: its signature is checked first, and it reads no ids from the URL.
    // (An unknown path has had its 404 in onRequest.)
    if (request.routeOptions.config.signed) return done();
    const params = Object.values((request.params ?? {}) as Record<string, unknown>);
    if (params.some((value) => typeof value === 'string' && value.includes('\0'))) {
      if (isMessagingPath(pathOf(request.url))) return void messagingReply.notFound(reply);
      return void sendError(reply, new AppError('not_found', 'Nothing has an identifier with a NUL character (%00) in it.'));
    }
    const query = Object.entries((request.query ?? {}) as Record<string, unknown>);
    const nul = query.find(([, value]) => [value].flat().some((v) => typeof v === 'string' && v.includes('\0')));
    if (nul) return done(validationError(nul[0], 'must not contain a NUL character (%00)'));
    done();
  });

  app.setErrorHandler(errorHandler);

  // A known path with another method is an invalid endpoint too (the interface: 404), and
  // its Allow header says which methods the path takes: a shadow router records every route.
  const known = FindMyWay();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat() as FindMyWay.HTTPMethod[]) {
      if (!known.hasRoute(method, route.url)) known.on(method, route.url, () => undefined);
    }
  });
  app.setNotFoundHandler(notFound);

  return app;
}

import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * JSON logs. Request logs carry the request id (Fastify's reqId). Credentials never reach
 * a log line: headers are not logged, and these paths are redacted wherever they appear.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'lipa' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.api_key',
          'req.headers["x-service-signature"]',
          'password',
          'pin',
          'otp',
          'token',
          'secret',
          'apiKey',
          '*.password',
          '*.pin',
          '*.otp',
          '*.token',
          '*.secret',
          '*.apiKey',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

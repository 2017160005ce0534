import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config.js';
import type { Transports } from '../messenger.js';
import { SmppTransport } from './smpp.js';
import { SmtpTransport } from './smtp.js';

/** The transports the configuration asks for; a type with no URL uses the embedded outbox. */
export function createTransports(config: Config, log: FastifyBaseLogger): Transports {
  return {
    email: config.smtpUrl
      ? new SmtpTransport(config.smtpUrl, {
          from: config.smtpFrom,
          requireTls: config.env === 'production' ? 'always' : 'with-credentials',
        })
      : null,
    sms: config.smppUrl
      ? new SmppTransport({
          url: config.smppUrl,
          sourceAddr: config.smppSourceAddr,
          sourceAddrTon: config.smppSourceTon ?? undefined,
          sourceAddrNpi: config.smppSourceNpi ?? undefined,
          maxSubmitsPerSecond: config.smppThroughput ?? undefined,
          messageIdType: config.smppMsgIdType ?? undefined,
          bind: config.smppBind,
          logger: log,
        })
      : null,
  };
}

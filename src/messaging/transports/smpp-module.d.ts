/**
 * Types for the `smpp` package (0.5.x, CommonJS, no published types; there is no @types/smpp),
 * covering only what Lipa uses. Not named smpp.d.ts: next to smpp.ts TypeScript would take it
 * for that file's declaration output and ignore it.
 */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { Server as NetServer, Socket } from 'node:net';
  import type { TlsOptions } from 'node:tls';

  namespace smpp {
    /**
     * A request or response. Mandatory fields and TLVs appear as properties named as in the
     * SMPP specification (`system_id`, `destination_addr`, `receipted_message_id`, …);
     * `short_message` / `message_payload` of a received PDU are `{ udh?, message }` with the
     * message decoded by data_coding.
     */
    interface PDU {
      command: string;
      command_id: number;
      command_status: number;
      sequence_number: number;
      [field: string]: unknown;
      isResponse(): boolean;
      /** The response to this request (generic_nack for an unknown command). */
      response(options?: Record<string, unknown>): PDU;
      toBuffer(): Buffer;
    }
    const PDU: new (command: string, options?: Record<string, unknown>) => PDU;

    type ResponseCallback = (pdu: PDU) => void;

    interface Session extends EventEmitter {
      socket: Socket;
      /** Internal: response callbacks by sequence number (never cleared for requests left unanswered). */
      _callbacks?: Record<number, ResponseCallback>;
      /** Sends a PDU; false (and nothing sent) when the socket is not writable. */
      send(pdu: PDU, responseCallback?: ResponseCallback, sendCallback?: ResponseCallback): boolean;
      bind_transceiver(options: Record<string, unknown>, responseCallback?: ResponseCallback): boolean;
      bind_transmitter(options: Record<string, unknown>, responseCallback?: ResponseCallback): boolean;
      bind_receiver(options: Record<string, unknown>, responseCallback?: ResponseCallback): boolean;
      submit_sm(options: Record<string, unknown>, responseCallback?: ResponseCallback): boolean;
      deliver_sm(options: Record<string, unknown>, responseCallback?: ResponseCallback): boolean;
      enquire_link(options?: Record<string, unknown> | ResponseCallback, responseCallback?: ResponseCallback): boolean;
      unbind(options?: Record<string, unknown> | ResponseCallback, responseCallback?: ResponseCallback): boolean;
      pause(): void;
      resume(): void;
      close(callback?: () => void): void;
      destroy(callback?: () => void): void;
    }

    interface ConnectOptions {
      host: string;
      port: number;
      /** TLS (the package's `ssmpp://`); the rest of the options go to tls.connect / net.connect. */
      tls?: boolean;
      [option: string]: unknown;
    }

    interface Server extends NetServer {
      sessions: Session[];
    }

    function connect(options: ConnectOptions, listener?: () => void): Session;
    function createServer(options: Partial<TlsOptions>, sessionListener?: (session: Session) => void): Server;
    function createServer(sessionListener?: (session: Session) => void): Server;

    /** command_status names → values (ESME_ROK, ESME_RINVDSTADR, …). */
    const errors: Record<string, number>;
  }

  export = smpp;
}

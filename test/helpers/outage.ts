import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';
import { sql } from 'kysely';
import type { Db } from '../../src/db/database.js';
import { freshDatabase } from './harness.js';

/**
 * A database the test can take away from the service and give back, as an outage does.
 * SQLite: the service's connection is made read-only (every write fails SQLITE_READONLY, as
 * on a disk that went read-only). PostgreSQL: the service reaches the server through a TCP
 * relay the test cuts (every connection reset, new ones refused, as in a restart or a network
 * partition) and joins again.
 */
export interface BreakableDatabase {
  url: string;
  /** Takes the database away from the service whose store this is (its connection, on SQLite). */
  down(store: Db): Promise<void>;
  up(store: Db): Promise<void>;
  /**
   * PostgreSQL only: the next transaction that sends a statement matching `statement` is
   * committed, but its connection is cut before the server's answer to the COMMIT reaches the
   * service (a commit whose answer was lost). Resolves once that has happened.
   */
  loseCommitAnswer(statement: RegExp): Promise<void>;
  drop(): Promise<void>;
}

export async function breakableDatabase(): Promise<BreakableDatabase> {
  const database = await freshDatabase();
  if (database.url.startsWith('file:')) {
    return {
      url: database.url,
      down: async (store) => void (await sql`pragma query_only = 1`.execute(store.db)),
      up: async (store) => void (await sql`pragma query_only = 0`.execute(store.db)),
      loseCommitAnswer: () => Promise.reject(new Error('SQLite commits in the process: there is no answer to lose')),
      drop: database.drop,
    };
  }
  const target = new URL(database.url);
  const sockets = new Set<Socket>();
  let cut = false;
  let armed: { statement: RegExp; lost: () => void } | undefined;
  const relay = createServer((client) => {
    if (cut) return void client.destroy();
    const server = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    // The transaction on this connection whose COMMIT answer is to be lost, once it is seen.
    let watched: (() => void) | undefined;
    client.on('data', (chunk: Buffer) => {
      if (armed?.statement.test(chunk.toString('latin1'))) {
        watched = armed.lost;
        armed = undefined;
      }
      server.write(chunk);
    });
    // The server's messages (a type byte, then their length), passed on whole, one by one.
    let pending = Buffer.alloc(0);
    server.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      let at = 0;
      while (pending.length - at >= 5) {
        const end = at + 1 + pending.readInt32BE(at + 1);
        if (pending.length < end) break;
        // CommandComplete ('C') "COMMIT": committed, and the service is never told.
        if (watched && pending[at] === 0x43 && pending.toString('latin1', at + 5, end - 1) === 'COMMIT') {
          client.end(pending.subarray(0, at));
          client.destroy();
          server.destroy();
          watched();
          return;
        }
        at = end;
      }
      client.write(pending.subarray(0, at));
      pending = pending.subarray(at);
    });
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const url = new URL(database.url);
  url.hostname = '127.0.0.1';
  url.port = String((relay.address() as AddressInfo).port);
  return {
    url: url.toString(),
    down: async () => {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    up: async () => {
      cut = false;
    },
    loseCommitAnswer: (statement) =>
      new Promise<void>((lost) => {
        armed = { statement, lost };
      }),
    drop: async () => {
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await database.drop();
    },
  };
}

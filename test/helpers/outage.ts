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
  drop(): Promise<void>;
}

export async function breakableDatabase(): Promise<BreakableDatabase> {
  const database = await freshDatabase();
  if (database.url.startsWith('file:')) {
    return {
      url: database.url,
      down: async (store) => void (await sql`pragma query_only = 1`.execute(store.db)),
      up: async (store) => void (await sql`pragma query_only = 0`.execute(store.db)),
      drop: database.drop,
    };
  }
  const target = new URL(database.url);
  const sockets = new Set<Socket>();
  let cut = false;
  const relay = createServer((client) => {
    if (cut) return void client.destroy();
    const server = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(server).pipe(client);
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
    drop: async () => {
      await new Promise<void>((resolve) => relay.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await database.drop();
    },
  };
}

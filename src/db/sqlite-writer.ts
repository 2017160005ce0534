/**
 * The SQLite writer thread (see SqliteGroupCommit in database.ts). It owns a connection of
 * its own and runs the operations it is sent (operations.ts): every batch that arrived
 * while it was busy goes into its next transaction, one durable commit for them all, while
 * the main thread's event loop goes on serving requests.
 */
import { parentPort } from 'node:worker_threads';
import {
  errorToWire,
  type OperationCall,
  openSqliteConnection,
  runBatch,
  runUnitsDirectly,
  type SqliteConnection,
  type Tx,
  toWire,
  type WriterReply,
  type WriterRequest,
} from './database.js';
import { OPERATIONS } from './operations.js';

const port = parentPort;
if (!port) throw new Error('sqlite-writer.ts runs as a worker thread');
const post = (reply: WriterReply) => port.postMessage(reply);

let connection: SqliteConnection | null = null;
let unitsDirectly: (conn: Tx) => void = () => undefined;
let queue: { id: number; calls: OperationCall[] }[] = [];
let busy = false;
let stopping = false;

const stop = () => {
  connection?.sqlite.close();
  port.close();
};

const unitOf =
  ({ name, args }: OperationCall) =>
  (tx: Tx) => {
    const operation = OPERATIONS.get(name);
    return operation ? operation.run(tx, args, 'sqlite') : Promise.reject(new Error(`unknown operation ${name}`));
  };

async function runQueued(db: SqliteConnection['db']): Promise<void> {
  while (queue.length > 0) {
    const batches = queue;
    queue = [];
    try {
      const outcomes = await db.connection().execute(async (conn) => {
        unitsDirectly(conn);
        return runBatch(
          conn,
          batches.flatMap((batch) => batch.calls.map(unitOf)),
        );
      });
      let next = 0;
      for (const { id, calls } of batches) {
        post({ type: 'outcomes', id, outcomes: outcomes.slice(next, next + calls.length).map(toWire) });
        next += calls.length;
      }
    } catch (error) {
      for (const { id } of batches) post({ type: 'failed', id, error: errorToWire(error) });
    }
  }
  busy = false;
  if (stopping) stop();
}

port.on('message', (request: WriterRequest) => {
  if (request.type === 'open') {
    try {
      connection = openSqliteConnection(request.path);
      unitsDirectly = runUnitsDirectly(connection);
      post({ type: 'ready' });
    } catch (error) {
      post({ type: 'failed', id: 0, error: errorToWire(error) });
    }
    return;
  }
  if (request.type === 'stop') {
    stopping = true;
    if (!busy) stop();
    return;
  }
  if (!connection) {
    post({ type: 'failed', id: request.id, error: { name: 'Error', message: 'the SQLite writer has no database open' } });
    return;
  }
  queue.push(request);
  if (!busy) {
    busy = true;
    // After the messages that are already waiting, so that they share the transaction.
    const db = connection.db;
    setImmediate(() => void runQueued(db));
  }
});

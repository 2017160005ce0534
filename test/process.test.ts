import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { migrations } from '../src/db/migrations/index.js';
import { ADMIN_TOKEN, freshDatabase, TEST_DATABASE, type TestDatabase } from './helpers/harness.js';
import { until } from './helpers/messaging.js';
import { freePort, launch, MAIN, waitUntilUp } from './helpers/process.js';

/** The real program, as `npm start` runs it (from source, through tsx). */
const MASTER_KEY = 'ab'.repeat(32);

function runToExit(env: Record<string, string>) {
  return spawnSync(process.execPath, MAIN, { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 20_000 });
}

/** Resolves once a service has opened `database` (the SQLite file exists, or PostgreSQL has a connection to it). */
async function databaseOpened(database: TestDatabase): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (database.url.startsWith('file:')) {
      if (existsSync(database.url.slice('file:'.length))) return;
    } else {
      const url = new URL(database.url);
      const client = new pg.Client({ connectionString: TEST_DATABASE });
      await client.connect();
      const { rows } = await client.query('select count(*)::int as n from pg_stat_activity where datname = $1', [url.pathname.slice(1)]);
      await client.end();
      if (rows[0].n > 0) return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the service never opened its database');
}

describe('the service process', () => {
  const databases: TestDatabase[] = [];
  after(async () => {
    for (const database of databases) await database.drop();
  });

  test('`lipa migrate` says which migrations it applied: all on a new database, none the second time', async () => {
    const database = await freshDatabase();
    databases.push(database);
    const migrate = () => {
      const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'migrate'], {
        env: { PATH: process.env.PATH ?? '', ADMIN_TOKEN, DATABASE_URL: database.url },
        encoding: 'utf8',
        timeout: 20_000,
      });
      assert.equal(result.status, 0, result.stderr);
      return JSON.parse(result.stdout);
    };
    const first = migrate();
    assert.deepEqual(first.applied, Object.keys(migrations));
    assert.equal(first.migrated, true);
    assert.deepEqual(migrate().applied, []);
  });

  test('a database migrated by a newer version: one line saying so, and nothing changed', async () => {
    const database = await freshDatabase();
    databases.push(database);
    const store = await openDatabase(database.url);
    await store.db
      .insertInto('kysely_migration' as never)
      .values({ name: '999_from_the_future', timestamp: new Date().toISOString() } as never)
      .execute();
    await store.close();
    const result = runToExit({ ADMIN_TOKEN, DATABASE_URL: database.url, MOCK_PORT: '0' });
    assert.equal(result.status, 1, result.stderr);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(
      result.stderr,
      /^lipa: cannot start: the database was migrated by a newer version of Lipa \(it has migration 999_from_the_future/,
    );
    const reopened = await openDatabase(database.url, { upTo: '001_foundation' }).catch((error: Error) => error);
    assert.ok(reopened instanceof Error, 'still refused');
  });

  test('a new SQLite database, its log and a directory made for it are for its owner only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lipa-modes-'));
    try {
      const file = join(dir, 'data', 'lipa.sqlite');
      const store = await openDatabase(`file:${file}`);
      try {
        const modes = Object.fromEntries(['', '-wal', '-shm'].map((suffix) => [suffix, statSync(`${file}${suffix}`).mode & 0o777]));
        assert.deepEqual(modes, { '': 0o600, '-wal': 0o600, '-shm': 0o600 });
        assert.equal(statSync(join(dir, 'data')).mode & 0o777, 0o700);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a SQLite file this process may not write, or not even read: one line saying so, instead of a service whose every write fails', async () => {
    for (const [mode, says] of [
      [0o444, /^lipa: cannot start: the database .*lipa\.sqlite is read-only to this process/],
      [0o000, /^lipa: cannot start: the database .*lipa\.sqlite cannot be opened by this process/],
    ] as const) {
      const dir = mkdtempSync(join(tmpdir(), 'lipa-readonly-'));
      try {
        const file = join(dir, 'lipa.sqlite');
        await (await openDatabase(`file:${file}`)).close();
        for (const name of readdirSync(dir)) chmodSync(join(dir, name), mode);
        chmodSync(dir, 0o555);
        // Root may write any file: as root, run it as nobody.
        const env = { PATH: process.env.PATH ?? '', ADMIN_TOKEN, DATABASE_URL: `file:${file}`, MOCK_PORT: '0', PORT: '0' };
        const [command, args] =
          process.getuid?.() === 0 ? ['runuser', ['-u', 'nobody', '--', process.execPath, ...MAIN]] : [process.execPath, MAIN];
        const result = spawnSync(command, args, { env, encoding: 'utf8', timeout: 20_000 });
        assert.equal(result.status, 1, result.stderr);
        assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
        assert.match(result.stderr, says);
      } finally {
        chmodSync(dir, 0o755);
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  test('a new SQLite file in a directory this process may not write: one line saying so', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lipa-readonly-dir-'));
    try {
      chmodSync(dir, 0o555);
      const env = {
        PATH: process.env.PATH ?? '',
        ADMIN_TOKEN,
        DATABASE_URL: `file:${join(dir, 'lipa.sqlite')}`,
        MOCK_PORT: '0',
        PORT: '0',
      };
      const [command, args] =
        process.getuid?.() === 0 ? ['runuser', ['-u', 'nobody', '--', process.execPath, ...MAIN]] : [process.execPath, MAIN];
      const result = spawnSync(command, args, { env, encoding: 'utf8', timeout: 20_000 });
      assert.equal(result.status, 1, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(
        result.stderr,
        /^lipa: cannot start: the database .*lipa\.sqlite cannot be created by this process .*it needs to write the file's directory/,
      );
    } finally {
      chmodSync(dir, 0o755);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('production refuses to start without ADMIN_TOKEN, with one clear line', () => {
    const result = runToExit({ LIPA_ENV: 'production', LIPA_MASTER_KEY: MASTER_KEY, DATABASE_URL: 'file::memory:' });
    assert.equal(result.status, 1);
    assert.equal(result.stderr.trim().split('\n').length, 1);
    assert.match(result.stderr, /ADMIN_TOKEN/);
  });

  test('production refuses to start without LIPA_MASTER_KEY', () => {
    const result = runToExit({ LIPA_ENV: 'production', ADMIN_TOKEN, DATABASE_URL: 'file::memory:' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /LIPA_MASTER_KEY/);
  });

  test('production refuses to start when STAGING_OTP is set', () => {
    const result = runToExit({
      LIPA_ENV: 'production',
      ADMIN_TOKEN,
      LIPA_MASTER_KEY: MASTER_KEY,
      STAGING_OTP: '111111',
      DATABASE_URL: 'file::memory:',
    });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /STAGING_OTP/);
  });

  test('an empty setting is as if unset: HOST= listens on 127.0.0.1 only, DATABASE_URL= is the default file', () => {
    const empty = loadConfig({ HOST: '', DATABASE_URL: '', PORT: '', LIPA_ENV: '', ADMIN_TOKEN: '' });
    const unset = loadConfig({});
    assert.equal(empty.host, '127.0.0.1');
    assert.deepEqual([empty.host, empty.databaseUrl, empty.port, empty.env], [unset.host, unset.databaseUrl, unset.port, unset.env]);
  });

  test('SMTP_FROM is an address, alone or with a name; anything else is refused at start', () => {
    for (const good of ['no-reply@pay.example.com', 'Lipa <no-reply@pay.example.com>', '"Lipa, Nairobi" <a@b.example>']) {
      assert.equal(loadConfig({ SMTP_FROM: good }).smtpFrom, good);
    }
    for (const bad of [
      'notanemail',
      'Lipa <>',
      'Lipa <a@b>',
      'a@b.example, c@d.example',
      'Lipa <a@b.example> x',
      'Lipa\r\nBcc: x@y.example <a@b.example>',
    ]) {
      assert.throws(() => loadConfig({ SMTP_FROM: bad }), /^Error: SMTP_FROM must be an email address/, bad);
    }
  });

  test('SMTP_URL and SMPP_URL are checked whole at start, by the parsers their transports use, before the database is touched', () => {
    for (const [env, why] of [
      [{ SMPP_URL: 'smpp://127.0.0.1:2775' }, /^Error: SMPP_URL has no system_id/],
      [{ SMPP_URL: 'smpp://sys:pw@smsc.example/path' }, /^Error: SMPP_URL must not have a path, query or fragment/],
      [{ SMPP_URL: 'smpp://sys:pw%zz@smsc.example' }, /^Error: SMPP_URL has a badly percent-encoded system_id or password/],
      [{ SMTP_URL: 'smtp://mail.example/path' }, /^Error: SMTP_URL must not have a path, query or fragment/],
      [{ SMTP_URL: 'smtp://u:p%zz@mail.example' }, /^Error: SMTP_URL has a badly percent-encoded user or password/],
      [{ SMTP_URL: 'http://mail.example' }, /^Error: SMTP_URL must start with smtp:\/\//],
    ] as const) {
      assert.throws(() => loadConfig(env), why, JSON.stringify(env));
    }
    // The password is never repeated.
    assert.throws(
      () => loadConfig({ SMPP_URL: 'smpp://sys:s3cret@smsc.example/x' }),
      (error: Error) => !error.message.includes('s3cret'),
    );
    // One line at start, before any database: this one does not exist and is never created.
    const dir = join(tmpdir(), `lipa-never-${randomUUID()}`);
    const result = runToExit({ SMPP_URL: 'smpp://127.0.0.1:2775', DATABASE_URL: `file:${dir}/lipa.sqlite` });
    assert.equal(result.status, 1, result.stderr);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /SMPP_URL has no system_id/);
    assert.doesNotMatch(result.stderr, /cannot start/);
    assert.equal(existsSync(dir), false, 'no database was made');
  });

  test('LIPA_MASTER_KEY is 64 hex digits or exactly base64 of 32 bytes; ADMIN_TOKEN is 16 or more visible ASCII characters', () => {
    const key = randomBytes(32);
    for (const good of [key.toString('hex'), key.toString('base64'), key.toString('base64').replace(/=$/, ''), key.toString('base64url')]) {
      assert.deepEqual(loadConfig({ LIPA_MASTER_KEY: good }).masterKey, key, good);
    }
    const base64 = key.toString('base64');
    // Node's decoder would skip the stray characters and read another key.
    for (const bad of [
      `${base64.slice(0, 10)}!!!!${base64.slice(10)}`,
      `${base64.slice(0, 10)} ${base64.slice(10)}`,
      'ab'.repeat(31),
      key.toString('base64').slice(0, 40),
    ]) {
      assert.throws(() => loadConfig({ LIPA_MASTER_KEY: bad }), /^Error: LIPA_MASTER_KEY must be 32 bytes/, bad);
    }
    for (const bad of ['😀'.repeat(8), 'sixteen chars ok', 'short']) {
      assert.throws(() => loadConfig({ ADMIN_TOKEN: bad }), /^Error: ADMIN_TOKEN must be at least 16 characters/, bad);
    }
    assert.equal(loadConfig({ ADMIN_TOKEN: 'x'.repeat(16) }).adminToken, 'x'.repeat(16));
  });

  test('a malformed setting is named', () => {
    const result = runToExit({ PORT: 'eighty', DATABASE_URL: 'file::memory:' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /PORT must be/);
  });

  test('PORT and MOCK_PORT alike, or a PUBLIC_BASE_URL with a path or on port 0, are refused with one line', () => {
    for (const [env, why] of [
      [{ PORT: '18777', MOCK_PORT: '18777' }, /PORT and MOCK_PORT must differ/],
      [{ PUBLIC_BASE_URL: 'https://pay.example.com/api/' }, /PUBLIC_BASE_URL must be an origin only/],
      [{ PUBLIC_BASE_URL: 'https://pay.example.com:0' }, /PUBLIC_BASE_URL must not use port 0/],
      [{ SMTP_FROM: 'notanemail' }, /SMTP_FROM must be an email address/],
    ] as const) {
      const result = runToExit({ ...env, DATABASE_URL: 'file::memory:' });
      assert.equal(result.status, 1, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, why);
    }
  });

  test('a port already taken is one line on stderr and exit 1, not a stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const result = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, MAIN, {
          env: { PATH: process.env.PATH ?? '', PORT: String(port), MOCK_PORT: '0', DATABASE_URL: 'file::memory:', ADMIN_TOKEN },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr?.on('data', (chunk) => {
          stderr += chunk;
        });
        child.on('exit', (status) => resolve({ status, stderr }));
      });
      assert.equal(result.status, 1, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
      assert.match(result.stderr, /^lipa: cannot start: .*EADDRINUSE/);
    } finally {
      taken.close();
    }
  });

  test('SIGTERM while it starts and the start is stuck (its database never answers) exits 0 after 5 s, not 143', async () => {
    // A PostgreSQL that accepts the connection and then says nothing: start-up waits on it.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    const dbPort = typeof address === 'object' && address ? address.port : 0;
    try {
      const { child, exited, output } = launch(
        { PORT: String(await freePort()), MOCK_PORT: '0', DATABASE_URL: `postgres://lipa@127.0.0.1:${dbPort}/lipa`, ADMIN_TOKEN },
        'stderr',
      );
      // Well past loading the modules, still waiting for the database.
      const connected = new Promise<void>((resolve) => silent.once('connection', () => resolve()));
      await connected;
      const signalled = Date.now();
      child.kill('SIGTERM');
      assert.deepEqual(await exited, { code: 0, signal: null }, output());
      const waited = Date.now() - signalled;
      assert.ok(waited >= 4900 && waited < 9000, `exited ${waited} ms after SIGTERM`);
      assert.match(output(), /^lipa: SIGTERM while starting, and the start did not finish in 5 s; stopped$/m);
    } finally {
      silent.close();
    }
  });

  test('SIGTERM while it starts (migrating a new database) waits for the start, then drains and exits 0', async () => {
    const database = await freshDatabase();
    databases.push(database);
    const { child, exited, output } = launch(
      { PORT: String(await freePort()), MOCK_PORT: '0', DATABASE_URL: database.url, ADMIN_TOKEN },
      'stdout',
    );
    // As soon as it opens its database: its handlers were installed before anything else loaded.
    await databaseOpened(database);
    child.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null }, output());
    // The service's own lines (Fastify's "Server listening" may be written at any point).
    const said = output()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line).msg as string)
      .filter((msg) => !msg.startsWith('Server listening'));
    assert.deepEqual(said.slice(-3), ['lipa started', 'draining', 'stopped'], `started, then drained: ${JSON.stringify(said)}`);
  });

  test('production warns, once at start, of a channel with no transport, of a sender domain that does not exist, and of a proxy not trusted', async () => {
    const database = await freshDatabase();
    databases.push(database);
    const port = await freePort();
    const launched = launch(
      {
        LIPA_ENV: 'production',
        LIPA_MASTER_KEY: MASTER_KEY,
        ADMIN_TOKEN,
        PORT: String(port),
        DATABASE_URL: database.url,
        SMTP_URL: 'smtp://127.0.0.1:9',
        PUBLIC_BASE_URL: 'https://pay.duka.example',
        LOG_LEVEL: 'warn',
      },
      'stdout',
    );
    try {
      await waitUntilUp(`http://127.0.0.1:${port}`, launched.child);
      // The warnings follow the start: the service may answer before they are written.
      for (let i = 0; i < 100 && !launched.output().includes('TRUST_PROXY'); i++) await new Promise((r) => setTimeout(r, 50));
      const warnings = launched
        .output()
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { level: number; msg: string; smpp?: boolean; from?: string });
      assert.deepEqual(
        warnings.map((w) => [w.level, w.msg]),
        [
          [40, 'production without SMTP_URL or SMPP_URL: login codes of that channel reach no one'],
          [40, 'production without SMTP_FROM: email goes out from a domain that does not exist'],
          [
            40,
            'production with PUBLIC_BASE_URL but without TRUST_PROXY: behind a proxy every client shares its per-IP limits and lockouts',
          ],
        ],
      );
      assert.equal(warnings[0]?.smpp, false);
      assert.equal(warnings[1]?.from, 'Lipa <no-reply@lipa.local>');
    } finally {
      launched.child.kill('SIGTERM');
      await launched.exited;
    }
  });

  test('SIGTERM drains in-flight requests and exits 0', async () => {
    const database = await freshDatabase();
    databases.push(database);
    const port = await freePort();
    const mockPort = await freePort();
    const child = spawn(process.execPath, MAIN, {
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(port),
        MOCK_PORT: String(mockPort),
        DATABASE_URL: database.url,
        ADMIN_TOKEN,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk) => {
      stderr += chunk;
    });
    const url = `http://127.0.0.1:${port}`;
    await waitUntilUp(url, child);
    assert.equal(
      (await fetch(`http://127.0.0.1:${mockPort}/api/v1/authorization/confirm`, { method: 'POST' })).status,
      422,
      'the mock listener is up',
    );

    // A request whose body is still arriving when SIGTERM comes is in flight: it must be answered.
    const body = JSON.stringify({ login: 'nobody@x.example', password: 'not the password' });
    const request = httpRequest(`${url}/api/v1/authorization`, {
      method: 'POST',
      agent: new Agent({ keepAlive: true }),
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const answered = new Promise<string>((resolve, reject) => {
      request.on('response', (response) => {
        response.resume();
        resolve(`${response.statusCode} ${response.headers.connection}`);
      });
      request.on('error', reject);
    });
    request.write(body.slice(0, 10));
    await new Promise((r) => setTimeout(r, 150));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(child.exitCode, null, 'still draining while a request is in flight');
    request.end(body.slice(10));
    // Answered, and told that its keep-alive connection closes: the client's next request
    // goes to a new connection (refused: another instance's), not one about to be closed.
    assert.equal(await answered, '401 close', 'the in-flight request was answered');
    const answeredAt = Date.now();
    assert.equal(await exited, 0, stderr);
    // Its keep-alive connection is closed once answered, not held for the 72 s keep-alive timeout.
    assert.ok(Date.now() - answeredAt < 10_000, `exited ${Date.now() - answeredAt} ms after the answer`);
    await assert.rejects(fetch(`${url}/health`), 'no longer listening');
  });

  /** The service as a process on a fresh database, and one raw connection to it, its answers kept. */
  async function serviceWithOneConnection() {
    const database = await freshDatabase();
    databases.push(database);
    const port = await freePort();
    const child = spawn(process.execPath, MAIN, {
      env: { PATH: process.env.PATH ?? '', PORT: String(port), MOCK_PORT: '0', DATABASE_URL: database.url, ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await waitUntilUp(`http://127.0.0.1:${port}`, child);
    const socket = connect(port, '127.0.0.1');
    let answers = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => {
      answers += chunk;
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    return { port, child, exited, socket, answers: () => answers, closed };
  }

  test('a keep-alive connection idle when SIGTERM comes: its next request, soon after, gets 503 stopping, not a reset', async () => {
    const { port, child, exited, socket, answers, closed } = await serviceWithOneConnection();
    const get = `GET /health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    socket.write(get);
    await until('the first answer', () => /\r\n\r\n/.test(answers()));
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 150));
    socket.write(get);
    await closed;
    assert.equal(await exited, 0);
    const [first = '', second = ''] = answers().split(/(?=HTTP\/1\.1 )/);
    assert.match(first, /^HTTP\/1\.1 200 /);
    assert.match(second, /^HTTP\/1\.1 503 /, answers());
    assert.match(second, /\r\nconnection: close\r\n/i);
    assert.match(second, /"code":"stopping"/);
  });

  test('the messaging API, stopping, answers its 500 saying so, with Retry-After', async () => {
    const { port, child, exited, socket, answers, closed } = await serviceWithOneConnection();
    const get = `GET /health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    socket.write(get);
    await until('the first answer', () => /\r\n\r\n/.test(answers()));
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 150));
    socket.write(`GET /api/messages/msg_0 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\napi_key: whatever\r\n\r\n`);
    await closed;
    assert.equal(await exited, 0);
    const [head = '', json = ''] = (answers().split(/(?=HTTP\/1\.1 )/)[1] ?? '').split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 500 /, answers());
    assert.match(head, /\r\nretry-after: 1\r\n/i);
    assert.match(head, /\r\nconnection: close\r\n/i);
    assert.deepEqual(JSON.parse(json), {
      status: 'error',
      message: 'This instance is stopping and did nothing with the request; send it again.',
      error_code: 'internal_server_error',
    });
  });

  test('a request that comes on an open connection while it stops gets a 503 stopping with Retry-After, in the API shape', async () => {
    // One connection: a login whose body is still arriving when SIGTERM comes, then, pipelined
    // behind it, a second request, which the server reads only once it is stopping.
    const { port, child, exited, socket, answers, closed } = await serviceWithOneConnection();
    const body = JSON.stringify({ login: 'nobody@x.example', password: 'not the password' });
    socket.write(
      `POST /api/v1/authorization HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    await new Promise((r) => setTimeout(r, 150));
    child.kill('SIGTERM');
    // Stopping has begun once the listener refuses new connections (it closes after the
    // service has marked itself stopping).
    await until('the listener closed', async () => {
      const refused = await new Promise<boolean>((resolve) => {
        const probe = connect(port, '127.0.0.1');
        probe.on('connect', () => {
          probe.destroy();
          resolve(false);
        });
        probe.on('error', () => resolve(true));
      });
      return refused;
    });
    socket.write(`${body.slice(10)}GET /api/v1/points-of-sale HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    await closed;
    assert.equal(await exited, 0);

    const [first, second] = answers().split(/(?=HTTP\/1\.1 )/);
    assert.match(first ?? '', /^HTTP\/1\.1 401 /, 'the request in flight is answered');
    assert.doesNotMatch(first ?? '', /\r\nconnection: close\r\n/i, 'the connection stays open for the answer behind it');
    const [head = '', json = ''] = (second ?? '').split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 503 /, answers());
    assert.match(head, /\r\nretry-after: 1\r\n/i);
    assert.match(head, /\r\nconnection: close\r\n/i);
    const requestId = /\r\nx-request-id: ([^\r]+)/i.exec(head)?.[1];
    assert.deepEqual(JSON.parse(json), {
      error: { code: 'stopping', message: 'This instance is stopping and did nothing with the request; send it again.' },
      requestId,
    });
  });
});

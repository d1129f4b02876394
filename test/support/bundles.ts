/** What a bundled function leaves to the Lambda runtime (test/package/bundles.test.ts, test/package/pack.test.ts). */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ESBUILD = path.join(__dirname, '../../node_modules/.bin/esbuild');

interface Metafile {
  readonly inputs: Record<string, { readonly imports: readonly { readonly path: string; readonly external?: boolean }[] }>;
}

/**
 * The SDK modules a bundle leaves to the runtime: each `require("@aws-sdk/…")` or `require("@smithy/…")` call in it.
 * esbuild parses the bundle, so a module named only inside a string (the SDK's own error messages do) is not a call.
 *
 * esbuild runs as a child that ends with the call: its JS API's sync calls keep a worker and an `esbuild --service`
 * child alive in the test's process, which can hold the file open after its tests end (the leak guard's PipeWraps).
 */
export function sdkRequires(file: string): string[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-meta-'));
  try {
    const meta = path.join(dir, 'meta.json');
    const run = spawnSync(
      ESBUILD,
      [
        file,
        '--bundle',
        '--platform=node',
        '--packages=external',
        '--log-level=error',
        `--metafile=${meta}`,
        `--outfile=${path.join(dir, 'out.js')}`,
      ],
      { encoding: 'utf8' },
    );
    if (run.status !== 0) throw new Error(`esbuild ${file} failed (${run.status ?? run.signal}): ${run.stderr}`);
    const { inputs } = JSON.parse(readFileSync(meta, 'utf8')) as Metafile;
    const imports = Object.values(inputs).flatMap((input) => input.imports);
    return [...new Set(imports.filter((i) => i.external && /^@(aws-sdk|smithy)\//.test(i.path)).map((i) => i.path))].sort();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

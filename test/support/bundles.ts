/** What a bundled function leaves to the Lambda runtime (test/bundles.test.ts, test/pack.test.ts). */
import { buildSync } from 'esbuild';

/**
 * The SDK modules a bundle leaves to the runtime: each `require("@aws-sdk/…")` or `require("@smithy/…")` call in it.
 * esbuild parses the bundle, so a module named only inside a string (the SDK's own error messages do) is not a call.
 */
export function sdkRequires(file: string): string[] {
  const { metafile } = buildSync({
    entryPoints: [file],
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    packages: 'external',
    logLevel: 'silent',
  });
  const imports = Object.values(metafile.inputs).flatMap((input) => input.imports);
  return [...new Set(imports.filter((i) => i.external && /^@(aws-sdk|smithy)\//.test(i.path)).map((i) => i.path))].sort();
}

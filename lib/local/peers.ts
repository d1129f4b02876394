/**
 * The optional peers of the package's local commands (package.json peerDependenciesMeta): a user of the library does
 * not install them; a user who runs `fencepost local` or `fencepost run` adds them as dev dependencies. The message
 * names the exact install, with the versions Fencepost declares.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * The versions of `pkg` Fencepost declares as a peer, read from Fencepost's own package.json, found upward from here
 * (lib/local/ in the repository, dist/local/ in the package).
 */
export function declaredRange(pkg: string): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (!fs.existsSync(file)) continue;
    const manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; peerDependencies?: Record<string, string> };
    if (manifest.name === 'fencepost') return manifest.peerDependencies?.[pkg] ?? 'latest';
  }
  return 'latest';
}

/** The packages of `pkgs` that do not resolve from here: the optional peers a command needs that are missing. */
export function missingPeers(pkgs: readonly string[]): string[] {
  return pkgs.filter((pkg) => {
    try {
      require.resolve(pkg);
      return false;
    } catch {
      return true;
    }
  });
}

// The fence on S3, which has no "greater than": each holder writes its objects under keys carrying its token, and
// commits by rewriting one manifest conditionally: created with If-None-Match: *, then rewritten with If-Match on the
// ETag it last saw. Readers trust only what the manifest names. The lease raises the manifest to its own token
// (`ManifestWriter.raise(..., lease)`), so a holder whose token is stale finds its commit refused.
//
// Stores: FENCEPOST_TEST_DYNAMODB and FENCEPOST_TEST_S3 (tables and bucket made by local/provision.ts).
import { awsStores, ManifestWriter, localClients, readManifest, systemClock, tableNames, withLease, type ManifestPlace } from '../lib/core';

const clients = localClients({
  dynamodb: process.env.FENCEPOST_TEST_DYNAMODB ?? 'http://127.0.0.1:8000',
  s3: process.env.FENCEPOST_TEST_S3 ?? 'http://127.0.0.1:9000',
});
const tables = tableNames(process.env.FENCEPOST_EXAMPLE_PREFIX ?? 'example-');
const stores = awsStores(clients, { ...tables, bucket: process.env.FENCEPOST_EXAMPLE_BUCKET ?? 'example-manifests' });
const s3 = { manifests: stores.manifests, clock: systemClock };
const holder = process.argv[2] ?? 'worker-1';
const job = 'export#2026-09-28';
const place: ManifestPlace = { key: 'exports/2026-09-28/manifest.json', chunkPrefix: 'exports/2026-09-28/chunks/' };

async function main(): Promise<void> {
  const deps = { locks: stores.locks, clock: systemClock };
  const summary = await withLease(deps, job, holder, {}, async (lease) => {
    // 1. Raise the manifest's token first: If-None-Match: * creates it; if it exists, read it and rewrite it If-Match.
    const { writer } = await lease.act(() => ManifestWriter.raise(s3, place, job, lease));
    for (const chunk of [0, 1]) {
      // 2. The object under our token's key (nobody else writes it), then the commit: If-Match on our last ETag.
      const object = await lease.act(() => writer.putChunkObject(chunk, `${JSON.stringify({ chunk, holder, token: lease.token })}\n`));
      await lease.act(() => writer.commitChunk(chunk, { ...object, records: 1 }));
    }
    await lease.act(() => writer.markDone());
    const manifest = await readManifest(s3, place.key); // what readers trust
    return {
      holder,
      token: lease.token,
      manifestToken: manifest?.body.token,
      chunks: Object.keys(manifest?.body.chunks ?? {}),
    };
  });
  console.log(JSON.stringify(summary));
}

main().finally(() => clients.destroy());

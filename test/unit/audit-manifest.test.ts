/** The auditor's manifest check (lib/core/audit.ts checkManifest) reads the chunk objects through the ManifestStore. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkManifest, type FencedJobState } from '../../lib/core/audit';
import type { JobRow } from '../../lib/core/fence';
import { VirtualClock } from '../../lib/core/clock';
import { ManifestWriter, readManifest, type ManifestPlace } from '../../lib/core/manifest';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';

const PLACE: ManifestPlace = { key: 'jobs/2026-09-28/manifest.json', chunkPrefix: 'jobs/2026-09-28/chunks/' };

test('checkManifest on the in-memory store: every named object present and unchanged is ok; a changed or a missing one is named', async () => {
  const clock = new VirtualClock();
  const store = new MemoryManifestStore();
  const deps = { manifests: store, clock };
  const { writer } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 5);
  for (const chunk of [0, 1]) {
    const o = await writer.putChunkObject(chunk, `${chunk}\n`);
    await writer.commitChunk(chunk, { ...o, records: 1 });
  }
  await writer.markDone();
  const state = async (): Promise<FencedJobState> => ({
    ref: { jobId: 'job', lockKey: 'lock', manifest: PLACE },
    job: { fence: 5, state: 'DONE', chunk_count: 2 } as unknown as JobRow,
    lock: undefined,
    manifest: (await readManifest(deps, PLACE.key))?.body,
    chunkFences: new Map(),
    jobRows: [],
  });
  const ok = await checkManifest(deps, await state());
  assert.equal(ok.ok, true, ok.detail);

  const m = (await readManifest(deps, PLACE.key))!.body;
  await store.put(m.chunks['00'].key, 'rewritten by someone\n', 'application/x-ndjson');
  const s = await state();
  const changed = await checkManifest(deps, {
    ...s,
    manifest: { ...s.manifest!, chunks: { ...s.manifest!.chunks, '01': { ...s.manifest!.chunks['01'], key: `${PLACE.chunkPrefix}01.t5.missing` } } },
  });
  assert.equal(changed.ok, false);
  assert.match(changed.detail, new RegExp(`chunk 00: object ${m.chunks['00'].key} changed since it was committed`));
  assert.match(changed.detail, /chunk 01: object jobs\/2026-09-28\/chunks\/01\.t5\.missing named by the manifest does not exist/);
});

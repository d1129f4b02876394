/**
 * The failure path: give the lease back, conditional on it still being ours (holder and epoch), without renewing.
 * It changes nothing if the lease moved on. A run that never got a token has nothing to release.
 *
 * With `keep`, it only says whether the lease is still ours (`held`) and gives nothing back: after a failed Map whose
 * other chunks may still run under the lease, it must lapse once the last of them stops renewing.
 */
import { readLock, releaseClaimed } from '../core/lease';
import { fromEnvironment, invoke, runInput, type RuntimeSource } from './runtime';

/** The release step of the failure paths, made from a runtime source. */
export const releaseStep = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; token?: unknown; keep?: unknown }) =>
  invoke('release', runtime, async (rt) => {
    const { jobDate, holder } = runInput(event);
    const token = Number(event.token);
    if (!Number.isSafeInteger(token) || token < 1) return { released: false, held: false };
    if (event.keep === true) {
      const item = await readLock(rt.deps, rt.job.lock(jobDate));
      return { released: false, held: item?.holder === holder && Number(item?.epoch) === token };
    }
    return { released: await releaseClaimed(rt.deps, rt.job.lock(jobDate), holder, token, rt.lease) };
  });

export const handler = releaseStep(fromEnvironment());

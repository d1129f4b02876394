/**
 * The failure path: give the lease back, conditional on it still being ours (holder and epoch), without renewing.
 * It changes nothing if the lease moved on. A run that never got a token has nothing to release.
 */
import { releaseClaimed } from '../core/lease';
import { Keys } from '../core/schema';
import { invoke, nightInput } from './runtime';

export const handler = (event: { jobDate?: unknown; holder?: unknown; token?: unknown }) =>
  invoke('release', async (rt) => {
    const { jobDate, holder } = nightInput(event);
    const token = Number(event.token);
    if (!Number.isSafeInteger(token) || token < 1) return { released: false };
    return { released: await releaseClaimed(rt.leaseDeps, Keys.lock(jobDate), holder, token, rt.config) };
  });

/**
 * mulberry32: a small, seeded PRNG, so a fault schedule or an injected conflict is reproducible from its seed. One
 * generator for the whole project: the simulator's `Rng`, the explorer, the chaos suite and the conflict proxy all draw
 * from it, so a seed means the same sequence everywhere.
 */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

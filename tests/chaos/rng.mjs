// A seeded pseudo-random generator (splitmix32 over a 32-bit state): the same seed
// and stream name give the same sequence on every machine, so a campaign's fault
// schedule and each client's choices follow from its seed alone.
import { createHash } from 'node:crypto';

export function makeRng(seed, stream = '') {
  let s = createHash('sha256').update(`${seed}/${stream}`).digest().readUInt32LE(0);
  const next = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // lo..hi inclusive
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    chance: (p) => next() < p,
    // one of weighted [[value, weight], ...]
    weighted(pairs) {
      const total = pairs.reduce((a, [, w]) => a + w, 0);
      let x = next() * total;
      for (const [v, w] of pairs) if ((x -= w) < 0) return v;
      return pairs[pairs.length - 1][0];
    },
    hex(n) {
      let out = '';
      while (out.length < n) out += Math.floor(next() * 4294967296).toString(16).padStart(8, '0');
      return out.slice(0, n);
    },
  };
}

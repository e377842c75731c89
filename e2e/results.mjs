// Writes synthetic kymo-JSON results for the browser tests: one directory per commit
// (`OUT/01/micro.json` …), with a step at commit STEP so that the server's analysis finds a
// regression (parse/json +30 %) and an improvement (alloc/arena −25 %) there.
// Usage: node e2e/results.mjs OUT COMMITS STEP
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [out, commits, step] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
if (!out || !(commits > 0) || !(step > 1 && step <= commits)) {
  console.error('usage: node e2e/results.mjs OUT COMMITS STEP');
  process.exit(2);
}

// A fixed-seed generator (mulberry32), so every run sees the same noise.
let seed = 0x6b796d6f;
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const jitter = (relative) => 1 + (random() * 2 - 1) * relative;

// name → [level in ns, factor from the step on]
const BENCHMARKS = {
  'parse/json': [1000, 1.3],
  'alloc/arena': [400, 0.75],
  'hash/fnv': [250, 1],
  'sort/merge': [5000, 1],
};

for (let commit = 1; commit <= commits; commit++) {
  const benchmarks = Object.entries(BENCHMARKS).map(([name, [level, factor]]) => {
    // Commit-to-commit drift of ±0.5 %, then ±1 % between a commit's samples.
    const centre = level * (commit >= step ? factor : 1) * jitter(0.005);
    const samples = Array.from({ length: 5 }, () => +(centre * jitter(0.01)).toFixed(2));
    return {
      name,
      metrics: [{ name: 'time', unit: 'ns', direction: 'lower', samples }],
    };
  });
  const dir = join(out, String(commit).padStart(2, '0'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'micro.json'), JSON.stringify({ benchmarks }));
}

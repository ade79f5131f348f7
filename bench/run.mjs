// `npm run bench`: every benchmark in bench/ (all *.mjs but this runner and
// lib.mjs), one after another, each in its own process so one's memory and
// caches do not colour the next; each runs with its own defaults.
//   node bench/run.mjs            all
//   BENCH_ONLY=checkpoint node bench/run.mjs   just bench/checkpoint.mjs
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const here = dirname(fileURLToPath(import.meta.url));
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim()).filter(Boolean);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.mjs') && f !== 'run.mjs' && f !== 'lib.mjs')
  .filter((f) => !only || only.includes(f.replace(/\.mjs$/, '')))
  .sort();
let failed = 0;
for (const f of files) {
  console.log(`\n=== bench/${f} ===`);
  const r = spawnSync(process.execPath, [join(here, f)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.log(`bench/${f} failed (${r.status ?? r.signal})`);
  }
}
process.exit(failed ? 1 : 0);

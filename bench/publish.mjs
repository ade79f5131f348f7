// Issue 2 benchmark: publication latency WITHOUT Git (git unavailable) at
// vault sizes of 1k, 10k and 100k records, with the number of fsync calls
// Knowledge makes per publication. Goal: 100k within 1.2x of 1k.
//   node bench/publish.mjs [sizes...]
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { tempDir, cleanup, pct, machine, ms, publishInBatches } from './lib.mjs';

const require = createRequire(import.meta.url);
const fs = require('node:fs');
let fsyncs = 0;
const realFsync = fs.fsyncSync;
fs.fsyncSync = (fd) => { fsyncs++; return realFsync(fd); };
syncBuiltinESMExports();

const { initStore } = await import('../dist/store/store.js');
const { KnowledgeService } = await import('../dist/service.js');

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
const SIZES = sizes.length ? sizes : [1000, 10000, 100000];
const SAMPLES = 200;

function page(i, extra = '') {
  return `---\nkind: page\ntitle: Record ${i}${extra}\ntags: [bench]\n---\nBody of record ${i}. Lorem ipsum dolor sit amet.\n`;
}

console.log(`# publish latency without git — ${new Date().toISOString()} — ${machine()}`);
const rows = [];
for (const n of SIZES) {
  const dir = tempDir('kn-bench-pub-');
  const env = { ...process.env, KNOWLEDGE_HOME: join(dir, 'home') };
  initStore(join(dir, 'st'), { env });
  const svc = KnowledgeService.open(join(dir, 'st'), { write: true, env, git: { gitPath: '/nonexistent/git' } });
  const t0 = performance.now();
  await publishInBatches(svc, n, page);
  const seedMs = performance.now() - t0;
  const lat = [];
  const f0 = fsyncs;
  for (let k = 0; k < SAMPLES; k++) {
    const s = performance.now();
    const r = await svc.publish({ partition: 'private', actor: 'agent', records: [page(n + k, ' sample')], evidence: [] });
    lat.push(performance.now() - s);
    if (r.git.state !== 'unavailable') throw new Error(`expected git unavailable, got ${r.git.state}`);
  }
  const perPub = (fsyncs - f0) / SAMPLES;
  svc.close();
  cleanup(dir);
  rows.push({ n, p50: pct(lat, 50), p95: pct(lat, 95), perPub, seedMs });
  console.log(`${String(n).padStart(7)} records: p50 ${ms(pct(lat, 50))}, p95 ${ms(pct(lat, 95))}, fsync calls/publication ${perPub.toFixed(1)} (+2 SQLite WAL commits), seeded in ${(seedMs / 1000).toFixed(1)} s`);
}
if (rows.length > 1) {
  const a = rows[0], b = rows[rows.length - 1];
  console.log(`ratio p50 ${b.n}/${a.n}: ${(b.p50 / a.p50).toFixed(2)}x (goal <= 1.2x)`);
}

// Gateway benchmark (issue 6 goals at 100k records: record page p95 <= 50 ms,
// search p95 <= 100 ms), measured at the HTTP boundary:
//   - in-process through the Hono app (`app.request()`: routing, parameter
//     checks, the per-request availability check, the service, JSON), and
//   - over real HTTP on loopback (`startGateway` + keep-alive fetch), which
//     adds the Node adapter and the socket.
//
// The store is built like bench/read.mjs: real publications in this process
// (200 records each, Git made unavailable so no checkpoint runs), so files,
// index and FTS5 tables are exactly what Knowledge writes. Publishing 100k
// records durably costs ~100k fsyncs, so the store is built on tmpfs
// (/dev/shm) when it exists, then copied to an ordinary disk directory,
// where it is measured.
//   npm run build && node bench/gateway.mjs [records=100000] [--keep] [--store DIR]
//   --keep: leave the store and print its path; --store DIR: measure a store
//   kept by an earlier run with the same record count (the build is skipped).
/* global fetch */
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { cleanup, pct, machine, ms, corpus, seedDirs, seedStore } from './lib.mjs';

const { KnowledgeService } = await import('../dist/service.js');
const { createApp } = await import('../dist/gateway/app.js');
const { startGateway } = await import('../dist/gateway/server.js');

const KEEP = process.argv.includes('--keep');
const REUSE = process.argv.includes('--store') ? process.argv[process.argv.indexOf('--store') + 1] : null;
const N = Number(/^\d+$/.test(process.argv[2] ?? '') ? process.argv[2] : 100_000);
const PER_PUBLICATION = 200;
const SAMPLES = 500;

const { rand, VOCAB, zipf, words, TAGS } = corpus(7);
const idOf = (i) => `rec-g${String(i).padStart(7, '0')}`;

function record(i) {
  const fm = ['---', 'kind: page', `id: ${idOf(i)}`, `title: ${JSON.stringify(`${words(2 + Math.floor(rand() * 4))} ${i}`)}`, `tags: [${TAGS[i % TAGS.length]}]`];
  if (i % 5 === 0) fm.push(`aliases: [${JSON.stringify(`alias ${words(2)} ${i}`)}]`);
  if (i > 0 && i % 3 === 0) fm.push(`dependencies: [${idOf(Math.floor(rand() * i))}]`);
  fm.push('---');
  // Bodies with some Markdown, as the page renders them.
  return `${fm.join('\n')}\n# ${words(3)}\n\n${words(40 + Math.floor(rand() * 80))}.\n\n- ${words(5)}\n- ${words(5)}\n`;
}

console.log(`# gateway — ${new Date().toISOString()} — ${machine()}`);
const seeded = seedDirs('kn-bench-gw-', REUSE);
const { dir, storeDir, env } = seeded;
try {
  await seedStore(seeded, { n: N, record, perPublication: PER_PUBLICATION });
  console.log(`load average before measuring: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);

  const report = (name, samples, note = '') =>
    console.log(`${name.padEnd(40)} p50 ${ms(pct(samples, 50)).padStart(10)}  p95 ${ms(pct(samples, 95)).padStart(10)}  max ${ms(Math.max(...samples)).padStart(10)}${note}`);
  const searchPaths = () => {
    const shapes = [
      () => `q=${VOCAB[Math.floor(rand() * 5)]}`,
      () => `q=${VOCAB[50 + Math.floor(rand() * 200)]}`,
      () => `q=${encodeURIComponent(`${zipf()} ${zipf()}`)}`,
      () => `q=${encodeURIComponent(words(3))}&mode=any`,
      () => `q=${VOCAB[Math.floor(rand() * 5)]}&tag=${TAGS[Math.floor(rand() * TAGS.length)]}`,
    ];
    return `/api/search?${shapes[Math.floor(rand() * shapes.length)]()}`;
  };

  async function measure(label, get) {
    for (let k = 0; k < 50; k++) await get(`/api/records/${idOf(Math.floor(rand() * N))}`); // warm
    const rec = [];
    for (let k = 0; k < SAMPLES; k++) {
      const s = performance.now();
      const r = await get(`/api/records/${idOf(Math.floor(rand() * N))}`);
      rec.push(performance.now() - s);
      if (r.status !== 200) throw new Error(`record page: HTTP ${r.status}`);
    }
    report(`${label}: GET /api/records/:id`, rec);
    const srch = [];
    let matches = 0;
    for (let k = 0; k < SAMPLES; k++) {
      const s = performance.now();
      const r = await get(searchPaths());
      srch.push(performance.now() - s);
      if (r.status !== 200) throw new Error(`search: HTTP ${r.status}`);
      matches += r.total;
    }
    report(`${label}: GET /api/search`, srch, `  (avg ${Math.round(matches / SAMPLES)} matches)`);
    const list = [];
    for (let k = 0; k < SAMPLES / 5; k++) {
      const s = performance.now();
      await get(`/api/records?limit=50&offset=${Math.floor(rand() * 1000) * 50}`);
      list.push(performance.now() - s);
    }
    report(`${label}: GET /api/records (browse, 50)`, list);
  }

  // In-process, as the API tests call it.
  const svc = KnowledgeService.open(storeDir, { write: true, env, git: { gitPath: '/nonexistent/git' } });
  const app = createApp(svc);
  await measure('in-process', async (p) => {
    const r = await app.request(p);
    const body = await r.json();
    return { status: r.status, total: body.total ?? 0 };
  });
  svc.close();

  // Real HTTP on loopback, as the page calls it.
  const gw = await startGateway({ storeDir, port: 0, env, git: { gitPath: '/nonexistent/git' } });
  try {
    await measure('HTTP', async (p) => {
      const r = await fetch(`${gw.origin}${p}`);
      const body = await r.json();
      return { status: r.status, total: body.total ?? 0 };
    });
  } finally {
    await gw.close();
  }
} finally {
  if (KEEP && dir) console.log(`kept the store: node bench/gateway.mjs ${N} --store ${join(dir, 'st')}`);
  else if (dir) cleanup(dir);
}

// Read-side benchmark [READ-1] (issue 6 goals: record page p95 <= 50 ms,
// search p95 <= 100 ms at 100k records).
//
// How the store is built: through real publications in this one process
// (KnowledgeService.publish, 200 records per publication, Git made
// unavailable so no checkpoint runs). So the vault files, the `records`
// index, and the FTS5 / link indexes (kept by migration 003's triggers) are
// exactly what Knowledge writes; nothing is inserted behind its back.
// Publishing 100k records durably costs ~100k fsyncs (~8 min here), so the
// store is built on tmpfs (/dev/shm, where fsync is free) when it exists
// and then copied to an ordinary disk directory, where it is measured.
//
// Then, on a read-only service opened afterwards (as a Gateway or MCP
// server would read), it measures p50/p95 of readRecord, search (several
// query shapes), lookup and listRecords.
//   node bench/read.mjs [records=100000] [--keep] [--store DIR]
//   --keep: leave the store and print its path; --store DIR: measure a store kept
//   by an earlier run with the same record count (the build is skipped).
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { cleanup, pct, machine, ms, corpus, seedDirs, seedStore } from './lib.mjs';

const { KnowledgeService } = await import('../dist/service.js');

const KEEP = process.argv.includes('--keep');
const REUSE = process.argv.includes('--store') ? process.argv[process.argv.indexOf('--store') + 1] : null;
const N = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 100_000);

const PER_PUBLICATION = 200; // the per-publication maximum
const SAMPLES = 500;
const OP = { kind: 'operator' };

const { rand, VOCAB, zipf, words, TAGS } = corpus(42);
const idOf = (i) => `rec-b${String(i).padStart(7, '0')}`;
const titles = [];

function record(i) {
  const title = `${words(2 + Math.floor(rand() * 4))} ${i}`;
  titles.push(title);
  const fm = ['---', 'kind: page', `id: ${idOf(i)}`, `title: ${JSON.stringify(title)}`, `tags: [${TAGS[i % TAGS.length]}]`];
  if (i % 5 === 0) fm.push(`aliases: [${JSON.stringify(`alias ${words(2)} ${i}`)}]`);
  // Links to earlier records in the same publication batch or before: backlinks to measure.
  if (i > 0 && i % 3 === 0) fm.push(`dependencies: [${idOf(Math.floor(rand() * i))}]`);
  const link = i > 0 && i % 4 === 0 ? ` See [[${idOf(Math.floor(rand() * i))}]].` : '';
  fm.push('---');
  return `${fm.join('\n')}\n${words(40 + Math.floor(rand() * 80))}.${link}\n`;
}

// Every tenth publication goes to one of ten conversations, so agents' partition scoping has work to do.
const partitionOf = (pub) => (pub % 10 === 9 ? `conversation:S${(Math.floor(pub / 10) % 10) + 1}` : 'private');

console.log(`# read side — ${new Date().toISOString()} — ${machine()}`);
const seeded = seedDirs('kn-bench-read-', REUSE);
const { dir, build, env, storeDir } = seeded;
try {
  // When reusing: the same titles (and random sequence) as the run that built it.
  await seedStore(seeded, { n: N, record, perPublication: PER_PUBLICATION, partitionOf });

  const svc = KnowledgeService.open(storeDir, { write: false, env });
  // Wall time, and the CPU time this process spent (insensitive to other load on the machine).
  let cpuSamples = [];
  const time = (fn) => {
    const c = process.cpuUsage();
    const s = performance.now();
    const r = fn();
    const wall = performance.now() - s;
    const cu = process.cpuUsage(c);
    cpuSamples.push((cu.user + cu.system) / 1000);
    return [wall, r];
  };
  const report = (name, samples, note = '') => {
    console.log(`${name.padEnd(42)} p50 ${ms(pct(samples, 50)).padStart(10)}  p95 ${ms(pct(samples, 95)).padStart(10)}  max ${ms(Math.max(...samples)).padStart(10)}  | cpu p50 ${ms(pct(cpuSamples, 50)).padStart(9)} p95 ${ms(pct(cpuSamples, 95)).padStart(9)}${note}`);
    cpuSamples = [];
  };

  // Warm the page cache the way a running Gateway would be warm.
  for (let k = 0; k < 50; k++) svc.readRecord(OP, idOf(Math.floor(rand() * N)));
  console.log(`load average at start: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);

  const rr = [];
  let backlinks = 0;
  for (let k = 0; k < SAMPLES; k++) {
    const [t, v] = time(() => svc.readRecord(OP, idOf(Math.floor(rand() * N))));
    rr.push(t);
    backlinks += v.backlinksTotal;
  }
  report('readRecord (random id)', rr, `  (avg ${(backlinks / SAMPLES).toFixed(1)} backlinks)`);

  const shapes = [
    ['search 1 common word', () => ({ query: VOCAB[Math.floor(rand() * 5)] })],
    ['search 1 mid-frequency word', () => ({ query: VOCAB[50 + Math.floor(rand() * 200)] })],
    ['search 1 rare word', () => ({ query: VOCAB[3000 + Math.floor(rand() * 5000)] })],
    ['search 2 words (all)', () => ({ query: `${zipf()} ${zipf()}` })],
    ['search 3 words (any)', () => ({ query: words(3), mode: 'any' })],
    ['search 2-word phrase', () => ({ query: `${zipf()} ${zipf()}`, mode: 'phrase' })],
    ['search common word + tag filter', () => ({ query: VOCAB[Math.floor(rand() * 5)], tag: TAGS[Math.floor(rand() * TAGS.length)] })],
    ['search common word, page 3', () => ({ query: VOCAB[Math.floor(rand() * 5)], offset: 40 })],
  ];
  const all = [];
  const allCpu = [];
  for (const [name, make] of shapes) {
    const s = [];
    let total = 0;
    for (let k = 0; k < SAMPLES / 5; k++) {
      const [t, r] = time(() => svc.search(OP, make()));
      s.push(t);
      all.push(t);
      total += r.total;
    }
    allCpu.push(...cpuSamples);
    report(name, s, `  (avg ${Math.round(total / s.length)} matches)`);
  }
  cpuSamples = allCpu;
  report('search (all shapes together)', all);

  const agent = { kind: 'agent', agentId: 'bench', session: 'S1' };
  const sa = [];
  for (let k = 0; k < SAMPLES / 5; k++) sa.push(time(() => svc.search(agent, { query: `${zipf()} ${zipf()}` }))[0]);
  report('search 2 words as an agent (private + S1)', sa);

  const lk = [];
  for (let k = 0; k < SAMPLES / 5; k++) lk.push(time(() => svc.lookup(OP, titles[Math.floor(rand() * N)].toUpperCase()))[0]);
  report('lookup by title (other case)', lk);
  const ls = [];
  for (let k = 0; k < SAMPLES / 5; k++) ls.push(time(() => svc.listRecords(OP, { limit: 100, offset: Math.floor(rand() * 100) * 100 }))[0]);
  report('listRecords (100, random page)', ls);
  const lt = [];
  for (let k = 0; k < SAMPLES / 5; k++) lt.push(time(() => svc.listRecords(OP, { tag: TAGS[k % TAGS.length], limit: 100 }))[0]);
  report('listRecords (tag filter)', lt);
  // An agent with a session reads private and its conversation: two partitions, merged page by page.
  const la = [];
  for (let k = 0; k < SAMPLES / 5; k++) la.push(time(() => svc.listRecords(agent, { limit: 100, offset: k % 2 ? 0 : Math.floor(rand() * 100) * 100 }))[0]);
  report('listRecords as an agent (private + S1; first or random page)', la);
  // The last pages of the inventory, by offset (a position: the index is
  // counted up to it) and by cursor (the index seeks to it), side by side at
  // the same places.
  for (const [label, filter] of [['', {}], [', tag filter', { tag: TAGS[0] }]]) {
    const total = svc.listRecords(OP, { ...filter, limit: 1 }).total;
    const places = Array.from({ length: SAMPLES / 10 }, () => Math.max(1, total - 100 - Math.floor(rand() * 100)));
    const cursors = places.map((p) => svc.listRecords(OP, { ...filter, limit: 1, offset: p - 1 }).nextCursor);
    const byOffset = [];
    const byCursor = [];
    const pages = places.map((p) => {
      const [t, a] = time(() => svc.listRecords(OP, { ...filter, limit: 100, offset: p }));
      byOffset.push(t);
      return a.records.map((r) => r.id).join();
    });
    const offsetCpu = cpuSamples;
    cpuSamples = [];
    cursors.forEach((cursor, k) => {
      const [t, b] = time(() => svc.listRecords(OP, { ...filter, limit: 100, cursor }));
      if (b.records.map((r) => r.id).join() !== pages[k]) throw new Error('offset and cursor pages differ');
      byCursor.push(t);
    });
    const cursorCpu = cpuSamples;
    cpuSamples = offsetCpu;
    report(`listRecords (100, last pages by offset${label})`, byOffset);
    cpuSamples = cursorCpu;
    report(`listRecords (100, last pages by cursor${label})`, byCursor, `  (p50 ratio cursor/offset ${(pct(byCursor, 50) / pct(byOffset, 50)).toFixed(2)})`);
  }
  svc.close();
} finally {
  if (dir) {
    if (KEEP) console.log(`kept the store at ${storeDir} (KNOWLEDGE_HOME ${env.KNOWLEDGE_HOME})`);
    else cleanup(dir);
    if (build !== dir) cleanup(build);
  }
}

// Activity (Appendix A, SURF-2) on a store with many publications: the first
// page (what the web page asks for every few seconds), a page deep in the list
// by offset and by cursor, and the last page — each with the publications'
// created_at index (migration 020) and, side by side on the same database,
// without it (dropped: the plan every store had before, which read and sorted
// the whole publications table, plans included, for every page).
//   node bench/activity.mjs [publications=100000] [real=1000]
// `real` publications of one record each are made by the service (each
// committed); the rest are copies of their rows (new ids, each a day older
// per copy), so the table holds real plans and receipts at the full count.
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { tempDir, cleanup, machine, userGitEnv, publishInBatches } from './lib.mjs';

const { initStore } = await import('../dist/store/store.js');
const { KnowledgeService } = await import('../dist/service.js');

const [N, REAL] = [...process.argv.slice(2).filter((a) => /^\d+$/.test(a)).map(Number), 100_000, 1000].slice(0, 2);
const page = (i) => `---\nkind: page\ntitle: Record ${i}\n---\nBody of record ${i}. Lorem ipsum dolor sit amet.\n`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`# activity with ${N} publications (${REAL} real) — ${new Date().toISOString()} — ${machine()}`);
const dir = tempDir('kn-bench-activity-');
try {
  const env = userGitEnv(join(dir, 'home'));
  const store = join(dir, 'st');
  initStore(store, { env });
  const svc = KnowledgeService.open(store, { write: true, env, git: { pathEnv: env.PATH } });
  let t = performance.now();
  await publishInBatches(svc, REAL, page, { perPublication: 1 });
  console.log(`${REAL} publications of one record, each committed, in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const db = svc.store.db;
  t = performance.now();
  const copy = db.prepare(`INSERT INTO publications(publication_id, request_id, request_hash, partition, actor, status, created_at, plan, receipt, batch_id, failure)
    SELECT 'copy' || ? || '-' || publication_id, 'copy' || ? || '-' || request_id, request_hash, partition, actor, status,
      strftime('%Y-%m-%dT%H:%M:%fZ', julianday(created_at) - ?), plan, receipt, batch_id, failure
    FROM publications WHERE publication_id NOT LIKE 'copy%' LIMIT ?`);
  db.transaction(() => {
    for (let k = 1, have = REAL; have < N; k++) have += copy.run(k, k, k, N - have).changes;
  })();
  const count = db.prepare('SELECT count(*) AS n FROM publications').get().n;
  const bytes = db.prepare("SELECT sum(length(plan)) + sum(length(receipt)) AS b FROM publications").get().b;
  console.log(`copied to ${count} publication rows (${(bytes / 1048576).toFixed(0)} MiB of plans and receipts) in ${((performance.now() - t) / 1000).toFixed(1)} s`);

  const time = (f, runs) => {
    const xs = [];
    for (let i = 0; i < runs; i++) {
      const s = performance.now();
      f();
      xs.push(performance.now() - s);
    }
    return median(xs);
  };
  const deep = Math.floor(count / 2);
  const measure = () => {
    const at = (o) => svc.activity(1, o - 1)[0].cursor;
    const deepCursor = at(deep);
    const lastCursor = at(count - 200);
    return {
      'first page (limit 51, as the web page asks)': time(() => svc.activity(51, 0), 15),
      [`page at ${deep} by offset`]: time(() => svc.activity(200, deep), 5),
      [`page at ${deep} by cursor`]: time(() => svc.activity(200, 0, deepCursor), 15),
      'last page by offset': time(() => svc.activity(200, count - 200), 5),
      'last page by cursor': time(() => svc.activity(200, 0, lastCursor), 15),
    };
  };
  const withIndex = measure();
  db.exec('DROP INDEX publications_created');
  const without = measure();
  db.exec('CREATE INDEX publications_created ON publications(created_at)');
  console.log('| | with the index | without it (dropped) | ratio |\n|---|---|---|---|');
  for (const k of Object.keys(withIndex)) {
    console.log(`| ${k} | ${withIndex[k].toFixed(2)} ms | ${without[k].toFixed(2)} ms | ${(withIndex[k] / without[k]).toFixed(3)}× |`);
  }
  svc.close();
} finally {
  cleanup(dir);
}

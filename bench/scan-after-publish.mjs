// The first scan after publications [SCAN-4]: a publication's own installs are
// recorded racy (their stat is taken within the racy window of their write:
// docs/local-history.md, "Scans"), so the next scan reads and hashes them once,
// as Git re-reads racily clean index entries; scans after it recognise them from
// their metadata. This measures that one-time cost side by side with the
// unchanged rescan of the same vault, in one process (a Gateway's service, so no
// process start is counted), on an ordinary disk directory.
//   node bench/scan-after-publish.mjs [records=20000]
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { tempDir, cleanup, machine, userGitEnv, publishInBatches } from './lib.mjs';

const { initStore } = await import('../dist/store/store.js');
const { KnowledgeService } = await import('../dist/service.js');

const N = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 20_000);
const OP = { kind: 'operator' };
const page = (i) => `---\nkind: page\ntitle: Record ${i}\ntags: [bench]\n---\nBody of record ${i}. Lorem ipsum dolor sit amet.\n`;

console.log(`# the first scan after ${N} published records — ${new Date().toISOString()} — ${machine()}`);
const dir = tempDir('kn-bench-scanpub-');
try {
  const env = userGitEnv(join(dir, 'home'));
  const store = join(dir, 'st');
  initStore(store, { env });
  const svc = KnowledgeService.open(store, { write: true, env, git: { pathEnv: env.PATH } });
  // The baseline of the (empty) partition first, so the scans below only observe.
  await svc.scan({ caller: OP });
  let t = performance.now();
  await publishInBatches(svc, N, page);
  console.log(`published ${N} records (200 a publication, each committed) in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const runs = [];
  for (let i = 0; i < 4; i++) {
    t = performance.now();
    const r = await svc.scan({ caller: OP });
    runs.push({ ms: performance.now() - t, hashed: r.hashed, unchanged: r.unchanged, git: r.git });
    if (r.git !== null) throw new Error(`scan ${i + 1} found changes`);
  }
  svc.close();
  const later = runs.slice(1).map((r) => r.ms).sort((a, b) => a - b)[1];
  console.log(`first scan after the publications: ${runs[0].ms.toFixed(0)} ms, ${runs[0].hashed} files read and hashed, ${runs[0].unchanged} recognised from metadata`);
  console.log(`later scans (unchanged): ${runs.slice(1).map((r) => `${r.ms.toFixed(0)} ms (${r.hashed} read)`).join(', ')}; median ${later.toFixed(0)} ms`);
  console.log(`the first scan's one-time re-read costs ${(runs[0].ms / later).toFixed(2)}x an unchanged rescan, ${((runs[0].ms - later) / Math.max(1, runs[0].hashed) * 1000).toFixed(1)} µs a file read`);
} finally {
  cleanup(dir);
}

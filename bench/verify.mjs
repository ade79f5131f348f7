// `knowledge verify` on healthy stores of N committed files, in two shapes:
//   scan:N       N record files written straight into one folder of the vault
//                (private/n/), then one scan: a single baseline batch of N files
//                in one commit, one folder of N entries;
//   publish:N/K  N records published through the service, K a publication
//                (N/K publications, each committed): many small batches whose
//                files are spread over the shard folders.
// Each store is built once; verify runs `runs` times on it in one process (a
// service, so no process start is counted) and the median is reported. With
// --against=DIST (another build's dist/, e.g. the commit before a change) the
// same store is verified by that build too, runs alternating, and the ratio is
// printed. --timeout=MS sets the git runner's per-call timeout of both (default
// the runner's 30 s, what `knowledge verify` uses); a verify that meets it
// reports repository-unreadable, and is printed as such.
//   node bench/verify.mjs [scan:5000 scan:20000 publish:20000/10] [--runs=3] [--against=DIST] [--timeout=MS]
import { performance } from 'node:perf_hooks';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir, cleanup, machine, userGitEnv, publishInBatches } from './lib.mjs';

const args = process.argv.slice(2);
const opt = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const cases = args.filter((a) => !a.startsWith('--'));
if (cases.length === 0) cases.push('scan:5000', 'scan:20000', 'publish:20000/10');
const RUNS = Number(opt('runs') ?? 3);
const timeoutMs = opt('timeout') ? Number(opt('timeout')) : undefined;
const against = opt('against');

const { initStore } = await import('../dist/store/store.js');
const { KnowledgeService } = await import('../dist/service.js');
const builds = [{ name: 'this build', KnowledgeService }];
if (against) {
  const other = await import(pathToFileURL(join(resolve(against), 'service.js')).href);
  builds.push({ name: `--against ${against}`, KnowledgeService: other.KnowledgeService });
}

const OP = { kind: 'operator' };
const handMade = (i) =>
  `---\nformat: knowledge-record-v1\nid: r-${i}\nrevision: 1\nkind: page\ntitle: R ${i}\nrecorded_at: 2026-01-01T00:00:00Z\n` +
  `updated_at: 2026-01-01T00:00:00Z\nscope: private\nlifecycle: active\n---\nbody ${i}\n`;
const page = (i) => `---\nkind: page\ntitle: Record ${i}\ntags: [bench]\n---\nBody of record ${i}. Lorem ipsum dolor sit amet.\n`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`# knowledge verify — ${new Date().toISOString()} — ${machine()}`);
console.log(`# ${RUNS} runs each${timeoutMs ? `, git timeout ${timeoutMs} ms` : ''}`);
for (const c of cases) {
  const m = /^(scan|publish):(\d+)(?:\/(\d+))?$/.exec(c);
  if (!m) throw new Error(`unknown case ${c} (scan:N or publish:N/K)`);
  const [, shape, n, k] = [m[0], m[1], Number(m[2]), Number(m[3] ?? 10)];
  const dir = tempDir('kn-bench-verify-');
  try {
    const env = userGitEnv(join(dir, 'home'));
    const store = join(dir, 'st');
    initStore(store, { env });
    const git = { pathEnv: env.PATH, ...(timeoutMs ? { timeoutMs } : {}) };
    // Building is not measured: its checkpoints get all the time they need (the checkpoint of a 100k-file baseline in
    // one folder met the default 30 s timeout once, on a loaded machine).
    const writer = KnowledgeService.open(store, { write: true, env, git: { pathEnv: env.PATH, timeoutMs: 3_600_000 } });
    let t = performance.now();
    if (shape === 'scan') {
      const d = join(store, 'vault', 'private', 'n');
      mkdirSync(d, { recursive: true });
      for (let i = 0; i < n; i++) writeFileSync(join(d, `r${i}.md`), handMade(i));
      const r = await writer.scan({ caller: OP });
      if (r.git?.state !== 'committed') throw new Error(`the baseline scan was not committed: ${JSON.stringify(r.git)}`);
    } else {
      await publishInBatches(writer, n, page, { perPublication: k });
    }
    writer.close();
    const what = shape === 'scan' ? `${n} files in one folder, one baseline batch` : `${n} records in ${Math.ceil(n / k)} publications of ${k}`;
    console.log(`\n${c}: ${what} (built in ${((performance.now() - t) / 1000).toFixed(1)} s)`);
    const svcs = builds.map((b) => ({ ...b, svc: b.KnowledgeService.open(store, { write: false, env, git }), ms: [], last: null }));
    try {
      for (let i = 0; i < RUNS; i++) {
        for (const b of i % 2 === 0 ? svcs : [...svcs].reverse()) {
          t = performance.now();
          b.last = await b.svc.verify();
          b.ms.push(performance.now() - t);
        }
      }
    } finally {
      for (const b of svcs) b.svc.close();
    }
    for (const b of svcs) {
      const r = b.last;
      const verdict = r.ok ? 'ok' : `PROBLEMS ${r.problems.map((p) => `${p.code}: ${p.message}`).join('; ')}`;
      console.log(`  ${b.name}: median ${median(b.ms).toFixed(0)} ms (${b.ms.map((x) => x.toFixed(0)).join(', ')}), ${r.checked.files} files compared, ${r.checked.commits} commits — ${verdict}`);
    }
    if (svcs.length === 2) console.log(`  ratio (against ÷ this): ${(median(svcs[1].ms) / median(svcs[0].ms)).toFixed(1)}×`);
  } finally {
    cleanup(dir);
  }
}

// Shared helpers for the benchmarks: temp dirs, a clean git env, percentiles.
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';

export function tempDir(prefix) {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)));
}

export function cleanup(dir) {
  rmSync(dir, { recursive: true, force: true });
}

export function userGitEnv(home) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_') && !k.startsWith('KNOWLEDGE_')) env[k] = v;
  return { ...env, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'Bench', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'Bench', GIT_COMMITTER_EMAIL: 'b@x', LC_ALL: 'C' };
}

export function git(cwd, env, args, input) {
  return execFileSync('git', args, { cwd, env, input, maxBuffer: 1 << 30 });
}

export function pct(samples, p) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

export function machine() {
  const c = cpus();
  return `${c.length} × ${c[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, ${execFileSync('git', ['--version']).toString().trim()}`;
}

export function ms(n) {
  return `${n.toFixed(2)} ms`;
}

/**
 * Deterministic pseudo-random numbers and a Zipf-like vocabulary, so runs
 * compare. `rand` goes on drawing from the same sequence after the store is
 * built, so a kept store is measured exactly as a fresh one.
 */
export function corpus(seed) {
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const syll = ['ka', 'lo', 'mi', 're', 'tan', 'vo', 'shi', 'ne', 'dar', 'pu', 'el', 'gro', 'fen', 'zu', 'wil', 'ost'];
  const VOCAB = Array.from({ length: 8000 }, (_, i) => {
    let w = '';
    let x = i + 7;
    do { w += syll[x % syll.length]; x = Math.floor(x / syll.length); } while (x > 0);
    return w;
  });
  // Rank r is drawn with probability ~ 1/r.
  const zipf = () => VOCAB[Math.min(VOCAB.length - 1, Math.floor(Math.exp(rand() * Math.log(VOCAB.length))) - 1)];
  const words = (k) => Array.from({ length: k }, zipf).join(' ');
  const TAGS = Array.from({ length: 20 }, (_, i) => `tag${i}`);
  return { rand, VOCAB, zipf, words, TAGS };
}

/**
 * Directories for a seeded store: `dir` (disk, where it is measured), `build`
 * (tmpfs /dev/shm when it exists, where fsync is free, else `dir`), the env
 * and the store path. With `reuse` (a store kept by an earlier run) nothing
 * is created and `dir` / `build` are null.
 */
export function seedDirs(prefix, reuse) {
  const dir = reuse ? null : tempDir(prefix);
  const build = reuse ? null : existsSync('/dev/shm') ? realpathSync(mkdtempSync(`/dev/shm/${prefix}`)) : dir;
  const env = { ...process.env, KNOWLEDGE_HOME: reuse ? join(reuse, '..', 'home') : join(dir, 'home') };
  return { dir, build, env, storeDir: reuse ?? join(dir, 'st'), reuse };
}

/**
 * Seed the store of `seedDirs()` with `n` records through real publications
 * in this process (`perPublication` records each, Git made unavailable so no
 * checkpoint runs), on `build`, then copy it to `dir`. With a reused store,
 * only replay `record(i)` so the random sequence matches the run that built it.
 */
/** The most records one publication may carry. */
export const SEED_BATCH = 200;

/** Publish records 0..n-1 (`record(i)` gives each one's text), SEED_BATCH per publication. */
export async function publishInBatches(svc, n, record, { perPublication = SEED_BATCH, partitionOf = () => 'private' } = {}) {
  for (let i = 0; i < n; i += perPublication) {
    const recs = [];
    for (let j = i; j < Math.min(n, i + perPublication); j++) recs.push(record(j));
    await svc.publish({ partition: partitionOf(i / perPublication), actor: 'operator', records: recs, evidence: [] });
  }
}

export async function seedStore({ dir, build, env, reuse }, { n, record, perPublication, partitionOf = () => 'private' }) {
  if (reuse) {
    for (let i = 0; i < n; i++) record(i);
    console.log(`measuring the kept store ${reuse}`);
    return;
  }
  const { initStore } = await import('../dist/store/store.js');
  const { KnowledgeService } = await import('../dist/service.js');
  initStore(join(build, 'st'), { env });
  const writer = KnowledgeService.open(join(build, 'st'), { write: true, env, git: { gitPath: '/nonexistent/git' } });
  const t0 = performance.now();
  await publishInBatches(writer, n, record, { perPublication, partitionOf });
  writer.close();
  console.log(`built ${n} records by ${Math.ceil(n / perPublication)} publications in ${((performance.now() - t0) / 1000).toFixed(1)} s${build !== dir ? ' on tmpfs' : ''}`);
  if (build !== dir) {
    execFileSync('cp', ['-a', join(build, 'st'), join(dir, 'st')]);
    cleanup(build);
    console.log(`copied to ${dir} (disk) for reading`);
  }
}

// Shared helpers for the benchmarks: temp dirs, a clean git env, percentiles.
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';

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

// Issue 5 benchmarks (attachments):
//  1. `knowledge attach` of a 1 GiB non-media file (kept out of history, >= 100 MiB):
//     peak RSS (goal <= 160 MiB) and throughput against a plain `cp` + `sha256sum`
//     of the same file in the same run (goal >= 50%).
//  2. A 99 MiB non-media original end to end to `committed`: through
//     `knowledge publish --evidence`, and through `knowledge attach` + a claim citing it.
// Every command runs as its own process; peak RSS is that process's
// getrusage maxRSS, printed by a tiny launcher around the real CLI.
//   node bench/attach.mjs [sizeMiB]      (default 1024)
import { spawnSync, execFileSync } from 'node:child_process';
import { openSync, writeSync, closeSync, writeFileSync, rmSync, statSync } from 'node:fs';
import { randomFillSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { tempDir, cleanup, machine } from './lib.mjs';

const MiB = 1024 * 1024;
const bigMiB = Number(process.argv[2] ?? 1024);
const repoRoot = new URL('..', import.meta.url).pathname;
const mainJs = join(repoRoot, 'dist', 'cli', 'main.js');

// The launcher: the real CLI entry point, then this process's own peak RSS on stderr.
const launcher = `
const m = await import(${JSON.stringify(mainJs)});
const code = await m.run(process.argv.slice(1));
process.stderr.write('MAXRSS_KIB ' + process.resourceUsage().maxRSS + '\\n');
process.exitCode = code;
`;

function knowledge(dir, env, args) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', launcher, '--', ...args], { cwd: dir, env, encoding: 'utf8', maxBuffer: 64 * MiB });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`knowledge ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  const rss = Number(/MAXRSS_KIB (\d+)/.exec(r.stderr)?.[1] ?? NaN) / 1024;
  return { ms, rssMiB: rss, stdout: r.stdout };
}

function time(fn) {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

function randomFile(path, bytes, prefix = '') {
  const fd = openSync(path, 'w');
  const buf = Buffer.alloc(4 * MiB);
  let left = bytes;
  if (prefix) { writeSync(fd, Buffer.from(prefix)); left -= Buffer.byteLength(prefix); }
  while (left > 0) {
    randomFillSync(buf);
    // Printable bytes: a log-like text file, never sniffed as media.
    for (let i = 0; i < buf.length; i++) buf[i] = 0x20 + (buf[i] % 0x5e);
    const n = Math.min(left, buf.length);
    writeSync(fd, buf, 0, n);
    left -= n;
  }
  closeSync(fd);
}

const dir = tempDir('kn-bench-att-');
const env = { ...process.env, KNOWLEDGE_HOME: join(dir, 'home'), HOME: join(dir, 'home') };
for (const k of Object.keys(env)) if (k.startsWith('GIT_') || (k.startsWith('KNOWLEDGE_') && k !== 'KNOWLEDGE_HOME')) delete env[k];
console.log(`# attachments — ${new Date().toISOString()} — ${machine()}`);
try {
  // 1. Big attach vs cp + sha256sum.
  const big = join(dir, 'big.log');
  randomFile(big, bigMiB * MiB);
  // The baseline runs before and after the attach (this machine's disk is shared and noisy); both are reported.
  const baseline = () => {
    const cp = time(() => execFileSync('cp', [big, join(dir, 'big.copy')]));
    const sha = time(() => execFileSync('sha256sum', [big]));
    rmSync(join(dir, 'big.copy'));
    return { cp, sha };
  };
  const before = baseline();
  knowledge(dir, env, ['init', 'st']);
  const att = knowledge(dir, env, ['attach', '--store', 'st', 'big.log', '--json']);
  const after = baseline();
  const receipt = JSON.parse(att.stdout);
  if (receipt.size !== bigMiB * MiB || receipt.inHistory !== (bigMiB < 100) || receipt.git.state !== 'committed') throw new Error(`unexpected receipt ${att.stdout}`);
  const dbMiB = statSync(join(dir, 'st', 'state.sqlite')).size / MiB;
  console.log(`attach ${bigMiB} MiB: ${(att.ms / 1000).toFixed(2)} s (${(bigMiB / (att.ms / 1000)).toFixed(0)} MiB/s), peak RSS ${att.rssMiB.toFixed(0)} MiB (goal <= 160)`);
  for (const [when, b] of [['before', before], ['after', after]]) {
    const baseMs = b.cp + b.sha;
    console.log(`cp + sha256sum (${when}): ${(baseMs / 1000).toFixed(2)} s (cp ${(b.cp / 1000).toFixed(2)} s, sha256sum ${(b.sha / 1000).toFixed(2)} s) -> attach throughput ${((100 * baseMs) / att.ms).toFixed(0)}% of it (goal >= 50%)`);
  }
  console.log(`state.sqlite afterwards ${dbMiB.toFixed(1)} MiB`);
  rmSync(big);
  rmSync(join(dir, 'st'), { recursive: true, force: true });

  // 2. A 99 MiB non-media original, end to end to committed.
  const mid = join(dir, 'notes-99.txt');
  randomFile(mid, 99 * MiB);
  writeFileSync(join(dir, 'claim.md'), '---\nkind: claim\nclaim_kind: fact\ntitle: The notes say so\n---\nSee the notes.\n');
  knowledge(dir, env, ['init', 'p1']);
  const pub = knowledge(dir, env, ['publish', '--store', 'p1', '--evidence', 'notes-99.txt', 'claim.md', '--json']);
  const pr = JSON.parse(pub.stdout);
  if (pr.git.state !== 'committed' || !pr.evidence[0].inHistory) throw new Error(`unexpected receipt ${pub.stdout}`);
  console.log(`publish --evidence 99 MiB -> committed: ${(pub.ms / 1000).toFixed(2)} s, peak RSS ${pub.rssMiB.toFixed(0)} MiB`);

  knowledge(dir, env, ['init', 'p2']);
  const a2 = knowledge(dir, env, ['attach', '--store', 'p2', 'notes-99.txt', '--json']);
  const ar = JSON.parse(a2.stdout);
  if (ar.git.state !== 'committed' || !ar.inHistory) throw new Error(`unexpected receipt ${a2.stdout}`);
  writeFileSync(join(dir, 'cite.md'), `---\nkind: claim\nclaim_kind: fact\ntitle: The notes say so\nevidence: [{ source: ${ar.sourceId} }]\n---\nSee the notes.\n`);
  const c2 = knowledge(dir, env, ['publish', '--store', 'p2', 'cite.md', '--json']);
  if (JSON.parse(c2.stdout).git.state !== 'committed') throw new Error(`unexpected receipt ${c2.stdout}`);
  console.log(`attach 99 MiB -> committed: ${(a2.ms / 1000).toFixed(2)} s, peak RSS ${a2.rssMiB.toFixed(0)} MiB; citing claim: ${(c2.ms / 1000).toFixed(2)} s`);
  const blob = execFileSync('git', ['-C', join(dir, 'p2', 'vault'), 'cat-file', '-s', `${ar.git.commit}:${ar.path}`], { env }).toString().trim();
  if (Number(blob) !== 99 * MiB) throw new Error(`committed blob has ${blob} bytes`);
} finally {
  cleanup(dir);
}

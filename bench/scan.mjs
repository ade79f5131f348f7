// Scan benchmark [SCAN-4, GIT-8] (issue 4 goals, side by side in one run):
//   - rescan of an unchanged vault vs `git status` on the same vault: <= 1.0x
//   - first baseline vs `git add -A && git commit` of the same files: <= 1.0x
//   - peak RSS of the Knowledge process during the baseline: <= 256 MiB
//     (also measured without git, on a copy of the same files: the scan's own
//     phases — walk, read, hash, check, stage, index — without the outbox drain)
//   - for reference, not a goal: the same git baseline with core.fsync=committed
//     (as durable as Knowledge: git does not fsync loose objects by default)
//   - for reference, not a goal: the floor under any Node CLI for the rescan,
//     a fresh process that only lists and lstats the files (bench/list-floor.mjs);
//     and Node's start alone beside git's own stat phase (`git diff-files`)
//
// The vault is N record files written by hand (fs.writeFileSync, as an
// editor or a script would), 1000 per folder, each a complete
// knowledge-record-v1 page of ~0.6 KB. Everything runs as real processes:
// `knowledge scan` (bin/knowledge.js, from dist/) and the user's `git`, with
// a clean git environment. The git baseline uses a separate git dir over the
// same work tree, so both read exactly the same files with the same warm
// page cache. Git status is measured on the vault's own repository (the one
// Knowledge's baseline created) after one untimed warm-up run, which lets
// git fill in the index's stat data.
//   node bench/scan.mjs [files=100000] [--rounds=3] [--keep]
import { join } from 'node:path';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { tempDir, cleanup, userGitEnv, machine } from './lib.mjs';

const { initStore } = await import('../dist/store/store.js');
const { KnowledgeService } = await import('../dist/service.js');

const KEEP = process.argv.includes('--keep');
const N = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 100_000);
const RUNS = 5;
const BASE_ROUNDS = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 3);
const cliPath = new URL('../bin/knowledge.js', import.meta.url).pathname;

const dir = tempDir('kn-bench-scan-');
const home = join(dir, 'home');
mkdirSync(home);
const env = { ...userGitEnv(home), KNOWLEDGE_HOME: join(home, '.knowledge') };
const store = join(dir, 'st');
initStore(store, { env });
const vault = join(store, 'vault');

function page(i) {
  const day = String((i % 28) + 1).padStart(2, '0');
  return `---
format: knowledge-record-v1
id: rec-bench-${i}
revision: 1
scope: private
recorded_at: "2026-01-${day}T10:00:00.000Z"
updated_at: "2026-01-${day}T10:00:00.000Z"
lifecycle: active
kind: page
title: "Bench page ${i}: notes on topic ${i % 97}"
tags: [ bench, topic-${i % 97} ]
aliases:
  - bench-${i}
---
# Bench page ${i}

Notes written by hand for the scan benchmark. Topic ${i % 97}, item ${i}.
Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam,
quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo.

- see also [[rec-bench-${(i + 1) % N}]]
`;
}

/**
 * Run a command; wall time, and CPU time (user + system, the command and
 * every process it waited for, e.g. git's children) from the shell's `times`:
 * where a slow round spent its time (git's own CPU time swings with this
 * VM's file system, most of it in the kernel).
 */
function timed(cmd, args, opts = {}) {
  const t0 = performance.now();
  const r = spawnSync('sh', ['-c', '"$@"; s=$?; times >&2; exit $s', 'sh', cmd, ...args], { env, maxBuffer: 1 << 30, ...opts });
  const msTaken = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  const lines = r.stderr.toString().trimEnd().split('\n');
  const children = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(lines[lines.length - 1] ?? '');
  if (!children) throw new Error(`no CPU times from sh: ${lines.slice(-2).join(' | ')}`);
  const cpuMs = (Number(children[1]) * 60 + Number(children[2]) + Number(children[3]) * 60 + Number(children[4])) * 1000;
  return { ms: msTaken, cpuMs, stdout: r.stdout, stderr: r.stderr };
}

/** The environment and node options in bin/knowledge.js's `#!/usr/bin/env -S [NAME=VALUE…] node …` line. */
const { launcherEnv, launcherFlags } = (() => {
  const first = readFileSync(cliPath, 'utf8').split('\n', 1)[0];
  const m = /^#!\/usr\/bin\/env -S((?: [A-Z_]+=\S+)*) node((?: --[\w-]+(?:=\S+)?)*)$/.exec(first);
  if (!m) throw new Error(`bench/scan.mjs: cannot read the environment and node options of ${cliPath}: ${first}`);
  return {
    launcherEnv: Object.fromEntries(m[1].split(' ').filter(Boolean).map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)])),
    launcherFlags: m[2].split(' ').filter(Boolean),
  };
})();

/** `knowledge scan`, printing the process's own peak RSS (KiB) on stderr at exit. */
function knowledgeScan(storeDir = store, extraEnv = {}) {
  const boot = `process.on('exit', () => process.stderr.write('maxrss ' + process.resourceUsage().maxRSS + '\\n'));` +
    `process.argv.splice(1, 0, ${JSON.stringify(cliPath)});` +
    `import(${JSON.stringify(new URL('../dist/cli/main.js', import.meta.url).href)}).then((m) => m.main(['scan', '--store', ${JSON.stringify(storeDir)}, '--json'])).then((c) => { process.exitCode = c; });`;
  // The V8 flags and environment every `knowledge` process starts with: read from the launcher's shebang.
  const r = timed(process.execPath, [...launcherFlags, '--input-type=module', '-e', boot], { env: { ...env, ...launcherEnv, ...extraEnv } });
  const receipt = JSON.parse(r.stdout.toString());
  const rss = Number(/maxrss (\d+)/.exec(r.stderr.toString())?.[1] ?? NaN);
  return { ms: r.ms, cpuMs: r.cpuMs, receipt, rssMiB: rss / 1024 };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const s = (msTaken) => `${(msTaken / 1000).toFixed(2)} s`;

console.log(`# scan benchmark — ${new Date().toISOString()} — ${machine()}`);
let t0 = performance.now();
for (let i = 0; i < N; i++) {
  const d = join(vault, 'private', 'pages', `d${Math.floor(i / 1000)}`);
  if (i % 1000 === 0) mkdirSync(d, { recursive: true });
  writeFileSync(join(d, `page-${i}.md`), page(i));
}
console.log(`generated ${N} record files in ${s(performance.now() - t0)} (${dir})`);
// Both baselines start with the files on disk, not with ~400 MiB of dirty pages still being written back.
spawnSync('sync');

// Baselines, side by side, alternating: this VM's disk speed swings widely
// (the same 100k files took 3 s to 39 s to write on one day), so each round
// runs git and then Knowledge on its own fresh copy of the same files, with
// `sync` before each (neither is charged for the other's writeback), and the
// verdict is the median of the rounds' ratios. Round 1 uses the store the
// rescans below measure.
// A second git baseline, for reference only (the goal is against plain git):
// git as durable as Knowledge runs it, `core.fsync=committed` (FIELD-NOTES:
// git does not fsync loose objects or refs by default; Knowledge's SQLite
// journal and its own git calls are fsync'd).
function gitBaseline(workTree, gitDir, durable = false) {
  // gc.auto=0: with 100k new loose objects `git commit` otherwise starts a
  // detached `git gc --auto`, never part of git's time, that packs them while
  // Knowledge's run is being measured (and races the cleanup below).
  const g = (args) => ['-c', 'gc.auto=0', ...(durable ? ['-c', 'core.fsync=committed'] : []), '--git-dir', gitDir, '--work-tree', workTree, ...args];
  timed('git', ['init', '-q', '--bare', gitDir]);
  timed('git', ['--git-dir', gitDir, 'config', 'core.bare', 'false']);
  spawnSync('sync');
  return timed('sh', ['-c', `git ${g(['add', '-A']).join(' ')} && git ${g(['commit', '-q', '-m', 'baseline']).join(' ')}`]);
}
function knowledgeBaseline(storeDir) {
  spawnSync('sync'); // git's ~400 MiB of new objects are not written back during Knowledge's run
  const k = knowledgeScan(storeDir);
  if (!k.receipt.baseline || k.receipt.added.length !== N || k.receipt.git?.state !== 'committed') {
    throw new Error(`unexpected baseline receipt: ${JSON.stringify({ ...k.receipt, added: k.receipt.added.length })}`);
  }
  return k;
}
const rounds = [];
for (let r = 1; r <= BASE_ROUNDS; r++) {
  let storeDir = store;
  if (r > 1) {
    storeDir = join(dir, `st-${r}`);
    initStore(storeDir, { env });
    timed('cp', ['-a', join(vault, 'private'), join(storeDir, 'vault')]);
  }
  const gitRun = gitBaseline(join(storeDir, 'vault'), join(dir, `cmp-${r}.git`));
  const kRun = knowledgeBaseline(storeDir);
  const durableRun = gitBaseline(join(storeDir, 'vault'), join(dir, `cmp-durable-${r}.git`), true);
  rounds.push({ git: gitRun.ms, k: kRun.ms, durable: durableRun.ms, gitCpu: gitRun.cpuMs, kCpu: kRun.cpuMs, rss: kRun.rssMiB, diagnostics: kRun.receipt.diagnostics.length });
  console.log(`baseline round ${r}: knowledge scan ${s(kRun.ms)} (peak RSS ${kRun.rssMiB.toFixed(0)} MiB) vs git add -A && git commit ${s(gitRun.ms)}: ${(kRun.ms / gitRun.ms).toFixed(2)}x; CPU time ${s(kRun.cpuMs)} vs ${s(gitRun.cpuMs)}: ${(kRun.cpuMs / gitRun.cpuMs).toFixed(2)}x; reference: git with core.fsync=committed ${s(durableRun.ms)}: ${(kRun.ms / durableRun.ms).toFixed(2)}x`);
  if (r > 1) cleanup(storeDir);
  cleanup(join(dir, `cmp-${r}.git`));
  cleanup(join(dir, `cmp-durable-${r}.git`));
}
// The scan's own phases, without the drain: the same files in a second store, git not found.
const store2 = join(dir, 'st2');
initStore(store2, { env });
timed('cp', ['-a', join(vault, 'private'), join(store2, 'vault')]);
spawnSync('sync');
const kNoGit = knowledgeScan(store2, { KNOWLEDGE_GIT: join(dir, 'no-such-git') });
if (kNoGit.receipt.added.length !== N || kNoGit.receipt.git?.state !== 'unavailable') throw new Error(`unexpected no-git baseline: ${kNoGit.receipt.git?.state}`);
cleanup(store2);
console.log(`baseline without git (scan phases only, no drain): ${s(kNoGit.ms)}, peak RSS ${kNoGit.rssMiB.toFixed(0)} MiB`);
const peak = Math.max(...rounds.map((r) => r.rss));
console.log(`baseline: knowledge scan median ${s(median(rounds.map((r) => r.k)))} vs git add -A && git commit median ${s(median(rounds.map((r) => r.git)))}; median ratio ${median(rounds.map((r) => r.k / r.git)).toFixed(2)}x over ${rounds.length} alternating rounds (goal <= 1.0x); peak RSS ${peak.toFixed(0)} MiB at most (goal <= 256 MiB); ${rounds[0].diagnostics} diagnostics`);
console.log(`baseline CPU time (user + system, with child processes): knowledge scan median ${s(median(rounds.map((r) => r.kCpu)))} vs git add -A && git commit median ${s(median(rounds.map((r) => r.gitCpu)))}; median ratio ${median(rounds.map((r) => r.kCpu / r.gitCpu)).toFixed(2)}x`);
console.log(`reference (not the goal): git add -A && git commit with core.fsync=committed, as durable as Knowledge, median ${s(median(rounds.map((r) => r.durable)))}; median ratio ${median(rounds.map((r) => r.k / r.durable)).toFixed(2)}x`);

// Unchanged rescans vs git status on the vault's own repository.
timed('git', ['status', '--porcelain'], { cwd: vault }); // warm-up: refreshes the stat data Knowledge's index update leaves empty
const gitStatus = [];
const kScan = [];
// The floor under any Node CLI here (bench/list-floor.mjs): a fresh process that only lists the partition's
// folders and lstats its files, on one thread and on two worker threads; same Node flags as the CLI.
const floors = new Map([[0, []], [2, []]]);
const floorScript = new URL('./list-floor.mjs', import.meta.url).pathname;
function listFloor(workers) {
  const r = timed(process.execPath, [...launcherFlags, floorScript, join(vault, 'private'), `--workers=${workers}`], { env: { ...env, ...launcherEnv } });
  if (Number(r.stdout.toString()) !== N) throw new Error(`list-floor counted ${r.stdout} files, not ${N}`);
  return r.ms;
}
// Two more references: what starting Node alone costs (same flags, nothing run), and git's own stat
// phase alone (`git diff-files`: lstat every index entry against its stat data, no untracked walk, no
// HEAD comparison). Any Node CLI pays the first, and a stat of every file costs at least about the second.
const nodeStart = [];
const diffFiles = [];
let hashed = 0;
for (let i = 0; i < RUNS; i++) {
  gitStatus.push(timed('git', ['status', '--porcelain'], { cwd: vault }).ms);
  nodeStart.push(timed(process.execPath, [...launcherFlags, '-e', ''], { env: { ...env, ...launcherEnv } }).ms);
  diffFiles.push(timed('git', ['diff-files', '--quiet'], { cwd: vault }).ms); // exits 1 (throws) on any change
  const r = knowledgeScan();
  if (r.receipt.git !== null || r.receipt.unchanged !== N) throw new Error(`rescan found changes: ${JSON.stringify({ ...r.receipt, added: r.receipt.added.length })}`);
  hashed = Math.max(hashed, r.receipt.hashed);
  kScan.push(r.ms);
  for (const [workers, runs] of floors) runs.push(listFloor(workers));
}
for (const [workers, runs] of floors) {
  console.log(`floor: a bare Node process listing the same files (readdir + lstat, nothing else; ${workers ? `${workers} worker threads` : 'one thread'}) median ${s(median(runs))} (${(median(runs) / median(gitStatus)).toFixed(2)}x git status); runs ${runs.map((x) => s(x)).join(', ')}`);
}
console.log(`reference: starting Node alone (node -e '', the CLI's flags) median ${s(median(nodeStart))} (${(median(nodeStart) / median(gitStatus)).toFixed(2)}x git status); git's stat phase alone (git diff-files --quiet) median ${s(median(diffFiles))} (${(median(diffFiles) / median(gitStatus)).toFixed(2)}x); together ${((median(nodeStart) + median(diffFiles)) / median(gitStatus)).toFixed(2)}x`);
console.log(`rescan of an unchanged vault: knowledge scan median ${s(median(kScan))} (files read: ${hashed}) vs git status median ${s(median(gitStatus))}: ${(median(kScan) / median(gitStatus)).toFixed(2)}x (goal <= 1.0x) [${RUNS} runs each, alternating]; runs ${kScan.map((x) => s(x)).join(', ')} vs ${gitStatus.map((x) => s(x)).join(', ')} (the first compares every file with its record and keeps folder digests, later ones match folders by digest)`);

// In process, as the Gateway runs it on a request: the service is already open, no process start.
const svc = KnowledgeService.open(store, { write: true, env, git: { pathEnv: env.PATH } });
const inProc = [];
for (let i = 0; i < RUNS; i++) {
  const t = performance.now();
  const r = await svc.scan({ caller: { kind: 'operator' } });
  inProc.push(performance.now() - t);
  if (r.git !== null) throw new Error('in-process rescan found changes');
}
svc.close();
console.log(`rescan in process (service already open, as a Gateway request): median ${s(median(inProc))} (${(median(inProc) / median(gitStatus)).toFixed(2)}x git status); runs ${inProc.map((x) => s(x)).join(', ')}`);

// One edit among N: what a scan on every request costs when something did change.
writeFileSync(join(vault, 'private', 'pages', 'd0', 'page-1.md'), page(1) + 'One more line.\n');
const edit = knowledgeScan();
console.log(`rescan after one edit: knowledge scan ${s(edit.ms)} (modified ${edit.receipt.modified.length}, git ${edit.receipt.git?.state})`);

if (KEEP) console.log(`kept ${dir}`);
else cleanup(dir);

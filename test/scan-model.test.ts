/**
 * Model-based property test of `scan` [SCAN-1..4, GIT-8, GIT-10]: random
 * sequences of file-system operations on `private/` and `conversations/s1/`
 * (creates of records, broken files, plain notes, YAML, empty files, duplicate
 * ids, awkward names; overwrites, same-byte rewrites, touches, same-size edits
 * with the mtime set back, deletes, renames and moves across folders and
 * partitions, case-only renames, swaps, save by rename, delete and recreate,
 * rename over an existing file, copies, a file replaced by a folder, folder
 * moves and removals, ignored names, a record moved and edited at once),
 * interleaved with in-process scans (all partitions or one), publications
 * (new records and new revisions), and the user's own `git mv` and commits.
 *
 * A model (path -> bytes) of what Knowledge last recorded is kept; after each
 * scan: (1) added/modified/deleted/renamed are the model's change, renames only
 * between paths that disappeared and appeared, identical bytes never left
 * unpaired, edited renames only by record id; (2) the branch's tip is the tip
 * before the scan with the receipt's paths set to the disk's bytes (and, with
 * no commit of the user's, exactly the partitions' Markdown/YAML); (3) a scan
 * with no change (or with every change already in the tip) commits nothing;
 * (4) otherwise exactly one commit, `Knowledge-Actor: external`; `git status`
 * is clean for scanned files; (5) `verify` is ok.
 *
 * Deterministic (fixed seed); SCAN_MODEL_SEED / SCAN_MODEL_RUNS explore more.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { makeSandbox, type Sandbox } from './helpers.js';
import { initStore } from '../src/store/store.js';
import { KnowledgeService } from '../src/service.js';
import type { ScanReceipt } from '../src/scan/types.js';
import { KnowledgeError } from '../src/errors.js';

const SEED = Number(process.env.SCAN_MODEL_SEED ?? 20261208);
const RUNS = Number(process.env.SCAN_MODEL_RUNS ?? 15);

// ---------------------------------------------------------------- the model

/** README "What a scan looks at": ignored names (files and folders alike). */
const IGNORED = /^\.|~$|^#.*#$|^~\$|^4913$|\.(?:swp|swo|swx|tmp|temp|bak|part|crdownload|crswap)$/i;
const SCANNED = /\.(?:md|markdown|ya?ml)$/i;
const SESSION = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
function observed(rel: string): boolean {
  const all = rel.split('/');
  let segs: string[];
  if (all[0] === 'private') segs = all.slice(1);
  else if (all[0] === 'conversations' && all.length > 2 && SESSION.test(all[1]!)) segs = all.slice(2);
  else return false;
  if (segs.some((s) => s.includes('\\'))) return false; // invalid-name: never committed
  if (segs.some((s) => IGNORED.test(s))) return false;
  return SCANNED.test(segs[segs.length - 1]!);
}

// ------------------------------------------------------------ the contents

const IDS = ['rec-a', 'rec-b', 'rec-c'];
function record(id: string, body: string): string {
  return `---\nformat: knowledge-record-v1\nid: ${id}\nrevision: 1\nkind: page\ntitle: T ${id}\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: private\nlifecycle: active\n---\n${body}\n`;
}
const contentArb: fc.Arbitrary<string> = fc.oneof(
  fc.tuple(fc.constantFrom(...IDS), fc.constantFrom('one', 'two', 'three', 'four')).map(([id, b]) => record(id, b)),
  fc.constantFrom('---\ntitle: [unclosed\n---\nbroken\n', '---\nno end\n', 'plain note\n', '# Heading\n\ntext\n', '', 'key: value\n', 'a: [1, 2\n', '---\ntitle: hand\n---\nnote\n'),
);

const DIRS = ['private', 'private/a', 'private/b', 'private/a/deep', 'private/\u00fc d', 'conversations/s1', 'conversations/s1/a'];
const BASES = ['n1', 'n2', 'n3', 'N1', 'sp ace', 'q"t', "it's", 'caf\u00e9', 'cafe\u0301', '-n', '\u65e5\u672c', 'n[1]', '*', ':(top)x'];
const EXTS = ['.md', '.yaml', '.MD', '.yml', '.markdown'];
const fileArb = fc.tuple(fc.constantFrom(...DIRS), fc.constantFrom(...BASES), fc.constantFrom(...EXTS)).map(([d, b, e]) => `${d}/${b}${e}`);
const ignoredArb = fc.tuple(fc.constantFrom(...DIRS), fc.constantFrom('.n1.md.swp', 'n1.md~', '#n1.md#', '.hidden.md', 'n1.md.tmp', '4913', '~$n1.md', '.obsidian/x.md', '.trash/n1.md', 'n1.bak', 'pic.png'))
  .map(([d, n]) => `${d}/${n}`);

type Op =
  | { k: 'create'; path: string; text: string }
  | { k: 'overwrite'; i: number; text: string }
  | { k: 'same'; i: number }
  | { k: 'touch'; i: number }
  | { k: 'keepStat'; i: number }
  | { k: 'delete'; i: number }
  | { k: 'rename'; i: number; to: string }
  | { k: 'caseRename'; i: number }
  | { k: 'swap'; i: number; j: number }
  | { k: 'recreate'; i: number }
  | { k: 'renameOver'; i: number; j: number }
  | { k: 'saveByRename'; i: number; text: string; tmp: string }
  | { k: 'copy'; i: number; to: string }
  | { k: 'rmdir'; dir: string }
  | { k: 'mvdir'; from: string; to: string }
  | { k: 'ignored'; path: string; text: string }
  | { k: 'wait' }
  | { k: 'userCommit' }
  | { k: 'gitMv'; i: number; to: string }
  | { k: 'scan'; partition?: string }
  | { k: 'publish'; n: number }
  | { k: 'publishOver'; i: number; n: number }
  | { k: 'moveEdit'; i: number; to: string; body: string }
  | { k: 'fileToDir'; i: number };

const idx = fc.nat(1000);
const createArb: fc.Arbitrary<Op> = fc.record({ k: fc.constant('create' as const), path: fileArb, text: contentArb });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ k: fc.constant('create' as const), path: fileArb, text: contentArb }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('overwrite' as const), i: idx, text: contentArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('same' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('touch' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('keepStat' as const), i: idx }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('delete' as const), i: idx }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('rename' as const), i: idx, to: fileArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('caseRename' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('swap' as const), i: idx, j: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('recreate' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('renameOver' as const), i: idx, j: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('saveByRename' as const), i: idx, text: contentArb, tmp: fc.constantFrom('.x.swp', 'x.tmp', '.x.md', 'x.md~') }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('copy' as const), i: idx, to: fileArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('rmdir' as const), dir: fc.constantFrom('private/a', 'private/b', 'private/a/deep') }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('mvdir' as const), from: fc.constantFrom('private/a', 'private/b', 'private/a/deep', 'conversations/s1'), to: fc.constantFrom('private/a', 'private/b', 'private/c', 'private/a/deep', 'conversations/s2', 'private/s1') }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('ignored' as const), path: ignoredArb, text: contentArb }) },
  { weight: 4, arbitrary: fc.constant({ k: 'scan' as const }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('scan' as const), partition: fc.constantFrom('private', 'conversation:s1') }) },
  { weight: 1, arbitrary: fc.constant({ k: 'wait' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'userCommit' as const }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('gitMv' as const), i: idx, to: fileArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('publish' as const), n: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('publishOver' as const), i: idx, n: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('fileToDir' as const), i: idx }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('moveEdit' as const), i: idx, to: fileArb, body: fc.constantFrom('edited one', 'edited two') }) },
);

// ------------------------------------------------------------- the harness

let sb: Sandbox;
let store: string;
let vault: string;
let svc: KnowledgeService;
let counter = 0;
const stats = { scans: 0, renames: 0, editedRenames: 0, modified: 0, userCommitted: 0, published: 0, refused: 0, diagnostics: 0 };

function git(args: string[]): string {
  const r = spawnSync('git', args, { cwd: vault, env: sb.env, encoding: 'buffer', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr.toString()}`);
  return r.stdout.toString('latin1');
}
function gitOk(args: string[]): boolean {
  return spawnSync('git', args, { cwd: vault, env: sb.env }).status === 0;
}

/** Every regular file under private/ (any name), relative to the vault. */
function diskFiles(dir?: string, out = new Map<string, Buffer>()): Map<string, Buffer> {
  if (dir === undefined) {
    diskFiles(join(vault, 'private'), out);
    diskFiles(join(vault, 'conversations'), out);
    return out;
  }
  if (!existsSync(dir)) return out;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const abs = join(dir, e.name);
    if (e.isDirectory()) diskFiles(abs, out);
    else if (e.isFile()) out.set(abs.slice(vault.length + 1), readFileSync(abs));
  }
  return out;
}
function observedFiles(): Map<string, Buffer> {
  return new Map([...diskFiles()].filter(([p]) => observed(p)));
}

/** The branch tip's observed files (blob bytes): one ls-tree, one cat-file --batch. */
function tipFiles(): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const ls = spawnSync('git', ['ls-tree', '-r', '-z', 'HEAD'], { cwd: vault, env: sb.env, encoding: 'buffer', maxBuffer: 64 << 20 });
  if (ls.status !== 0) return out; // no repository or no commit yet
  const wanted: Array<[string, string]> = [];
  for (const line of ls.stdout.toString('utf8').split('\0').filter(Boolean)) {
    const tab = line.indexOf('\t');
    const path = line.slice(tab + 1);
    if (observed(path)) wanted.push([path, line.slice(0, tab).split(' ')[2]!]);
  }
  if (wanted.length === 0) return out;
  const cat = spawnSync('git', ['cat-file', '--batch'], { cwd: vault, env: sb.env, input: wanted.map(([, oid]) => `${oid}\n`).join(''), maxBuffer: 64 << 20 });
  let at = 0;
  for (const [path] of wanted) {
    const nl = cat.stdout.indexOf(0x0a, at);
    const size = Number(cat.stdout.subarray(at, nl).toString('latin1').split(' ')[2]);
    out.set(path, Buffer.from(cat.stdout.subarray(nl + 1, nl + 1 + size)));
    at = nl + 1 + size + 1;
  }
  return out;
}
const commitCount = () => (gitOk(['rev-parse', '--verify', '-q', 'HEAD']) ? Number(git(['rev-list', '--count', 'HEAD']).trim()) : 0);

/** A record's id: an `id:` line in a closed frontmatter. */
function recordId(b: Buffer): string | null {
  const m = /^---\n([\s\S]*?)\n---\n/.exec(b.toString('utf8'));
  const id = m ? /^id: (\S+)$/m.exec(m[1]!) : null;
  return id ? id[1]! : null;
}

function write(rel: string, text: string | Buffer): void {
  mkdirSync(dirname(join(vault, rel)), { recursive: true });
  writeFileSync(join(vault, rel), text);
}

/** Apply a file-system operation; `i`, `j` pick among the files on disk under private/ (any name). */
function apply(op: Op): string | null {
  const files = [...diskFiles().keys()].sort();
  const pick = (i: number) => files[i % files.length]!;
  const abs = (rel: string) => join(vault, rel);
  switch (op.k) {
    case 'create':
      if (existsSync(abs(op.path)) && lstatSync(abs(op.path)).isDirectory()) return null;
      write(op.path, op.text);
      return `create ${op.path}`;
    case 'ignored':
      write(op.path, op.text);
      return `ignored ${op.path}`;
    case 'rmdir':
      if (!existsSync(abs(op.dir))) return null;
      rmSync(abs(op.dir), { recursive: true });
      return `rmdir ${op.dir}`;
    case 'mvdir': {
      if (!existsSync(abs(op.from)) || existsSync(abs(op.to)) || op.to.startsWith(`${op.from}/`)) return null;
      mkdirSync(dirname(abs(op.to)), { recursive: true });
      renameSync(abs(op.from), abs(op.to));
      return `mvdir ${op.from} ${op.to}`;
    }
    case 'wait':
      // Past the racy window (plan.ts isRacy, 100 ms): what the next scan records, a later one may trust.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150);
      return 'wait';
    case 'userCommit':
      // README "Edits you committed yourself".
      if (!existsSync(join(vault, '.git')) || !existsSync(join(vault, 'private'))) return null;
      git(['add', '-A', '.']);
      if (gitOk(['diff', '--cached', '--quiet'])) return null;
      git(['commit', '-q', '-m', 'by hand']);
      return 'userCommit';
    default:
  }
  if (files.length === 0 || op.k === 'scan' || op.k === 'publish' || op.k === 'publishOver') return null;
  const p = pick(op.i);
  switch (op.k) {
    case 'overwrite':
      writeFileSync(abs(p), op.text);
      return `overwrite ${p}`;
    case 'same':
      writeFileSync(abs(p), readFileSync(abs(p)));
      return `same ${p}`;
    case 'touch': {
      const t = Date.now() / 1000 + 5;
      utimesSync(abs(p), t, t);
      return `touch ${p}`;
    }
    case 'keepStat': {
      // Same inode, same size, mtime set back: only the ctime moves [SCAN-4].
      const before = statSync(abs(p));
      const old = readFileSync(abs(p));
      if (old.length === 0) return null;
      const next = Buffer.from(old);
      next[next.length - 1] = next[next.length - 1] === 0x21 ? 0x3f : 0x21;
      writeFileSync(abs(p), next);
      utimesSync(abs(p), before.atime, before.mtime);
      return `keepStat ${p}`;
    }
    case 'delete':
      unlinkSync(abs(p));
      return `delete ${p}`;
    case 'rename': {
      if (existsSync(abs(op.to))) return null;
      mkdirSync(dirname(abs(op.to)), { recursive: true });
      renameSync(abs(p), abs(op.to));
      return `rename ${p} ${op.to}`;
    }
    case 'caseRename': {
      const base = p.slice(p.lastIndexOf('/') + 1);
      const flipped = base === base.toLowerCase() ? base.toUpperCase() : base.toLowerCase();
      const to = `${dirname(p)}/${flipped}`;
      if (to === p || existsSync(abs(to))) return null;
      renameSync(abs(p), abs(to));
      return `caseRename ${p} ${to}`;
    }
    case 'swap': {
      const q = pick(op.j);
      if (q === p) return null;
      const tmp = `${abs(p)}.swap-tmp`;
      renameSync(abs(p), tmp);
      renameSync(abs(q), abs(p));
      renameSync(tmp, abs(q));
      return `swap ${p} ${q}`;
    }
    case 'recreate': {
      const b = readFileSync(abs(p));
      unlinkSync(abs(p));
      writeFileSync(abs(p), b);
      return `recreate ${p}`;
    }
    case 'renameOver': {
      const q = pick(op.j);
      if (q === p) return null;
      renameSync(abs(p), abs(q));
      return `renameOver ${p} ${q}`;
    }
    case 'saveByRename': {
      const tmp = `${dirname(p)}/${op.tmp}`;
      writeFileSync(abs(tmp), op.text);
      renameSync(abs(tmp), abs(p));
      return `saveByRename ${p} via ${op.tmp}`;
    }
    case 'gitMv': {
      if (existsSync(abs(op.to)) || !existsSync(join(vault, '.git')) || !gitOk(['ls-files', '--error-unmatch', p])) return null;
      mkdirSync(dirname(abs(op.to)), { recursive: true });
      git(['mv', p, op.to]);
      return `gitMv ${p} ${op.to}`;
    }
    case 'fileToDir': {
      // A file replaced by a folder of the same name holding its bytes (and the folder's name free again later).
      const b = readFileSync(abs(p));
      unlinkSync(abs(p));
      write(`${p}/inner.md`, b);
      return `fileToDir ${p}`;
    }
    case 'moveEdit': {
      // A record moved and edited at once: paired by its id (README "Grouped checkpoints").
      const id = recordId(readFileSync(abs(p)));
      if (id === null || existsSync(abs(op.to))) return null;
      mkdirSync(dirname(abs(op.to)), { recursive: true });
      renameSync(abs(p), abs(op.to));
      writeFileSync(abs(op.to), readFileSync(abs(op.to), 'utf8').replace(/\n---\n[\s\S]*$/, `\n---\n${op.body}\n`));
      return `moveEdit ${p} ${op.to}`;
    }
    case 'copy': {
      if (existsSync(abs(op.to))) return null;
      write(op.to, readFileSync(abs(p)));
      return `copy ${p} ${op.to}`;
    }
  }
  return null;
}

interface Expected { added: string[]; modified: string[]; deleted: string[] }
function diff(before: Map<string, Buffer>, after: Map<string, Buffer>): Expected {
  const added: string[] = [];
  const modified: string[] = [];
  const deleted: string[] = [];
  for (const [p, b] of after) {
    const o = before.get(p);
    if (!o) added.push(p);
    else if (!o.equals(b)) modified.push(p);
  }
  for (const p of before.keys()) if (!after.has(p)) deleted.push(p);
  return { added: added.sort(), modified: modified.sort(), deleted: deleted.sort() };
}

/** Property 1: the receipt is the model's change, renames paired as README "Grouped checkpoints" says. */
function checkReceipt(r: ScanReceipt, before: Map<string, Buffer>, after: Map<string, Buffer>, log: string[]): void {
  const ctx = `\n${log.join('\n')}\nreceipt: ${JSON.stringify({ added: r.added, modified: r.modified, deleted: r.deleted, renamed: r.renamed })}`;
  const exp = diff(before, after);
  expect([...r.modified].sort(), `modified ${ctx}`).toEqual(exp.modified);
  const froms = r.renamed.map((x) => x.from);
  const tos = r.renamed.map((x) => x.to);
  expect(new Set(froms).size, `a rename source used twice ${ctx}`).toBe(froms.length);
  expect(new Set(tos).size, `a rename target used twice ${ctx}`).toBe(tos.length);
  for (const { from, to, edited } of r.renamed) {
    expect(exp.deleted, `rename from a path that did not disappear ${ctx}`).toContain(from);
    expect(exp.added, `rename to a path that did not appear ${ctx}`).toContain(to);
    const same = before.get(from)!.equals(after.get(to)!);
    if (same) expect(edited, `identical bytes reported edited ${ctx}`).toBeFalsy();
    else {
      expect(edited, `edited rename not marked edited ${ctx}`).toBe(true);
      expect(recordId(before.get(from)!), `edited rename of non-records ${ctx}`).not.toBeNull();
      expect(recordId(after.get(to)!), `edited rename paired by another id ${ctx}`).toBe(recordId(before.get(from)!));
    }
  }
  expect([...r.added].sort(), `added ${ctx}`).toEqual(exp.added.filter((p) => !tos.includes(p)));
  expect([...r.deleted].sort(), `deleted ${ctx}`).toEqual(exp.deleted.filter((p) => !froms.includes(p)));
  // Maximality: identical bytes left unpaired between a deleted and an added path is a missed rename.
  for (const d of r.deleted) for (const a of r.added) {
    expect(before.get(d)!.equals(after.get(a)!), `identical bytes at ${d} (gone) and ${a} (new) not paired as a rename ${ctx}`).toBe(false);
  }
}

beforeEach(() => {
  sb = makeSandbox('scanfuzz-model-');
  store = join(sb.dir, 'st');
  initStore(store, { env: sb.env });
  svc = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
  vault = join(store, 'vault');
});
afterEach(() => {
  svc.close();
  sb.cleanup();
});

async function runSequence(ops: Op[]): Promise<void> {
  // A fresh store per sequence (and publication ids from 1, so a replayed counterexample writes the same paths).
  counter = 0;
  svc.close();
  sb.cleanup();
  sb = makeSandbox('scanfuzz-model-');
  store = join(sb.dir, 'st');
  initStore(store, { env: sb.env });
  svc = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
  vault = join(store, 'vault');

  let recorded = new Map<string, Buffer>(); // what the last scan (or publication) left recorded
  const log: string[] = [];
  for (const op of [...ops, { k: 'scan' } as Op, { k: 'scan' } as Op]) {
    if (op.k === 'publish' || op.k === 'publishOver') {
      let text = `---\nkind: page\nid: pub-${++counter}\ntitle: Pub ${op.n}\n---\nPublished ${op.n}.\n`;
      if (op.k === 'publishOver') {
        // A new revision of a record found on disk (by its id and revision there; refused when stale).
        const files = [...diskFiles()].filter(([p]) => observed(p) && p.endsWith('.md'));
        if (files.length === 0) continue;
        const b = files[op.i % files.length]![1].toString('utf8');
        const id = recordId(files[op.i % files.length]![1]);
        const rev = /^revision: (\d+)$/m.exec(b);
        if (!id || !rev) continue;
        text = `---\nkind: page\nid: ${id}\nrevision: ${rev[1]}\ntitle: Over ${op.n}\n---\nRepublished ${op.n}.\n`;
      }
      const tipBefore = gitOk(['rev-parse', '--verify', '-q', 'HEAD']) ? git(['rev-parse', 'HEAD']).trim() : null;
      let res;
      try {
        res = await svc.publish({ partition: 'private', actor: 'operator', records: [text], evidence: [] });
      } catch (err) {
        if (err instanceof KnowledgeError && ['E_CONFLICT', 'E_VALIDATION', 'E_NOT_FOUND'].includes(err.code)) {
          log.push(`${op.k} refused (${err.code})`);
          stats.refused++;
          continue;
        }
        throw err;
      }
      await svc.settle(); // the index follows the receipt (README: the CLI waits for it too)
      stats.published++;
      log.push(`${op.k} ${res.records.map((x) => x.path).join(' ')}`);
      expect(res.git?.state, `publication committed ${JSON.stringify(res.git)}`).toBe('committed');
      // A publication commits what it installs (and removes); unscanned edits stay unscanned.
      const changes = git(tipBefore ? ['diff-tree', '-r', '-z', '--no-renames', '--name-status', tipBefore, 'HEAD'] : ['show', '-z', '--format=', '--name-status', 'HEAD']).split('\0').filter(Boolean);
      for (let k = 0; k + 1 < changes.length; k += 2) {
        const path = Buffer.from(changes[k + 1]!, 'latin1').toString('utf8');
        if (!observed(path)) continue;
        if (changes[k] === 'D') recorded.delete(path);
        else recorded.set(path, readFileSync(join(vault, path)));
      }
      continue;
    }
    if (op.k !== 'scan') {
      const did = apply(op);
      if (did) log.push(did);
      continue;
    }
    log.push(op.partition ? `scan --partition ${op.partition}` : 'scan');
    // A scan of one partition observes that partition only: the rest stays as recorded.
    const prefix = op.partition === undefined ? '' : op.partition === 'private' ? 'private/' : `conversations/${op.partition.slice('conversation:'.length)}/`;
    const inScope = (p: string) => p.startsWith(prefix);
    const now = new Map([...[...observedFiles()].filter(([p]) => inScope(p)), ...[...recorded].filter(([p]) => !inScope(p))]);
    const commitsBefore = commitCount();
    const tipAtStart = tipFiles();
    let r: ScanReceipt;
    try {
      r = await svc.scan({ caller: { kind: 'operator' }, partition: op.partition });
    } catch (err) {
      // A conversation partition that does not exist (yet) is E_NOT_FOUND (README "Scans", Authority).
      if (op.partition && err instanceof KnowledgeError && err.code === 'E_NOT_FOUND' && !existsSync(join(vault, prefix))) {
        log.push('  (no such partition)');
        continue;
      }
      throw err;
    }
    await svc.settle();
    const changed = r.added.length + r.modified.length + r.deleted.length + r.renamed.length;
    checkReceipt(r, recorded, now, log);
    // Property 3/4: one commit per scan with changes, none otherwise.
    const commitsAfter = commitCount();
    const ctx = `\n${log.join('\n')}`;
    stats.scans++;
    if (r.renamed.length) stats.renames++;
    if (r.renamed.some((x) => x.edited)) stats.editedRenames++;
    if (r.modified.length) stats.modified++;
    stats.diagnostics += r.diagnostics.length;
    const tipBefore = tipAtStart;
    // README "Edits you committed yourself": every change found already exactly in the tip -> no commit.
    const d = diff(recorded, now);
    const allInTip = [...d.added, ...d.modified].every((p) => tipBefore.get(p)?.equals(now.get(p)!)) && d.deleted.every((p) => !tipBefore.has(p));
    if (changed === 0 || allInTip) {
      if (changed !== 0) stats.userCommitted++;
      expect(r.git, `a scan with no change (or all in the tip) has git: null ${ctx}`).toBeNull();
      expect(commitsAfter, `a scan with no change commits nothing ${ctx}`).toBe(commitsBefore);
    } else {
      expect(r.git?.state, `scan git state ${JSON.stringify(r.git)} ${ctx}`).toBe('committed');
      expect(commitsAfter, `exactly one commit per scan with changes ${ctx}`).toBe(commitsBefore + 1);
      expect(git(['log', '-1', '--format=%B', 'HEAD']), `trailer ${ctx}`).toMatch(/^Knowledge-Actor: external$/m);
    }
    // Property 2: the scan's commit is the tip it started from with exactly the receipt's paths set to the bytes on
    // disk; without commits of the user's own, the tip then holds exactly the partition's files.
    const expectTip = new Map(tipAtStart);
    if (r.git !== null) {
      for (const p of [...r.added, ...r.modified, ...r.renamed.map((x) => x.to)]) expectTip.set(p, now.get(p)!);
      for (const p of [...r.deleted, ...r.renamed.map((x) => x.from)]) expectTip.delete(p);
    }
    const view = (m: Map<string, Buffer>) => Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : 1)).map(([p, b]) => [p, b.toString('utf8')]));
    const tipView = view(tipFiles());
    expect(tipView, `branch tip tree vs the tip before the scan plus the receipt's changes ${ctx}`).toEqual(view(expectTip));
    if (!log.includes('userCommit')) expect(tipView, `branch tip tree vs the partition ${ctx}`).toEqual(view(now));
    // The index follows each checkpoint (SPEC GIT-10): with no git command of the user's, `git status` shows nothing
    // for the files scanned (when every partition was scanned and the tip is the partition).
    if (r.git !== null && !op.partition && !log.some((l) => l.startsWith('userCommit') || l.startsWith('gitMv'))) {
      const st = spawnSync('git', ['-c', 'core.quotePath=false', 'status', '--porcelain', '-z', '--untracked-files=all', '--no-renames'], { cwd: vault, env: sb.env, encoding: 'utf8' });
      const dirty = st.stdout.split('\0').filter(Boolean).filter((l) => observed(l.slice(3)));
      expect(dirty, `git status after the scan's checkpoint ${ctx}`).toEqual([]);
    }
    // Property 5.
    const v = await svc.verify();
    expect(v.problems, `verify ${ctx}`).toEqual([]);
    expect(v.ok).toBe(true);
    recorded = now;
  }
}

describe('scan: model-based property test (README "Scans")', () => {
  it('receipts, branch tree, commits and verify follow a model of the partition', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(createArb, { minLength: 2, maxLength: 8 }), fc.array(opArb, { minLength: 1, maxLength: 30 }), async (setup, ops) => {
        await runSequence([...setup, { k: 'scan' }, ...ops]);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: false },
    );
    console.log('scan-model stats', JSON.stringify(stats));
  }, 600_000);
});

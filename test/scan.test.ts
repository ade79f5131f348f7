/**
 * Scans end to end [SCAN-1..4, GIT-8, GIT-16, REC-3]: a vault filled and
 * edited with ordinary tools (fs writes, mv, git mv, rm), scanned by real
 * `knowledge scan` processes against real git and real SQLite.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appendFileSync, chmodSync, existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, truncateSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { storeSandbox, cli, cliPath, dropScanCounts, racingGit, NO_UNPRIVILEGED, UNPRIVILEGED_NOTE, unprivilegedCli, userGit, userGitRaw, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { KnowledgeError } from '../src/errors.js';
import type { Caller } from '../src/access.js';

let sb: Sandbox;
let store: string;
let vault: string;
beforeEach(() => {
  ({ sb, vault } = storeSandbox());
  store = join(sb.dir, 'st');
});
afterEach(() => sb.cleanup());

const NO_GIT = { PATH: '/nonexistent-bin' };

/**
 * Permission tests need a user without root's exemption: this user, or where
 * the tests run as root, nobody through setpriv (helpers.ts unprivilegedCli).
 * As root without setpriv they are skipped, saying why.
 */
if (NO_UNPRIVILEGED) console.log('scan.test.ts: skipping the unreadable folder and file tests: running as root, and setpriv is not available to drop privileges');

/**
 * Past the racy window (plan.ts isRacy, 100 ms): files written before it are
 * recorded by the next scan as files a later scan may trust without reading.
 * Tests asserting `hashed: 0` must not rely on the CLI taking that long to start.
 */
const RACY_WAIT_MS = 150;
function pastRacyWindowSync(): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, RACY_WAIT_MS);
}

function put(rel: string, text: string | Buffer): void {
  mkdirSync(dirname(join(vault, rel)), { recursive: true });
  writeFileSync(join(vault, rel), text);
}

function record(id: string, title: string, extra = '', body = `About ${title}.\n`, scope = 'private'): string {
  return `---\nformat: knowledge-record-v1\nid: ${id}\nrevision: 1\nkind: page\ntitle: ${title}\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: ${scope}\nlifecycle: active\n${extra}---\n${body}`;
}

interface Receipt {
  kind: string; scanId: string; partition: string; partitions: string[]; baseline: boolean; actor: string;
  added: string[]; modified: string[]; deleted: string[]; renamed: Array<{ from: string; to: string; edited?: true }>;
  unchanged: number; hashed: number; diagnostics: Array<{ path: string; code: string; reason: string }>;
  retried: Array<{ kind: string; id: string; git: { state: string; commit?: string } }>;
  git: { state: string; commit?: string; code?: string } | null;
}

function scan(args: string[] = [], env: NodeJS.ProcessEnv = {}): Receipt {
  const r = cli(sb, ['scan', '--store', 'st', '--json', ...args], { env });
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toBe(''); // [SCAN-4] no progress bar when --json / not a terminal
  return JSON.parse(r.stdout) as Receipt;
}

const commits = () => Number(userGit(sb, vault, ['rev-list', '--count', 'main']).trim());
const nameStatus = (commit: string) => userGit(sb, vault, ['show', '-M100%', '--name-status', '--format=', commit]).trim().split('\n').filter(Boolean).sort();
const tree = (commit = 'main') => userGit(sb, vault, ['ls-tree', '-r', '--name-only', commit]).trim().split('\n').filter(Boolean);
const codes = (r: Receipt) => r.diagnostics.map((d) => `${d.code} ${d.path}`);

function db(): Database.Database {
  return new Database(join(store, 'state.sqlite'), { readonly: true });
}

function publish(text: string, env: NodeJS.ProcessEnv = {}) {
  writeFileSync(join(sb.dir, 'pub.md'), text);
  const r = cli(sb, ['publish', '--store', 'st', '--json', 'pub.md'], { env });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe('[GIT-8] the first scan of a partition commits a baseline', () => {
  it('commits every Markdown and YAML file of a hand-filled vault in one checkpoint labelled external', () => {
    put('private/notes/one.md', record('n1', 'One'));
    put('private/notes/two.md', record('n2', 'Two'));
    put('private/data/list.yaml', 'items: [a, b]\n');
    put('private/data/other.yml', 'k: v\n');
    put('private/pictures/cat.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]));
    put('private/notes/readme.txt', 'not markdown\n');
    put('private/.obsidian/workspace.yaml', 'hidden: true\n');
    put('private/.trash/old.md', record('old', 'Old'));
    put('private/.gitignore', '*.md\n'); // not honoured: history records what the vault holds
    put('loose.md', 'outside every partition\n');

    const r = scan();
    expect(r).toMatchObject({ kind: 'scan', partition: 'all', partitions: ['private'], baseline: true, actor: 'external', deleted: [], renamed: [], modified: [] });
    expect(r.scanId).toMatch(/^scan-/);
    expect(r.added).toEqual(['private/data/list.yaml', 'private/data/other.yml', 'private/notes/one.md', 'private/notes/two.md']);
    expect(r.git).toEqual({ state: 'committed', commit: expect.stringMatching(/^[0-9a-f]{40}$/) });
    expect(commits()).toBe(1);
    expect(tree()).toEqual(r.added);
    const msg = userGit(sb, vault, ['log', '-1', '--format=%s%n%b%n%cn']);
    expect(msg).toMatch(/^Baseline of private: 4 added/);
    expect(msg).toContain('Knowledge-Actor: external');
    expect(msg).toContain(`Knowledge-Scan: ${r.scanId}`);
    expect(msg.trim().endsWith('Knowledge')).toBe(true);
    // Exactly the bytes on disk.
    expect(userGit(sb, vault, ['show', 'main:private/notes/one.md'])).toBe(record('n1', 'One'));
    // Valid records are indexed; the scan shows in activity and its receipt is kept.
    const d = db();
    expect(d.prepare('SELECT id, path FROM records ORDER BY id').all()).toEqual([{ id: 'n1', path: 'private/notes/one.md' }, { id: 'n2', path: 'private/notes/two.md' }]);
    // Its batch's size, counted when queued, is the committed files' bytes (the drain sizes chains from it).
    const committedBytes = r.added.reduce((n: number, p: string) => n + readFileSync(join(vault, p)).length, 0);
    expect(d.prepare("SELECT queued_bytes FROM batches WHERE kind = 'scan'").pluck().all()).toEqual([committedBytes]);
    d.close();
    const act = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout);
    expect(act).toEqual([expect.objectContaining({ kind: 'scan', id: r.scanId, actor: 'external', git: r.git })]);
    const kept = JSON.parse(cli(sb, ['receipt', '--store', 'st', r.scanId, '--json']).stdout);
    expect(kept).toEqual(r);
    // The user's view: nothing Knowledge committed shows as changed or staged.
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
  });

  it('a scan that finds nothing commits nothing, and reads no file whose metadata is unchanged [SCAN-4]', () => {
    put('private/a.md', record('a', 'A'));
    put('private/b.yaml', 'b: 1\n');
    pastRacyWindowSync();
    expect(scan().git?.state).toBe('committed');
    const before = commits();
    const again = scan();
    expect(again).toMatchObject({ baseline: false, added: [], modified: [], deleted: [], renamed: [], git: null, unchanged: 2, hashed: 0 });
    expect(commits()).toBe(before);
    // A touched file is read (metadata changed) but, with the same bytes, is no edit.
    const t = new Date(Date.now() - 60_000);
    spawnSync('touch', ['-d', t.toISOString(), join(vault, 'private/a.md')]);
    pastRacyWindowSync(); // its ctime is now
    const touched = scan();
    expect(touched).toMatchObject({ modified: [], git: null, hashed: 1, unchanged: 1 });
    expect(scan()).toMatchObject({ hashed: 0, unchanged: 2, git: null });
    // Only scans that queued a checkpoint are kept in activity.
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toHaveLength(1);
  });

  it('a first scan that reads no file leaves the baseline to the first scan that does (missing, empty, or symlinked folder, a file it does not read)', () => {
    const first = scan();
    expect(first).toMatchObject({ partitions: ['private'], baseline: false, baselined: [], added: [], git: null });
    expect(existsSync(join(vault, '.git'))).toBe(false);
    mkdirSync(join(vault, 'private/notes'), { recursive: true });
    expect(scan()).toMatchObject({ baseline: false, baselined: [], git: null });
    // The partition folder as a symbolic link: not followed, nothing found, still no baseline.
    rmSync(join(vault, 'private'), { recursive: true });
    mkdirSync(join(sb.dir, 'elsewhere'));
    writeFileSync(join(sb.dir, 'elsewhere/a.md'), record('a', 'A'));
    symlinkSync(join(sb.dir, 'elsewhere'), join(vault, 'private'));
    const linked = scan();
    expect(linked).toMatchObject({ baseline: false, baselined: [], added: [], git: null });
    expect(codes(linked)).toEqual(['symlink private']);
    rmSync(join(vault, 'private'));
    // Only a file the scan does not read (over 256 MiB; unreadable and unstable ones alike): still no baseline.
    mkdirSync(join(vault, 'private/notes'), { recursive: true });
    put('private/notes/big.md', '');
    truncateSync(join(vault, 'private/notes/big.md'), 300 * 1024 * 1024);
    const unread = scan();
    expect(unread).toMatchObject({ baseline: false, baselined: [], added: [], git: null });
    expect(codes(unread)).toEqual(['too-large private/notes/big.md']);
    rmSync(join(vault, 'private/notes/big.md'));
    put('private/notes/a.md', record('a', 'A'));
    const r = scan();
    expect(r).toMatchObject({ baseline: true, baselined: ['private'], added: ['private/notes/a.md'], git: { state: 'committed' } });
    expect(userGit(sb, vault, ['log', '-1', '--format=%s'])).toMatch(/^Baseline of private: 1 added/);
    put('private/notes/b.md', record('b', 'B'));
    expect(scan()).toMatchObject({ baseline: false, baselined: [], added: ['private/notes/b.md'] });
    expect(userGit(sb, vault, ['log', '-1', '--format=%s'])).toMatch(/^External edits in private: 1 added/);
  });
});

describe('[GIT-8][SCAN-1] later scans group outside edits into one checkpoint', () => {
  it('edits, renames (across folders, letter case, git mv), deletions and additions: one commit with exactly those changes', () => {
    put('private/edit.md', record('e', 'Edit me'));
    put('private/a/move.md', record('m', 'Move me'));
    put('private/Case.md', record('c', 'Case'));
    put('private/gitmv.yaml', 'x: 1\n');
    put('private/delete.md', record('d', 'Delete me'));
    put('private/keep.md', record('k', 'Keep'));
    const base = scan();
    expect(base.added).toHaveLength(6);

    appendFileSync(join(vault, 'private/edit.md'), 'More text.\n');
    mkdirSync(join(vault, 'private/b'));
    renameSync(join(vault, 'private/a/move.md'), join(vault, 'private/b/move.md'));
    renameSync(join(vault, 'private/Case.md'), join(vault, 'private/case.md'));
    userGit(sb, vault, ['mv', 'private/gitmv.yaml', 'private/b/gitmv.yaml']);
    unlinkSync(join(vault, 'private/delete.md'));
    put('private/new.md', record('new', 'New'));

    const r = scan();
    expect(r).toMatchObject({
      baseline: false,
      added: ['private/new.md'],
      modified: ['private/edit.md'],
      deleted: ['private/delete.md'],
      renamed: [
        { from: 'private/gitmv.yaml', to: 'private/b/gitmv.yaml' },
        { from: 'private/a/move.md', to: 'private/b/move.md' },
        { from: 'private/Case.md', to: 'private/case.md' },
      ],
      unchanged: 1,
    });
    // Renamed with the same bytes: no `edited` mark.
    expect(r.renamed.filter((x) => 'edited' in x)).toEqual([]);
    expect(r.git?.state).toBe('committed');
    expect(commits()).toBe(2);
    expect(nameStatus(r.git!.commit!)).toEqual([
      'A\tprivate/new.md',
      'D\tprivate/delete.md',
      'M\tprivate/edit.md',
      'R100\tprivate/Case.md\tprivate/case.md',
      'R100\tprivate/a/move.md\tprivate/b/move.md',
      'R100\tprivate/gitmv.yaml\tprivate/b/gitmv.yaml',
    ]);
    expect(userGit(sb, vault, ['log', '-1', '--format=%s%n%b'])).toMatch(/^External edits in private: 1 added, 1 modified, 3 renamed, 1 deleted\n[\s\S]*Knowledge-Actor: external/);
    // The index follows: renamed records keep their ids at their new paths.
    const d = db();
    expect(d.prepare('SELECT path FROM records WHERE id = ?').pluck().get('m')).toBe('private/b/move.md');
    expect(d.prepare('SELECT count(*) FROM records WHERE id = ?').pluck().get('d')).toBe(0);
    d.close();
    // And a scan right after finds nothing.
    expect(scan()).toMatchObject({ added: [], modified: [], deleted: [], renamed: [], git: null });
    expect(commits()).toBe(2);
  });

  it('letter-case renames where the repository says core.ignorecase=true (as git init sets on macOS and Windows): committed, index in step', () => {
    put('private/d/Note.yaml', 'a: 1\n');
    put('private/d/other.yaml', 'b: 1\n');
    put('private/Top.md', record('t', 'Top'));
    scan();
    userGit(sb, vault, ['config', 'core.ignorecase', 'true']);
    renameSync(join(vault, 'private/d/Note.yaml'), join(vault, 'private/d/note.yaml'));
    renameSync(join(vault, 'private/Top.md'), join(vault, 'private/top.md'));
    const r = scan();
    expect(r.renamed).toEqual([
      { from: 'private/d/Note.yaml', to: 'private/d/note.yaml' },
      { from: 'private/Top.md', to: 'private/top.md' },
    ]);
    expect(r.git?.state).toBe('committed');
    expect(nameStatus(r.git!.commit!)).toEqual([
      'R100\tprivate/Top.md\tprivate/top.md',
      'R100\tprivate/d/Note.yaml\tprivate/d/note.yaml',
    ]);
    expect(tree()).toEqual(['private/d/note.yaml', 'private/d/other.yaml', 'private/top.md']);
    // The index holds the new names (an ordinary commit of the user's keeps them), and verify agrees.
    expect(userGit(sb, vault, ['ls-files', '-s']).trim().split('\n').map((l) => l.split('\t')[1])).toEqual(tree());
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    expect(JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout)).toMatchObject({ ok: true, problems: [] });
    expect(scan().git).toBeNull();
  });

  it('a record moved and edited at once is a rename, paired by its id', () => {
    put('private/old-name.md', record('r1', 'Original'));
    scan();
    unlinkSync(join(vault, 'private/old-name.md'));
    put('private/pages/new-name.md', record('r1', 'Original', '', 'Rewritten body.\n'));
    const r = scan();
    expect(r).toMatchObject({ added: [], modified: [], deleted: [] });
    expect(r.renamed).toEqual([{ from: 'private/old-name.md', to: 'private/pages/new-name.md', edited: true }]);
    // The human output says so too.
    unlinkSync(join(vault, 'private/pages/new-name.md'));
    put('private/newer-name.md', record('r1', 'Original', '', 'Rewritten again.\n'));
    const human = cli(sb, ['scan', '--store', 'st']);
    expect(human.stdout).toContain('renamed   private/pages/new-name.md -> private/newer-name.md (and edited)');
  });

  it('edits the user committed by hand are still observed, and no empty checkpoint is committed on top (docs/local-history.md)', () => {
    put('private/mine.yaml', 'x: 1\n');
    put('private/theirs.yaml', 'y: 1\n');
    scan();
    put('private/mine.yaml', 'x: 2\n');
    userGit(sb, vault, ['add', 'private/mine.yaml']);
    userGit(sb, vault, ['commit', '-q', '-m', 'my own edit']);
    const userCommit = userGit(sb, vault, ['rev-parse', 'main']).trim();
    const r = scan();
    // Observed (its new fingerprint recorded), but the branch already holds it: nothing to commit.
    expect(r).toMatchObject({ modified: ['private/mine.yaml'], added: [], deleted: [], git: null });
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(userCommit);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    expect(JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout)).toMatchObject({ ok: true, problems: [] });
    // Observed once: the next scan finds nothing.
    expect(scan()).toMatchObject({ modified: [], hashed: 0, git: null });
  });

  it('files a sparse checkout leaves out of the working tree are not deletions: kept, reported, nothing committed; back when it is disabled', () => {
    put('private/one.md', record('sp1', 'One'));
    put('private/sub/two.yaml', 'x: 1\n');
    scan();
    mkdirSync(join(vault, 'notes'));
    writeFileSync(join(vault, 'notes/a.txt'), 'n\n');
    userGit(sb, vault, ['add', 'notes']);
    userGit(sb, vault, ['commit', '-q', '-m', 'my notes']);
    const tip = userGit(sb, vault, ['rev-parse', 'main']).trim();
    userGit(sb, vault, ['sparse-checkout', 'set', '--cone', 'notes']);
    expect(existsSync(join(vault, 'private/one.md'))).toBe(false);
    const r = scan();
    expect(r).toMatchObject({ added: [], modified: [], deleted: [], renamed: [], git: null });
    expect(codes(r).filter((c) => c.startsWith('sparse-checkout')).sort()).toEqual(['sparse-checkout private/one.md', 'sparse-checkout private/sub/two.yaml']);
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tip);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    const d = db();
    expect(d.prepare('SELECT path FROM records WHERE id = ?').pluck().get('sp1')).toBe('private/one.md');
    d.close();
    // Revised while its file is out of the working tree: refused, saying why and what brings it back (a scan does
    // not: it keeps the record as it is).
    writeFileSync(join(sb.dir, 'rev.md'), '---\nid: sp1\nrevision: 1\nkind: page\ntitle: One\n---\nrevised\n');
    const rev = cli(sb, ['publish', '--store', 'st', 'rev.md']);
    expect(rev.code).toBe(1);
    expect(rev.stderr).toMatch(/^E_CONFLICT: record #1: private\/one\.md is not in the working tree: deleted by hand \(knowledge scan records that\), or left out by the repository's sparse checkout \(put it back in the checkout to revise the record\)/);
    userGit(sb, vault, ['sparse-checkout', 'disable']);
    expect(scan()).toMatchObject({ added: [], modified: [], deleted: [], renamed: [], git: null });
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tip);
  });

  it('removing a whole folder deletes its files in one checkpoint', () => {
    put('private/folder/a.md', record('fa', 'A'));
    put('private/folder/sub/b.md', record('fb', 'B'));
    put('private/stay.md', record('st', 'Stay'));
    scan();
    rmSync(join(vault, 'private/folder'), { recursive: true });
    const r = scan();
    expect(r.deleted).toEqual(['private/folder/a.md', 'private/folder/sub/b.md']);
    expect(nameStatus(r.git!.commit!)).toEqual(['D\tprivate/folder/a.md', 'D\tprivate/folder/sub/b.md']);
  });

  it('a file replaced by a folder of the same name is deleted, and comes back when the folder is replaced by the file', () => {
    put('private/f.md', '# note\n');
    put('private/g.md', '# moves into a folder named as itself\n');
    scan();
    rmSync(join(vault, 'private/f.md'));
    put('private/f.md/b.md', '# other\n');
    renameSync(join(vault, 'private/g.md'), join(vault, 'private/g-tmp'));
    mkdirSync(join(vault, 'private/g.md'));
    renameSync(join(vault, 'private/g-tmp'), join(vault, 'private/g.md/inner.md'));
    let r = scan();
    expect(r.added).toEqual(['private/f.md/b.md']);
    expect(r.deleted).toEqual(['private/f.md']);
    expect(r.renamed).toEqual([{ from: 'private/g.md', to: 'private/g.md/inner.md' }]);
    expect(codes(r).filter((c) => !c.startsWith('broken-envelope'))).toEqual([]);
    expect(tree()).toEqual(['private/f.md/b.md', 'private/g.md/inner.md']);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');

    rmSync(join(vault, 'private/f.md'), { recursive: true });
    put('private/f.md', '# note\n');
    r = scan();
    expect(r.added).toEqual(['private/f.md']);
    expect(r.deleted).toEqual(['private/f.md/b.md']);
    expect(tree()).toEqual(['private/f.md', 'private/g.md/inner.md']);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    expect(scan().git).toBeNull();
    // verify reads a folder where a deleted file was as the deletion it is, not as the file still there.
    const v = cli(sb, ['verify', '--store', 'st', '--json']);
    expect(JSON.parse(v.stdout)).toMatchObject({ ok: true, problems: [] });
    expect(v.code).toBe(0);
  });
});

describe('[SCAN-1] a publication\'s own installs are never outside edits', () => {
  it('published records and descriptors are neither re-added by the baseline nor reported later', () => {
    writeFileSync(join(sb.dir, 'ev.txt'), 'evidence\n');
    writeFileSync(join(sb.dir, 'c.md'), '---\nkind: claim\nclaim_kind: fact\ntitle: Published\n---\nbody\n');
    const pub = cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'c.md']);
    expect(pub.code, pub.stderr).toBe(0);
    put('private/hand.md', record('h', 'By hand'));
    const base = scan();
    expect(base.added).toEqual(['private/hand.md']); // not the published claim or descriptor
    expect(base.diagnostics).toEqual([]);
    const p2 = publish('---\nkind: page\ntitle: Later\n---\nlater\n');
    pastRacyWindowSync();
    const r = scan();
    expect(r).toMatchObject({ added: [], modified: [], deleted: [], renamed: [], git: null });
    expect(r.hashed).toBe(1); // what a publication records of its install is racy: read once more, same bytes
    expect(scan()).toMatchObject({ added: [], modified: [], hashed: 0, git: null });
    expect(p2.git.state).toBe('committed');
  });
});

describe('[SCAN-1] editor save patterns are edits, not delete + add', () => {
  beforeEach(() => {
    put('private/note.md', record('note', 'Note'));
    scan();
  });

  it('save by rename over the file (new inode)', () => {
    writeFileSync(join(vault, 'private/.note.md.swp'), record('note', 'Note', '', 'saved by rename\n'));
    renameSync(join(vault, 'private/.note.md.swp'), join(vault, 'private/note.md'));
    expect(scan()).toMatchObject({ modified: ['private/note.md'], added: [], deleted: [], renamed: [] });
  });

  it('delete then recreate', () => {
    unlinkSync(join(vault, 'private/note.md'));
    writeFileSync(join(vault, 'private/note.md'), record('note', 'Note', '', 'recreated\n'));
    expect(scan()).toMatchObject({ modified: ['private/note.md'], added: [], deleted: [], renamed: [] });
  });

  it('backup copy kept beside the file (note.md~) is ignored', () => {
    renameSync(join(vault, 'private/note.md'), join(vault, 'private/note.md~'));
    writeFileSync(join(vault, 'private/note.md'), record('note', 'Note', '', 'vim style\n'));
    const r = scan();
    expect(r).toMatchObject({ modified: ['private/note.md'], added: [], deleted: [], renamed: [] });
    expect(tree(r.git!.commit!)).not.toContain('private/note.md~');
  });

  it('a file deleted and recreated, or renamed over, again and again while scans run is only ever an edit', async () => {
    // A writer that keeps the name missing for ~1 ms in every ~10 ms, or replaces the inode by rename.
    const script = `
      const fs = require('fs'); const p = ${JSON.stringify(join(vault, 'private/note.md'))};
      const text = (i) => ${JSON.stringify(record('note', 'Note', '', 'BODY\n'))}.replace('BODY', 'version ' + i + ' ' + 'x'.repeat(i % 50));
      const spin = (ms) => { const until = Date.now() + ms; while (Date.now() < until) {} };
      const end = Date.now() + Number(process.argv[1]); let i = 0;
      while (Date.now() < end) {
        i++;
        if (i % 2) { fs.unlinkSync(p); spin(1); fs.writeFileSync(p, text(i)); }
        else { fs.writeFileSync(p + '.tmp', text(i)); fs.renameSync(p + '.tmp', p); }
        spin(8);
      }`;
    const writer = spawn(process.execPath, ['-e', script, '4000'], { stdio: 'ignore' });
    const done = new Promise((res) => writer.on('exit', res));
    const seen: Receipt[] = [];
    await new Promise((res) => setTimeout(res, 100));
    for (let i = 0; i < 6; i++) seen.push(scan());
    await done;
    for (const r of seen) {
      expect(r.deleted).toEqual([]);
      expect(r.added).toEqual([]);
      expect(r.renamed).toEqual([]);
      for (const d of r.diagnostics) expect(d.code).toBe('unstable');
    }
    expect(seen.some((r) => r.modified.length === 1)).toBe(true);
    // Once it settles, the last version is recorded exactly.
    const last = scan();
    expect(last.deleted).toEqual([]);
    expect(userGit(sb, vault, ['show', 'main:private/note.md'])).toBe(readFileSync(join(vault, 'private/note.md'), 'utf8'));
  });
});

describe('[SCAN-1][GIT-10] edits the user committed in the vault\'s repository themselves', () => {
  const me = ['-c', 'user.name=Me', '-c', 'user.email=me@example.com'];
  const userCommit = (msg: string, ...paths: string[]) => {
    userGit(sb, vault, ['add', '--', ...paths]);
    userGit(sb, vault, [...me, 'commit', '-q', '-m', msg]);
  };
  const head = () => userGit(sb, vault, ['rev-parse', 'HEAD']).trim();

  it('an edit the branch already holds is recorded and indexed, with no empty commit; other edits still commit', () => {
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    put('private/a.md', record('a', 'A'));
    userCommit('mine: a', 'private/a.md');
    put('private/b.md', record('b', 'B'));
    const base = scan();
    expect(base).toMatchObject({ baseline: true, added: ['private/a.md', 'private/b.md'], git: { state: 'committed' } });
    // The commit changes what the branch did not hold yet: b only.
    expect(nameStatus(base.git!.commit!)).toEqual(['A\tprivate/b.md']);

    // The user edits a record and commits it before Knowledge's next scan.
    pastRacyWindowSync();
    put('private/a.md', record('a', 'A edited'));
    userCommit('mine: edit a', 'private/a.md');
    const tip = head();
    const r = scan();
    expect(r).toMatchObject({ modified: ['private/a.md'], git: null });
    expect(head()).toBe(tip); // no empty "External edits" commit
    const d = db();
    expect(d.prepare("SELECT title FROM records WHERE id = 'a'").pluck().get()).toBe('A edited');
    d.close();
    expect(scan()).toMatchObject({ modified: [], hashed: 0, git: null });
    const human = cli(sb, ['scan', '--store', 'st']);
    expect(human.stdout).toContain('  git: nothing to commit\n');

    // Same again, with an edit the user did not commit: one commit, holding only that edit.
    put('private/a.md', record('a', 'A edited twice'));
    userCommit('mine: edit a again', 'private/a.md');
    put('private/b.md', record('b', 'B edited'));
    userGit(sb, vault, ['rm', '-q', '--cached', '--', 'private/b.md']); // the user's staged deletion stays theirs
    const both = scan();
    expect(both).toMatchObject({ modified: ['private/a.md', 'private/b.md'], git: { state: 'committed' } });
    expect(nameStatus(both.git!.commit!)).toEqual(['M\tprivate/b.md']);
    // A deletion the user committed too.
    userGit(sb, vault, [...me, 'commit', '-q', '-m', 'mine: drop b']); // commits the staged deletion of b
    rmSync(join(vault, 'private/b.md'));
    const tip2 = head();
    const del = cli(sb, ['scan', '--store', 'st']);
    expect(del.stdout).toContain('  deleted   private/b.md\n');
    expect(del.stdout).toContain('  git: nothing to commit: the branch already holds these versions\n');
    expect(head()).toBe(tip2);
    expect(scan()).toMatchObject({ deleted: [], hashed: 0, git: null });
  });

  it('a path the user commits while a scan is being committed keeps the user\'s version: the scan\'s older bytes are left out', () => {
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    put('private/a.md', record('a', 'A1'));
    put('private/b.md', record('b', 'B1'));
    expect(scan().git?.state).toBe('committed');
    pastRacyWindowSync();
    put('private/a.md', record('a', 'A2'));
    put('private/b.md', record('b', 'B2'));
    // The user's edit and commit of a.md lands after the scan read A2, as Knowledge starts committing.
    writeFileSync(join(sb.dir, 'a3.md'), record('a', 'A3 (the user\'s)'));
    const race = racingGit(sb, vault, `cp '${sb.dir}/a3.md' private/a.md && git add private/a.md && git ${me.join(' ')} commit -q -m 'mine: a3'`);
    const r = scan([], { KNOWLEDGE_GIT: race.wrapper });
    expect(race.ran()).toBe(true); // the user's commit ran
    expect(r).toMatchObject({ modified: ['private/a.md', 'private/b.md'], git: { state: 'committed' } });
    // The checkpoint sits on the user's commit and holds only b: a.md is the user's A3, not reverted to A2.
    expect(userGit(sb, vault, ['log', '--format=%s', '-2']).trim().split('\n')).toEqual([expect.stringMatching(/^External edits in private/), 'mine: a3']);
    expect(nameStatus(r.git!.commit!)).toEqual(['M\tprivate/b.md']);
    expect(userGit(sb, vault, ['show', 'main:private/a.md'])).toBe(record('a', 'A3 (the user\'s)'));
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe(''); // the user's index keeps A3 too
    const v = cli(sb, ['verify', '--store', 'st', '--json']);
    expect(v.code, v.stdout).toBe(0);
    // The next scan reads a.md as it is now; the branch holds it, so nothing is committed.
    const next = scan();
    expect(next).toMatchObject({ modified: ['private/a.md'], git: null });
    expect(scan()).toMatchObject({ modified: [], hashed: 0, git: null });
  });

  it('bytes the user staged and committed after the scan looked, while the file kept changing, do not hide the scan\'s newer bytes', () => {
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    put('private/a.md', record('a', 'A1'));
    expect(scan().git?.state).toBe('committed');
    pastRacyWindowSync();
    put('private/a.md', record('a', 'A1.5'));
    userGit(sb, vault, ['add', 'private/a.md']); // staged, as with git add -p
    put('private/a.md', record('a', 'A2')); // and the editing goes on
    expect(scan([], NO_GIT)).toMatchObject({ modified: ['private/a.md'], git: { state: 'unavailable' } }); // A2 waits
    userGit(sb, vault, [...me, 'commit', '-q', '-m', 'mine: staged a1.5']);
    const r = scan();
    expect(r.retried.map((x) => x.git.state)).toEqual(['committed']);
    expect(userGit(sb, vault, ['log', '--format=%s', '-2']).trim().split('\n')).toEqual([expect.stringMatching(/^External edits in private/), 'mine: staged a1.5']);
    expect(userGit(sb, vault, ['show', 'main:private/a.md'])).toBe(record('a', 'A2')); // the newest version is committed
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
    expect(scan()).toMatchObject({ modified: [], hashed: 0, git: null });
  });

  it('while an earlier checkpoint waits, the scan queues its own even when the tip holds its bytes (the earlier one may change them)', () => {
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    put('private/a.md', record('a', 'A1'));
    expect(scan().git?.state).toBe('committed');
    pastRacyWindowSync();
    put('private/a.md', record('a', 'A2'));
    expect(scan([], NO_GIT).git?.state).toBe('unavailable'); // A2 waits
    pastRacyWindowSync();
    put('private/a.md', record('a', 'A3'));
    userCommit('mine: a3', 'private/a.md');
    // A git whose fast-import fails: the waiting checkpoint cannot be made now, while the repository
    // itself reads fine (the tip, its entries) and holds A3.
    const broken = join(sb.dir, 'no-import-git');
    writeFileSync(broken, '#!/bin/sh\nfor a in "$@"; do [ "$a" = fast-import ] && exit 1; done\nexec git "$@"\n');
    chmodSync(broken, 0o755);
    const r = scan([], { KNOWLEDGE_GIT: broken });
    expect(r).toMatchObject({ modified: ['private/a.md'], git: { state: 'pending' } });
    const after = scan();
    expect(after.retried.map((x) => x.git.state)).toEqual(['committed', 'committed']);
    // A2 then A3 on top of the user's commit: the branch ends with what is on disk.
    expect(userGit(sb, vault, ['show', 'main:private/a.md'])).toBe(record('a', 'A3'));
    expect(userGit(sb, vault, ['log', '--format=%s', '-3']).split('\n').slice(0, 2).every((l) => l.startsWith('External edits in private'))).toBe(true);
  });
});

describe('[SCAN-1][GIT-10] the executable bit, as Git records it (docs/local-history.md, "File modes")', () => {
  const mode = (path: string, commit = 'main') => userGit(sb, vault, ['ls-tree', commit, '--', path]).split(' ')[0];
  const indexMode = (path: string) => userGit(sb, vault, ['ls-files', '-s', '--', path]).split(' ')[0];
  const status = () => userGit(sb, vault, ['status', '--porcelain']);
  const chmod = (rel: string, m: number) => chmodSync(join(vault, rel), m);

  it('a file\'s bit is committed with it, a chmod alone is a modification, and git status stays clean throughout', () => {
    put('private/notes/run.md', record('r', 'Run'));
    put('private/notes/plain.md', record('p', 'Plain'));
    put('private/data.yaml', 'x: 1\n');
    chmod('private/notes/run.md', 0o755);
    const base = scan(); // a baseline: read by the listing workers
    expect(base.git!.state).toBe('committed');
    expect([mode('private/notes/run.md'), mode('private/notes/plain.md'), mode('private/data.yaml')]).toEqual(['100755', '100644', '100644']);
    expect(indexMode('private/notes/run.md')).toBe('100755');
    expect(status()).toBe('');

    // chmod alone (the ctime moves, the bytes stay): one checkpoint of mode changes, nothing else.
    pastRacyWindowSync();
    chmod('private/notes/run.md', 0o644);
    chmod('private/data.yaml', 0o700);
    const r = scan();
    expect(r).toMatchObject({ added: [], modified: ['private/data.yaml', 'private/notes/run.md'], deleted: [], renamed: [], git: { state: 'committed' } });
    expect(nameStatus(r.git!.commit!)).toEqual(['M\tprivate/data.yaml', 'M\tprivate/notes/run.md']);
    expect(userGit(sb, vault, ['diff', '--shortstat', `${r.git!.commit!}~1`, r.git!.commit!])).toContain('0 insertions(+), 0 deletions(-)');
    expect([mode('private/notes/run.md'), mode('private/data.yaml')]).toEqual(['100644', '100755']);
    expect(status()).toBe('');
    expect(scan()).toMatchObject({ modified: [], hashed: 0, git: null });

    // A rename keeps the bit the file has; an edit of an executable file keeps it too.
    pastRacyWindowSync();
    renameSync(join(vault, 'private/data.yaml'), join(vault, 'private/notes/data.yaml'));
    put('private/notes/plain.md', record('p', 'Plain edited'));
    chmod('private/notes/plain.md', 0o755);
    const moved = scan();
    expect(moved).toMatchObject({ modified: ['private/notes/plain.md'], renamed: [{ from: 'private/data.yaml', to: 'private/notes/data.yaml' }] });
    expect([mode('private/notes/data.yaml'), mode('private/notes/plain.md')]).toEqual(['100755', '100755']);
    expect(status()).toBe('');
  });

  it('where the repository does not record the bit (core.fileMode=false), a chmod is no change and an edit keeps the mode the path has', () => {
    put('private/a.md', record('a', 'A'));
    chmod('private/a.md', 0o755);
    scan();
    expect(mode('private/a.md')).toBe('100755');
    userGit(sb, vault, ['config', 'core.fileMode', 'false']);
    pastRacyWindowSync();
    chmod('private/a.md', 0o644);
    const before = commits();
    expect(scan()).toMatchObject({ modified: [], hashed: 1, git: null });
    expect(commits()).toBe(before);
    put('private/a.md', record('a', 'A edited'));
    put('private/b.md', record('b', 'B'));
    chmod('private/b.md', 0o755);
    const r = scan();
    expect(r).toMatchObject({ added: ['private/b.md'], modified: ['private/a.md'], git: { state: 'committed' } });
    // As git add does with core.fileMode=false: a path keeps its mode, a new one is 100644.
    expect([mode('private/a.md'), mode('private/b.md')]).toEqual(['100755', '100644']);
    expect(status()).toBe('');
  });

  it('where links are checked out as plain files (core.symlinks=false), a committed symbolic link stays one: no empty commit, and an edit keeps mode 120000', () => {
    put('private/a.md', record('a', 'A'));
    scan();
    userGit(sb, vault, ['config', 'core.symlinks', 'false']);
    // What git checks out for a link there: a plain file holding the target.
    put('private/link.md', 'a.md');
    const oid = userGit(sb, vault, ['hash-object', '-w', 'private/link.md']).trim();
    userGit(sb, vault, ['update-index', '--add', '--cacheinfo', `120000,${oid},private/link.md`]);
    userGit(sb, vault, ['commit', '-q', '-m', 'user: a link']);
    const before = commits();
    expect(scan()).toMatchObject({ added: ['private/link.md'], git: null });
    expect(commits()).toBe(before);
    put('private/link.md', 'other.md');
    expect(scan()).toMatchObject({ modified: ['private/link.md'], git: { state: 'committed' } });
    expect(mode('private/link.md')).toBe('120000');
    expect(status()).toBe('');
  });

  it('a publication over a file the user made executable commits the file Knowledge installs: not executable', () => {
    const first = publish('---\nkind: page\ntitle: Pub\n---\nv1\n');
    const { id, path } = first.records[0] as { id: string; path: string };
    scan();
    pastRacyWindowSync();
    chmod(path, 0o755);
    expect(scan()).toMatchObject({ modified: [path], git: { state: 'committed' } });
    expect(mode(path)).toBe('100755');
    const second = publish(`---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Pub\n---\nv2\n`);
    expect(second.git.state).toBe('committed');
    expect(lstatSync(join(vault, path)).mode & 0o111).toBe(0);
    expect(mode(path)).toBe('100644');
    expect(status()).toBe('');
  });

  it('a chmod the user committed themselves is recorded with no empty commit; one they did not commit is committed', () => {
    const me = ['-c', 'user.name=Me', '-c', 'user.email=me@example.com'];
    put('private/a.md', record('a', 'A'));
    put('private/b.md', record('b', 'B'));
    scan();
    pastRacyWindowSync();
    chmod('private/a.md', 0o755);
    userGit(sb, vault, ['add', '--', 'private/a.md']);
    userGit(sb, vault, [...me, 'commit', '-q', '-m', 'mine: chmod a']);
    const tip = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    expect(scan()).toMatchObject({ modified: ['private/a.md'], git: null });
    expect(userGit(sb, vault, ['rev-parse', 'HEAD']).trim()).toBe(tip);
    // The user commits b's new bytes, but not its new bit: the scan commits the mode change.
    pastRacyWindowSync();
    put('private/b.md', record('b', 'B edited'));
    userGit(sb, vault, ['add', '--', 'private/b.md']);
    userGit(sb, vault, [...me, 'commit', '-q', '-m', 'mine: edit b']);
    chmod('private/b.md', 0o755);
    const r = scan();
    expect(r).toMatchObject({ modified: ['private/b.md'], git: { state: 'committed' } });
    expect(mode('private/b.md')).toBe('100755');
    expect(status()).toBe('');
  });

  it('while git cannot be asked, a chmod alone waits for a scan that can: no empty commit where the bit is not recorded', () => {
    put('private/a.md', record('a', 'A'));
    put('private/b.md', record('b', 'B'));
    scan();
    userGit(sb, vault, ['config', 'core.fileMode', 'false']);
    pastRacyWindowSync();
    chmod('private/a.md', 0o755);
    const before = commits();
    // The user's git holds the index lock: nothing can say whether the bit counts.
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    expect(scan()).toMatchObject({ modified: [], hashed: 1, git: null });
    rmSync(join(vault, '.git', 'index.lock'));
    // Git answers now: the bit is not recorded, so a chmod is no change, and no empty commit follows.
    expect(scan()).toMatchObject({ modified: [], hashed: 1, git: null });
    expect(commits()).toBe(before);
    expect(scan()).toMatchObject({ hashed: 0 });

    // Where the bit is recorded, a chmod made while git is missing is committed once git is back.
    userGit(sb, vault, ['config', 'core.fileMode', 'true']);
    pastRacyWindowSync();
    chmod('private/b.md', 0o755);
    expect(scan([], NO_GIT)).toMatchObject({ modified: [], git: null });
    const r = scan();
    expect(r).toMatchObject({ modified: ['private/b.md'], git: { state: 'committed' } });
    expect(nameStatus(r.git!.commit!)).toEqual(['M\tprivate/b.md']);
    expect(mode('private/b.md')).toBe('100755');
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private/b.md'])).toBe('');
    expect(commits()).toBe(before + 1);
  });

  it('a file recorded before Knowledge kept the bit (migration 012) has its bit recorded by the next read, not reported as a change', () => {
    put('private/a.md', record('a', 'A'));
    scan();
    const w = new Database(join(store, 'state.sqlite'));
    w.prepare('UPDATE vault_files SET exec = NULL').run();
    w.close();
    pastRacyWindowSync();
    chmod('private/a.md', 0o755);
    expect(scan()).toMatchObject({ modified: [], hashed: 1, git: null });
    const d = db();
    expect(d.prepare("SELECT exec FROM vault_files WHERE path = 'private/a.md'").pluck().get()).toBe(1);
    d.close();
    pastRacyWindowSync();
    // Back as the branch has it: a change against what was recorded, which the branch already holds.
    chmod('private/a.md', 0o644);
    expect(scan()).toMatchObject({ modified: ['private/a.md'], git: null });
    expect(mode('private/a.md')).toBe('100644');
    expect(status()).toBe('');
  });
});

describe('[SCAN-1] a file growing while it is read', () => {
  it('is recorded only as a consistent snapshot, or reported unstable and left for the next scan', async () => {
    put('private/log.md', record('log', 'Log', '', 'start\n'));
    scan();
    const script = `
      const fs = require('fs'); const fd = fs.openSync(${JSON.stringify(join(vault, 'private/log.md'))}, 'a');
      const end = Date.now() + Number(process.argv[1]); let i = 0;
      while (Date.now() < end) {
        fs.writeSync(fd, 'line ' + (i++) + '\\n');
        const until = process.hrtime.bigint() + 200000n; while (process.hrtime.bigint() < until) {}
      }`;
    const writer = spawn(process.execPath, ['-e', script, '2500'], { stdio: 'ignore' });
    const done = new Promise((res) => writer.on('exit', res));
    await new Promise((res) => setTimeout(res, 100));
    const during = [scan(), scan()];
    await done;
    for (const r of during) {
      expect(r.deleted).toEqual([]);
      expect(r.added).toEqual([]);
      const unstable = r.diagnostics.filter((d) => d.code === 'unstable').map((d) => d.path);
      expect(r.modified.length + unstable.length).toBeLessThanOrEqual(1);
      if (r.modified.length === 1) {
        // Whatever was committed is a snapshot at a write boundary, never a torn read.
        expect(userGit(sb, vault, ['show', `${r.git!.commit!}:private/log.md`])).toMatch(/\n$/);
      }
    }
    const after = scan();
    expect(after.diagnostics).toEqual([]);
    expect(userGit(sb, vault, ['show', 'main:private/log.md'])).toBe(readFileSync(join(vault, 'private/log.md'), 'utf8'));
  });
});

describe('[REC-3][SCAN-2] diagnostics never stop a scan, and the bytes are still checkpointed', () => {
  it('lists broken envelopes, broken YAML, invalid records, scope mismatches, duplicate ids and invalid references', () => {
    put('private/ok.md', record('ok', 'Fine'));
    put('private/no-frontmatter.md', 'just text\n');
    put('private/unclosed.md', '---\nkind: page\ntitle: x\n');
    put('private/bad-yaml-fm.md', '---\nkind: [page\n---\n');
    put('private/bad-kind.md', record('bk', 'Bad kind').replace('kind: page', 'kind: essay'));
    put('private/latin1.md', Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0xe9, 0x0a]));
    put('private/broken.yaml', 'a: [b\n');
    put('private/dup-one.md', record('dup', 'Dup one'));
    put('private/dup-two.md', record('dup', 'Dup two'));
    put('private/scope.md', record('sc', 'Wrong scope', '', 'x\n', 'conversation:other'));
    put('private/refs.md', record('refs', 'Refs', 'dependencies: [ok, missing-dep]\nevidence:\n  - source: src-000000000000000000000000\n'));
    put('private/rel.md', record('rel', 'Rel').replace('kind: page', 'kind: relationship\nrelationship_type: supports\nfrom: ok\nto: nowhere'));
    pastRacyWindowSync(); // the second scan below reads none of them
    const r = scan();
    expect(codes(r)).toEqual([
      'invalid-record private/bad-kind.md',
      'broken-envelope private/bad-yaml-fm.md',
      'broken-yaml private/broken.yaml',
      'duplicate-id private/dup-one.md',
      'duplicate-id private/dup-two.md',
      'broken-envelope private/latin1.md',
      'broken-envelope private/no-frontmatter.md',
      'invalid-reference private/refs.md',
      'invalid-reference private/rel.md',
      'scope-mismatch private/scope.md',
      'broken-envelope private/unclosed.md',
    ]);
    const byPath = Object.fromEntries(r.diagnostics.map((d) => [d.path, d.reason]));
    expect(byPath['private/no-frontmatter.md']).toMatch(/missing frontmatter/);
    expect(byPath['private/latin1.md']).toMatch(/UTF-8/);
    expect(byPath['private/bad-kind.md']).toMatch(/kind/);
    expect(byPath['private/refs.md']).toMatch(/dependency missing-dep is not a record; evidence source src-0+ is not a source/);
    expect(byPath['private/rel.md']).toMatch(/to nowhere is not a record of this partition/);
    expect(byPath['private/dup-one.md']).toMatch(/also claimed by private\/dup-two\.md/);
    // Every file is still checkpointed as the bytes on disk.
    expect(tree(r.git!.commit!)).toHaveLength(12);
    expect(userGitRaw(sb, vault, ['show', 'main:private/latin1.md']).status).toBe(0);
    // Exact lookup finds no record for a duplicated id.
    let d = db();
    expect(d.prepare("SELECT count(*) FROM records WHERE id = 'dup'").pluck().get()).toBe(0);
    expect(d.prepare("SELECT path FROM duplicate_record_ids WHERE id = 'dup' ORDER BY path").pluck().all()).toEqual(['private/dup-one.md', 'private/dup-two.md']);
    expect(d.prepare("SELECT count(*) FROM records WHERE id = 'sc'").pluck().get()).toBe(1);
    d.close();
    // A publication cannot add a third claim to it: it would be a record nobody can look up.
    writeFileSync(join(sb.dir, 'third.md'), '---\nid: dup\nkind: page\ntitle: Third claim\n---\nbody\n');
    const third = cli(sb, ['publish', '--store', 'st', '--json', 'third.md']);
    expect(third.code).not.toBe(0);
    expect(third.stderr).toMatch(/E_CONFLICT.*id dup is claimed by more than one file/);
    // Diagnostics persist while the files are unchanged, without reading them.
    const again = scan();
    expect(codes(again)).toEqual(codes(r));
    expect(again.hashed).toBe(0);
    // Fixing the files clears them; the duplicate's survivor is a record again.
    unlinkSync(join(vault, 'private/dup-two.md'));
    put('private/no-frontmatter.md', record('nf', 'Now fine'));
    put('private/missing-dep.md', record('missing-dep', 'Now there'));
    const fixed = scan();
    expect(codes(fixed)).not.toContain('duplicate-id private/dup-one.md');
    expect(codes(fixed)).not.toContain('broken-envelope private/no-frontmatter.md');
    expect(fixed.diagnostics.find((x) => x.path === 'private/refs.md')?.reason).not.toMatch(/missing-dep/);
    d = db();
    expect(d.prepare("SELECT path FROM records WHERE id = 'dup'").pluck().get()).toBe('private/dup-one.md');
    expect(d.prepare("SELECT count(*) FROM duplicate_record_ids WHERE id = 'dup'").pluck().get()).toBe(0);
    d.close();
  });

  it('every file of a duplicated id deleted at once leaves a tombstone: history stays readable and a new record goes on from its revision [READ-2, REC-4]', () => {
    publish('---\nid: d-7\nkind: page\ntitle: Dee\n---\nfirst\n');
    const path = publish('---\nid: d-7\nrevision: 1\nkind: page\ntitle: Dee\n---\nsecond\n').records[0].path as string;
    scan();
    writeFileSync(join(vault, 'private/copy.md'), readFileSync(join(vault, path)));
    expect(codes(scan())).toEqual(['duplicate-id private/copy.md', `duplicate-id ${path}`].sort());
    unlinkSync(join(vault, path));
    unlinkSync(join(vault, 'private/copy.md'));
    expect(scan().deleted.sort()).toEqual(['private/copy.md', path].sort());
    const h = cli(sb, ['history', '--store', 'st', '--json', 'd-7']);
    expect(h.code, h.stderr).toBe(0);
    expect(JSON.parse(h.stdout).versions.length).toBeGreaterThanOrEqual(2);
    expect(publish('---\nid: d-7\nkind: page\ntitle: Dee again\n---\nthird\n').records[0].revision).toBe(3);
  });

  it('a publication that rewrites a file clears what scans found wrong with its old bytes (a scope mismatch)', () => {
    put('conversations/c1/notes/a.md', record('a-1', 'Alpha page'));
    expect(codes(scan())).toEqual(['scope-mismatch conversations/c1/notes/a.md']);
    writeFileSync(join(sb.dir, 'fix.md'), '---\nid: a-1\nrevision: 1\nkind: page\ntitle: Alpha page\n---\nBody two.\n');
    const r = cli(sb, ['publish', '--store', 'st', '--json', '--partition', 'conversation:c1', 'fix.md']);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(vault, 'conversations/c1/notes/a.md'), 'utf8')).toMatch(/^scope: "?conversation:c1"?$/m);
    expect(scan().diagnostics).toEqual([]);
    expect(scan().diagnostics).toEqual([]);
  });

  it('an edited record\'s references are re-checked, and its diagnostic follows it when it moves', () => {
    put('private/a.md', record('a', 'A'));
    put('private/b.md', record('b', 'B', 'dependencies: [a]\n'));
    expect(scan().diagnostics).toEqual([]);
    put('private/a.md', record('a', 'A', 'dependencies: [ghost]\n'));
    expect(codes(scan())).toEqual(['invalid-reference private/a.md']);
    renameSync(join(vault, 'private/a.md'), join(vault, 'private/moved-a.md'));
    const moved = scan();
    expect(moved.renamed).toEqual([{ from: 'private/a.md', to: 'private/moved-a.md' }]);
    expect(codes(moved)).toEqual(['invalid-reference private/moved-a.md']);
    unlinkSync(join(vault, 'private/moved-a.md'));
    expect(codes(scan())).toEqual(['invalid-reference private/b.md']); // b depended on a, which is gone
  });

  it('the human output shows control characters in names as \\xNN: a name can neither fake lines nor reach the terminal as escapes', () => {
    put('private/ok.md', '# fine\n');
    put('private/x\n  deleted   private/ok.md\n  git: pending (locked) fake.md', 'x');
    put('private/esc\u001b[31mRED\u009b.md', 'x');
    put('private/lit\\x0a.md', 'x'); // a literal backslash, x, 0, a: not shown as a line break would be
    const r = cli(sb, ['scan', '--store', 'st']);
    expect(r.code, r.stderr).toBe(0);
    // eslint-disable-next-line no-control-regex
    expect(r.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(r.stdout).toContain('invalid-name: private/x\\x0a  deleted   private/ok.md\\x0a  git: pending (locked) fake.md: ');
    expect(r.stdout).toContain('invalid-name: private/esc\\x1b[31mRED\\x9b.md: ');
    expect(r.stdout).toContain('invalid-name: private/lit\\\\x0a.md: the name contains a backslash');
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('  deleted') || l.startsWith('  git:'))).toEqual([expect.stringMatching(/^ {2}git: committed [0-9a-f]{40}$/)]);
  });

  it('the human output lists at most 50 lines of each kind and counts the rest; diagnostics of changed files come first', () => {
    // A vault of notes written by hand (no Knowledge frontmatter): a diagnostic for each, standing from scan to scan.
    for (let i = 0; i < 60; i++) put(`private/notes/n${String(i).padStart(2, '0')}.md`, `---\ntitle: Note ${i}\n---\nbody ${i}\n`);
    const first = cli(sb, ['scan', '--store', 'st']);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('  added     '))).toHaveLength(50);
    expect(lines).toContain('  ... and 10 more added (--json lists every one)');
    expect(lines).toContain('  0 unchanged, 60 read, 60 diagnostics');
    const notes = lines.filter((l) => l.startsWith('  invalid-record: '));
    expect(notes).toHaveLength(50);
    expect(notes[0]).toBe('  invalid-record: private/notes/n00.md: not a Knowledge record: its frontmatter has no "format: knowledge-record-v1"; '
      + 'checkpointed as it is, not indexed (a record also needs valid id, revision, scope, recorded_at, updated_at, kind, lifecycle)');
    expect(lines).toContain('  ... and 10 more diagnostics (--json lists every one)');
    expect(lines[lines.length - 1]).toMatch(/^ {2}git: committed [0-9a-f]{40}$/);
    // The JSON receipt still lists every one.
    put('private/notes/n59.md', 'now without frontmatter\n');
    const r = scan();
    expect(r.diagnostics).toHaveLength(60);
    // One edited file among 59 standing diagnostics: its own comes first in the human output.
    put('private/notes/n58.md', 'no frontmatter either\n');
    const again = cli(sb, ['scan', '--store', 'st']).stdout.trimEnd().split('\n');
    expect(again.filter((l) => l.startsWith('  modified  '))).toEqual(['  modified  private/notes/n58.md']);
    const diags = again.filter((l) => /^ {2}(invalid-record|broken-envelope): /.test(l));
    expect(diags).toHaveLength(50);
    expect(diags[0]).toBe('  broken-envelope: private/notes/n58.md: missing frontmatter: a record must begin with a "---" line');
    expect(again).toContain('  59 unchanged, 1 read, 60 diagnostics');
  });

  it('a kept receipt holds at most 200 diagnostics, changed files\' first, and counts the rest; Activity reads a scan\'s counts, never its receipt (migration 023)', () => {
    // 250 notes written by hand: a standing diagnostic each, listed by every scan's answer.
    for (let i = 0; i < 250; i++) put(`private/notes/n${String(i).padStart(3, '0')}.md`, `---\ntitle: Note ${i}\n---\nbody ${i}\n`);
    expect(scan().diagnostics).toHaveLength(250);
    put('private/notes/n249.md', 'now without frontmatter\n');
    const live = scan();
    expect(live.diagnostics).toHaveLength(250);
    const kept = JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', live.scanId]).stdout) as Receipt & { diagnosticsOmitted?: number };
    expect(kept.diagnostics).toHaveLength(200);
    expect(kept.diagnosticsOmitted).toBe(50);
    expect(kept.diagnostics[0]).toMatchObject({ path: 'private/notes/n249.md', code: 'broken-envelope' });
    expect(kept.modified).toEqual(['private/notes/n249.md']);
    const text = cli(sb, ['receipt', '--store', 'st', live.scanId]).stdout.trimEnd().split('\n');
    expect(text).toContain('  249 unchanged, 1 read, 250 diagnostics');
    expect(text).toContain('  ... and 150 more diagnostics (--json lists those kept)');
    expect(text).toContain('  ... and 50 more diagnostics, not kept with this receipt (knowledge scan lists those that stand now)');
    // Each kept receipt is the same size however many notes stand: a vault of notes no longer grows state.sqlite by
    // every note with every scan.
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
    try {
      const sizes = db.prepare('SELECT length(receipt) FROM scans ORDER BY created_at').pluck().all() as number[];
      expect(sizes).toHaveLength(2);
      expect(sizes[1]!).toBeLessThan(200 * 400);
      // Activity's counts come from the row's columns: a receipt that could not be parsed does not matter to it.
      db.prepare("UPDATE scans SET receipt = '{' WHERE scan_id = ?").run(live.scanId);
    } finally {
      db.close();
    }
    const act = cli(sb, ['activity', '--store', 'st', '--json', '--limit', '1']);
    expect(act.code, act.stderr).toBe(0);
    expect((JSON.parse(act.stdout) as Array<{ id: string; detail: object }>)[0]).toMatchObject({
      id: live.scanId, detail: { baseline: false, added: 0, modified: 1, deleted: 0, renamed: 0, diagnostics: 250 },
    });
  });

  it('migration 023 gives the scans kept before it their counts and cuts their receipts to 200 diagnostics', () => {
    for (let i = 0; i < 210; i++) put(`private/notes/n${String(i).padStart(3, '0')}.md`, `---\ntitle: Note ${i}\n---\nbody ${i}\n`);
    const first = scan();
    put('private/notes/n209.md', 'edited\n');
    const second = scan();
    // As an older Knowledge kept it: the changed file's diagnostic where the list had it, last.
    const last = second.diagnostics.find((d) => d.path === 'private/notes/n209.md')!;
    second.diagnostics = [...second.diagnostics.filter((d) => d !== last), last];
    // As a Knowledge before migration 023 kept them: every diagnostic in the receipt, no count columns.
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
    db.prepare('UPDATE scans SET receipt = ? WHERE scan_id = ?').run(JSON.stringify({ ...first, git: null }), first.scanId);
    db.prepare('UPDATE scans SET receipt = ? WHERE scan_id = ?').run(JSON.stringify({ ...second, git: null }), second.scanId);
    dropScanCounts(db);
    db.pragma('user_version = 22');
    db.close();
    const act = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as Array<{ id: string; detail: object }>;
    expect(act.find((e) => e.id === first.scanId)).toMatchObject({ detail: { baseline: true, added: 210, modified: 0, diagnostics: 210 } });
    expect(act.find((e) => e.id === second.scanId)).toMatchObject({ detail: { baseline: false, added: 0, modified: 1, diagnostics: 210 } });
    const kept = JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', first.scanId]).stdout) as Receipt & { diagnosticsOmitted?: number };
    expect(kept.diagnostics).toEqual(first.diagnostics.slice(0, 200));
    expect(kept.diagnosticsOmitted).toBe(10);
    expect(kept.added).toEqual(first.added);
    // The file the scan found changed keeps its diagnostic, first, as a receipt kept since keeps it.
    const keptSecond = JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', second.scanId]).stdout) as Receipt & { diagnosticsOmitted?: number };
    expect(keptSecond.diagnostics).toEqual([last, ...second.diagnostics.slice(0, 199)]);
    expect(keptSecond.diagnosticsOmitted).toBe(10);
  });

  it('a reference fixed by a later publication is re-checked by the next scan', () => {
    put('private/dep.md', record('dep', 'Depends', 'dependencies: [rec-later]\n'));
    expect(codes(scan())).toEqual(['invalid-reference private/dep.md']);
    publish('---\nid: rec-later\nkind: page\ntitle: Later\n---\nnow it exists\n');
    expect(scan().diagnostics).toEqual([]);
  });

  it('symlinks are reported and never followed out of the vault; odd names are reported', () => {
    writeFileSync(join(sb.dir, 'outside-secret.md'), record('secret', 'Secret'));
    put('private/real.md', record('real', 'Real'));
    symlinkSync(join(sb.dir, 'outside-secret.md'), join(vault, 'private/link.md'));
    symlinkSync(sb.dir, join(vault, 'private/linked-folder'));
    put('private/back\\slash.md', record('bs', 'Backslash'));
    writeFileSync(Buffer.concat([Buffer.from(join(vault, 'private') + '/bad-'), Buffer.from([0xff]), Buffer.from('.md')]), 'x\n');
    spawnSync('mkfifo', [join(vault, 'private/pipe.md')]);
    const r = scan();
    expect(r.added).toEqual(['private/real.md']);
    expect(codes(r)).toEqual([
      'invalid-name private/back\\slash.md',
      'invalid-name private/bad-\\xff.md',
      'symlink private/link.md',
      'symlink private/linked-folder',
      ...(existsSync(join(vault, 'private/pipe.md')) ? ['special-file private/pipe.md'] : []),
    ]);
    expect(tree(r.git!.commit!)).toEqual(['private/real.md']);
    // The outside file's bytes never entered the repository.
    const blob = userGit(sb, vault, ['hash-object', join(sb.dir, 'outside-secret.md')]).trim();
    expect(userGitRaw(sb, vault, ['cat-file', '-e', blob]).status).not.toBe(0);
  });

  it('a name that is not UTF-8 beside one holding a real U+FFFD that decodes the same: the valid one is scanned once, the other reported', () => {
    const raw = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
    const dir = join(vault, 'private');
    mkdirSync(dir, { recursive: true });
    writeFileSync(raw(dir, '/a', [0xef, 0xbf, 0xbd], '.md'), '# valid name\n'); // U+FFFD, valid UTF-8
    writeFileSync(raw(dir, '/a', [0xff], '.md'), '# invalid name\n');
    // Folders too, with the types crossed: the name that is not UTF-8 is an empty folder, the valid one holds a note.
    mkdirSync(raw(dir, '/d', [0xff]));
    mkdirSync(raw(dir, '/d', [0xef, 0xbf, 0xbd]));
    writeFileSync(raw(dir, '/d', [0xef, 0xbf, 0xbd], '/n.md'), '# in the valid folder\n');
    const r = scan();
    expect(r.added).toEqual(['private/a\uFFFD.md', 'private/d\uFFFD/n.md']);
    expect(codes(r).filter((c) => c.startsWith('invalid-name'))).toEqual(['invalid-name private/a\\xff.md', 'invalid-name private/d\\xff']);
    expect(tree(r.git!.commit!)).toEqual(['"private/a\\357\\277\\275.md"', '"private/d\\357\\277\\275/n.md"']); // git quotes the bytes
    appendFileSync(raw(dir, '/a', [0xef, 0xbf, 0xbd], '.md'), 'edited\n');
    expect(scan().modified).toEqual(['private/a\uFFFD.md']);
  });

  it('a submodule or clone inside a partition is another repository: not scanned, and its gitlink stays in the branch and the user\'s index', () => {
    put('private/real.md', record('real', 'Real'));
    expect(scan()).toMatchObject({ added: ['private/real.md'], git: { state: 'committed' } });
    // The user's own repository, added in the vault's as a gitlink (as `git submodule add` does).
    const ext = join(vault, 'private/ext');
    mkdirSync(ext);
    userGit(sb, ext, ['init', '-q', '-b', 'main']);
    writeFileSync(join(ext, 'note.md'), record('ext-note', 'Ext note'));
    mkdirSync(join(ext, 'deeper'));
    writeFileSync(join(ext, 'deeper/more.md'), '# more\n');
    userGit(sb, ext, ['add', '-A']);
    userGit(sb, ext, ['commit', '-q', '-m', 'ext']);
    userGit(sb, vault, ['add', 'private/ext']);
    userGit(sb, vault, ['commit', '-q', '-m', 'user: submodule']);
    const gitlink = userGit(sb, vault, ['ls-files', '-s', 'private/ext']);
    expect(gitlink).toMatch(/^160000 /);
    put('private/other.md', record('other', 'Other'));
    const r = scan();
    expect(r).toMatchObject({ added: ['private/other.md'], deleted: [], git: { state: 'committed' } });
    expect(codes(r)).toEqual(['nested-repository private/ext']);
    expect(userGit(sb, vault, ['ls-tree', 'main', 'private/ext'])).toMatch(/^160000 commit /);
    expect(userGit(sb, vault, ['ls-files', '-s', 'private/ext'])).toBe(gitlink);
    expect(userGit(sb, vault, ['status', '--porcelain']).trim()).toBe('');
    expect(scan()).toMatchObject({ added: [], modified: [], deleted: [], git: null });
  });

  it('a submodule that is not checked out (its folder holds no .git): files put there are not committed over its gitlink', () => {
    put('private/real.md', record('real', 'Real'));
    expect(scan()).toMatchObject({ added: ['private/real.md'], git: { state: 'committed' } });
    // A gitlink in the branch and the index, its folder empty (as after `git submodule deinit`).
    const head = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    userGit(sb, vault, ['update-index', '--add', '--cacheinfo', `160000,${head},private/lib`]);
    userGit(sb, vault, ['commit', '-q', '-m', 'user: submodule']);
    mkdirSync(join(vault, 'private/lib'));
    put('private/lib/note.md', record('note', 'Note'));
    put('private/other.md', record('other', 'Other'));
    const r = scan();
    expect(r).toMatchObject({ added: ['private/other.md'], deleted: [], git: { state: 'committed' } });
    expect(codes(r)).toEqual(['nested-repository private/lib']);
    expect(userGit(sb, vault, ['ls-tree', 'main', 'private/lib'])).toMatch(/^160000 commit /);
    expect(userGit(sb, vault, ['ls-files', '-s', 'private/lib'])).toMatch(/^160000 /);
    expect(scan()).toMatchObject({ added: [], modified: [], git: null });
  });

  it('a submodule only staged (a gitlink in the user\'s index, not yet committed, its folder not checked out): its files are not committed, and the staged gitlink stays', () => {
    put('private/real.md', record('real', 'Real'));
    expect(scan()).toMatchObject({ added: ['private/real.md'], git: { state: 'committed' } });
    const head = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    userGit(sb, vault, ['update-index', '--add', '--cacheinfo', `160000,${head},private/deep/lib`]);
    mkdirSync(join(vault, 'private/deep/lib'), { recursive: true });
    put('private/deep/lib/note.md', record('note', 'Note'));
    put('private/deep/other.md', record('other', 'Other'));
    const r = scan();
    expect(r).toMatchObject({ added: ['private/deep/other.md'], deleted: [], git: { state: 'committed' } });
    expect(codes(r)).toEqual(['nested-repository private/deep/lib']);
    expect(userGit(sb, vault, ['ls-tree', '-r', 'main', 'private/deep'])).not.toMatch(/note\.md/);
    expect(userGit(sb, vault, ['ls-files', '-s', 'private/deep/lib'])).toMatch(/^160000 /);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toMatch(/^A {2}private\/deep\/lib$/m);
    expect(scan()).toMatchObject({ added: [], modified: [], git: null });
  });

  it('a partition folder that is a repository of its own, or whose parent folder is, is not scanned either', () => {
    put('private/real.md', record('real', 'Real'));
    put('conversations/c2/x.md', record('x', 'X', '', 'x\n', 'conversation:c2'));
    userGit(sb, join(vault, 'conversations/c2'), ['init', '-q']);
    const r = scan();
    expect(r.added).toEqual(['private/real.md']);
    expect(codes(r)).toEqual(['nested-repository conversations/c2']);
    rmSync(join(vault, 'conversations/c2/.git'), { recursive: true, force: true });
    userGit(sb, join(vault, 'conversations'), ['init', '-q']);
    const again = scan();
    expect(again).toMatchObject({ added: [], deleted: [] });
    expect(codes(again)).toEqual(['nested-repository conversations/c2']);
    expect(again.diagnostics[0]!.reason).toMatch(/^conversations is a Git repository of its own/);
    rmSync(join(vault, 'conversations/.git'), { recursive: true, force: true });
    expect(scan().added).toEqual(['conversations/c2/x.md']);
  });

  it('a name Git takes for its own .git folder (git~1) is reported and never committed: no user commit could keep it', () => {
    put('private/real.md', record('real', 'Real'));
    put('private/git~1/evil.md', record('evil', 'Evil'));
    put('private/notes/GIT~1. /x.yaml', 'x: 1\n');
    const r = scan();
    expect(r.added).toEqual(['private/real.md']);
    expect(codes(r)).toEqual(['invalid-name private/git~1/evil.md', 'invalid-name private/notes/GIT~1. /x.yaml']);
    expect(tree(r.git!.commit!)).toEqual(['private/real.md']);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no']).trim()).toBe('');
  });

  it('a name Git takes for .git by neither of its rules alone (an HFS-ignored code point in git~1, or before a trailing dot) is committed, and enters an index that protects both', () => {
    const zwnj = '\u200c'; // ignored by HFS+; a name starting with it is not a hidden name
    put(`private/g${zwnj}it~1/a.md`, record('a', 'A'));
    put(`private/${zwnj}.git./b.md`, record('b', 'B'));
    put(`private/${zwnj}.git/c.md`, record('c', 'C')); // .git on HFS+: still refused
    const r = scan();
    expect(r.added).toEqual([`private/${zwnj}.git./b.md`, `private/g${zwnj}it~1/a.md`].sort());
    expect(codes(r)).toEqual([`invalid-name private/${zwnj}.git/c.md`]);
    expect(userGit(sb, vault, ['-c', 'core.quotePath=false', 'ls-tree', '-r', '--name-only', r.git!.commit!]).trim().split('\n').sort()).toEqual(r.added);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=no']).trim()).toBe('');
    userGit(sb, vault, ['-c', 'core.protectNTFS=true', '-c', 'core.protectHFS=true', 'read-tree', r.git!.commit!]); // throws if git refused a path
  });

  it('a file over 256 MiB is reported as too-large and never read; the rest of the scan commits, and what was recorded of it is kept', () => {
    put('private/kept.md', record('kept', 'Kept'));
    put('private/edited.md', record('ed', 'Edited'));
    scan();
    put('private/edited.md', record('ed', 'Edited', '', 'New words.\n'));
    truncateSync(join(vault, 'private/kept.md'), 256 * 1024 * 1024 + 1); // sparse: nothing is written to disk
    writeFileSync(join(vault, 'private/huge.md'), '');
    truncateSync(join(vault, 'private/huge.md'), 600 * 1024 * 1024); // past what SQLite can bind as one value
    const r = scan();
    expect(r.modified).toEqual(['private/edited.md']);
    expect(r.deleted).toEqual([]);
    expect(r.diagnostics.filter((d) => d.code === 'too-large').map((d) => `${d.path}: ${d.reason}`)).toEqual([
      'private/huge.md: 629145600 bytes, more than the 268435456 a scan reads; not checkpointed',
      'private/kept.md: 268435457 bytes, more than the 268435456 a scan reads; not checkpointed, and what Knowledge recorded is kept',
    ]);
    expect(tree(r.git!.commit!)).toEqual(['private/edited.md', 'private/kept.md']);
    // Small again: the next scan reads and commits both.
    put('private/kept.md', record('kept', 'Kept', '', 'Back.\n'));
    put('private/huge.md', record('huge', 'Huge no more'));
    const again = scan();
    expect(again.added).toEqual(['private/huge.md']);
    expect(again.modified).toEqual(['private/kept.md']);
    expect(codes(again)).toEqual([]);
  });

  it.skipIf(NO_UNPRIVILEGED)(`[SCAN-2] a folder that cannot be read is reported and what Knowledge recorded under it is kept, not deleted ${UNPRIVILEGED_NOTE}`, () => {
    put('private/locked/inside.md', record('in', 'Inside'));
    put('private/open.md', record('op', 'Open'));
    scan();
    // Root reads everything: there the scan runs as an unprivileged user (nobody) instead.
    const run = unprivilegedCli(sb, 'the unreadable-folder scan test')!;
    chmodSync(join(vault, 'private/locked'), 0o000);
    try {
      const out = run(['scan', '--store', 'st', '--json']);
      expect(out.code, out.stderr).toBe(0);
      const r = JSON.parse(out.stdout) as Receipt;
      expect(codes(r)).toEqual(['unreadable private/locked']);
      expect(r.deleted).toEqual([]);
      expect(r.git).toBeNull();
    } finally {
      chmodSync(join(vault, 'private/locked'), 0o755);
    }
    // Readable again: nothing changed.
    expect(scan()).toMatchObject({ deleted: [], added: [], modified: [], diagnostics: [] });
  });

  it.skipIf(NO_UNPRIVILEGED)(`[SCAN-2] a file that cannot be read is a diagnostic naming it, never the end of the scan: the other files are checkpointed ${UNPRIVILEGED_NOTE}`, () => {
    put('private/open.md', record('op', 'Open'));
    scan();
    put('private/new.md', record('nw', 'New'));
    put('private/secret.md', record('se', 'Secret'));
    put('private/open.md', record('op', 'Open', '', 'Edited.\n'));
    const run = unprivilegedCli(sb, 'the unreadable-file scan test')!;
    // As nobody (root's case), the vault must be nobody's too, or Git refuses it (safe.directory) and nothing commits.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) expect(spawnSync('chown', ['-R', '65534:65534', vault]).status).toBe(0);
    chmodSync(join(vault, 'private/secret.md'), 0o000);
    let r: Receipt;
    try {
      const out = run(['scan', '--store', 'st', '--json']);
      expect(out.code, out.stderr).toBe(0);
      r = JSON.parse(out.stdout) as Receipt;
      expect(r.diagnostics.map((d) => `${d.code} ${d.path}: ${d.reason}`)).toEqual([expect.stringMatching(/^unreadable private\/secret\.md: .*permission denied/)]);
      expect(r.added).toEqual(['private/new.md']);
      expect(r.modified).toEqual(['private/open.md']);
      expect(r.deleted).toEqual([]);
      expect(r.git, JSON.stringify(r.git)).toMatchObject({ state: 'committed' });
    } finally {
      chmodSync(join(vault, 'private/secret.md'), 0o644);
      if (asRoot) spawnSync('chown', ['-R', `${process.getuid!()}:${process.getgid!()}`, vault]);
    }
    expect(tree(r.git!.commit!)).toEqual(['private/new.md', 'private/open.md']);
    // Readable again: the next scan records it.
    expect(scan()).toMatchObject({ added: ['private/secret.md'], modified: [], deleted: [], diagnostics: [] });
  });
});

describe('[GIT-16][SCAN-3] a scan retries waiting checkpoints first, then commits its own', () => {
  it('commits a publication queued while git was missing before the scan\'s own checkpoint', () => {
    put('private/hand.md', record('h', 'Hand'));
    scan();
    const pub = publish('---\nkind: page\ntitle: Queued\n---\nwhile git was missing\n', NO_GIT);
    expect(pub.git.state).toBe('unavailable');
    appendFileSync(join(vault, 'private/hand.md'), 'edited\n');
    const r = scan();
    expect(r.retried).toEqual([{ kind: 'publication', id: pub.publicationId, batchId: expect.any(Number), git: { state: 'committed', commit: expect.any(String) } }]);
    expect(r.modified).toEqual(['private/hand.md']);
    expect(r.git?.state).toBe('committed');
    const log = userGit(sb, vault, ['log', '--format=%H %P', '-2', 'main']).trim().split('\n').map((l) => l.split(' '));
    expect(log[0]![0]).toBe(r.git!.commit);
    expect(log[1]![0]).toBe(r.retried[0]!.git.commit);
    expect(log[0]![1]).toBe(r.retried[0]!.git.commit); // the scan's commit sits on the publication's
    expect(JSON.parse(cli(sb, ['receipt', '--store', 'st', pub.publicationId, '--json']).stdout).git.state).toBe('committed');
  });

  it('a scan whose own checkpoint is pending is committed by the next scan, which finds nothing new', () => {
    put('private/a.md', record('a', 'A'));
    scan();
    put('private/b.md', record('b', 'B'));
    const lock = join(vault, '.git', 'refs', 'heads', 'main.lock');
    writeFileSync(lock, '');
    const blocked = scan();
    expect(blocked.added).toEqual(['private/b.md']);
    expect(blocked.git).toMatchObject({ state: 'pending', code: 'locked' });
    expect(existsSync(lock)).toBe(true); // a stale lock is never removed [GIT-19]
    unlinkSync(lock);
    // A scan is not resumed by id: the command says what does it.
    const resume = cli(sb, ['resume', '--store', 'st', blocked.scanId]);
    expect(resume.code).toBe(2);
    expect(resume.stderr).toMatch(new RegExp(`^E_USAGE: ${blocked.scanId} is a scan: run knowledge scan, which commits every waiting checkpoint first\n`));
    const r = scan();
    expect(r).toMatchObject({ added: [], git: null });
    expect(r.retried).toEqual([{ kind: 'scan', id: blocked.scanId, batchId: expect.any(Number), git: { state: 'committed', commit: expect.any(String) } }]);
    expect(tree()).toContain('private/b.md');
    expect(JSON.parse(cli(sb, ['receipt', '--store', 'st', blocked.scanId, '--json']).stdout).git.state).toBe('committed');
  });

  it('with git missing the scan still records what it saw; its checkpoint is committed when git is back', () => {
    put('private/a.md', record('a', 'A'));
    const r = scan([], NO_GIT);
    expect(r.git?.state).toBe('unavailable');
    expect(scan([], NO_GIT)).toMatchObject({ added: [], retried: [{ kind: 'scan', id: r.scanId, git: { state: 'unavailable' } }] });
    const back = scan();
    expect(back.retried.map((x) => x.id)).toEqual([r.scanId]);
    expect(back.retried[0]!.git.state).toBe('committed');
    expect(tree()).toEqual(['private/a.md']);
  });

  it('scans queued while git is missing keep their own staged bytes: each commit has exactly what its scan read', () => {
    put('private/a.md', record('a', 'A'));
    const first = scan([], NO_GIT);
    put('private/a.md', record('a', 'A, edited'));
    put('private/b.md', record('b', 'B'));
    const second = scan([], NO_GIT);
    expect(second).toMatchObject({ added: ['private/b.md'], modified: ['private/a.md'], git: { state: 'unavailable' } });
    // Both queued scans' bytes wait in staging (the outbox reads them there) until their commits are recorded.
    const staged = () => {
      const d = db();
      try {
        return d.prepare('SELECT scan_id, path, bytes FROM scan_staging ORDER BY scan_id, path').all() as Array<{ scan_id: string; path: string; bytes: Buffer }>;
      } finally {
        d.close();
      }
    };
    expect(staged().map((r) => [r.scan_id, r.path])).toEqual([[first.scanId, 'private/a.md'], [second.scanId, 'private/a.md'], [second.scanId, 'private/b.md']].sort());
    put('private/a.md', record('a', 'A, edited twice'));
    const back = scan();
    expect(back.retried.map((x) => [x.id, x.git.state])).toEqual([[first.scanId, 'committed'], [second.scanId, 'committed']]);
    expect(back.modified).toEqual(['private/a.md']);
    const at = (id: string) => userGit(sb, vault, ['log', '--format=%H', `--grep=Knowledge-Scan: ${id}`, 'main']).trim();
    expect(userGit(sb, vault, ['show', `${at(first.scanId)}:private/a.md`])).toBe(record('a', 'A'));
    expect(userGit(sb, vault, ['show', `${at(second.scanId)}:private/a.md`])).toBe(record('a', 'A, edited'));
    expect(userGit(sb, vault, ['show', `${at(second.scanId)}:private/b.md`])).toBe(record('b', 'B'));
    expect(userGit(sb, vault, ['show', 'main:private/a.md'])).toBe(record('a', 'A, edited twice'));
    expect(staged()).toEqual([]);
    expect(JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout).ok).toBe(true);
  });

  it('knowledge verify checks a queued scan\'s staged bytes; a scan batch queued with its bytes inline (older stores) still commits them', () => {
    put('private/a.md', record('a', 'A'));
    put('private/b.md', record('b', 'B'));
    const r = scan([], NO_GIT);
    const verify = () => JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout) as { ok: boolean; batches: { queued: number }; problems: Array<{ code: string; path?: string }> };
    expect(verify()).toMatchObject({ ok: true, batches: { queued: 1 }, problems: [] });
    const d = new Database(join(store, 'state.sqlite')); // no Knowledge process is running
    try {
      // Each staged row carries the hash its reader took of those bytes (checking it does not hash them again).
      const rows = d.prepare('SELECT path, bytes, sha256 FROM scan_staging ORDER BY path').all() as Array<{ path: string; bytes: Buffer; sha256: string }>;
      expect(rows.map((x) => [x.path, x.sha256])).toEqual(rows.map((x) => [x.path, createHash('sha256').update(x.bytes).digest('hex')]));
      expect(rows).toHaveLength(2);
      // a.md as a Knowledge before schema version 6 queued it: its bytes in batch_files, none staged.
      d.prepare("UPDATE batch_files SET bytes = (SELECT bytes FROM scan_staging WHERE path = 'private/a.md') WHERE path = 'private/a.md'").run();
      d.prepare("DELETE FROM scan_staging WHERE path = 'private/a.md'").run();
      expect(verify()).toMatchObject({ ok: true, problems: [] });
      // b.md's staged bytes lost: verify names the file.
      const b = d.prepare("SELECT bytes FROM scan_staging WHERE path = 'private/b.md'").pluck().get() as Buffer;
      d.prepare("DELETE FROM scan_staging WHERE path = 'private/b.md'").run();
      expect(verify()).toMatchObject({ ok: false, problems: [{ code: 'bytes-missing', path: 'private/b.md' }] });
      d.prepare('INSERT INTO scan_staging(scan_id, path, bytes) VALUES (?, ?, ?)').run(r.scanId, 'private/b.md', b);
    } finally {
      d.close();
    }
    put('private/a.md', record('a', 'A, edited'));
    const back = scan();
    expect(back.retried.map((x) => [x.id, x.git.state])).toEqual([[r.scanId, 'committed']]);
    const at = userGit(sb, vault, ['log', '--format=%H', `--grep=Knowledge-Scan: ${r.scanId}`, 'main']).trim();
    expect(userGit(sb, vault, ['show', `${at}:private/a.md`])).toBe(record('a', 'A'));
    expect(userGit(sb, vault, ['show', `${at}:private/b.md`])).toBe(record('b', 'B'));
    expect(userGit(sb, vault, ['show', 'main:private/a.md'])).toBe(record('a', 'A, edited'));
    expect(verify()).toMatchObject({ ok: true, problems: [] });
  });

  it('a scan killed after queueing its checkpoint is committed exactly once by the next scan', () => {
    put('private/a.md', record('a', 'A'));
    const killed = cli(sb, ['scan', '--store', 'st', '--json'], { env: { KNOWLEDGE_CRASH_AT: 'scan-after-enqueue' } });
    expect(killed.code).toBeNull();
    const r = scan();
    expect(r.added).toEqual([]);
    expect(r.retried).toHaveLength(1);
    expect(r.retried[0]!.git.state).toBe('committed');
    expect(userGit(sb, vault, ['log', '--format=%H', `--grep=Knowledge-Scan: ${r.retried[0]!.id}`, 'main']).trim().split('\n')).toHaveLength(1);
    expect(commits()).toBe(1);
  });

  it('a scan killed while staging leaves nothing behind; the next scan does the work once', () => {
    for (let i = 0; i < 5; i++) put(`private/f${i}.md`, record(`f${i}`, `F${i}`));
    const killed = cli(sb, ['scan', '--store', 'st', '--json'], { env: { KNOWLEDGE_CRASH_AT: 'scan-mid-stage' } });
    expect(killed.code).toBeNull();
    const r = scan();
    expect(r.added).toHaveLength(5);
    expect(r.retried).toEqual([]);
    expect(commits()).toBe(1);
    const d = db();
    expect(d.prepare('SELECT count(*) FROM scan_staging').pluck().get()).toBe(0);
    d.close();
  });
});

describe('[SCAN-4] what a scan recorded (file metadata, folder digests) never hides a change, from the CLI or an open service', () => {
  const open: KnowledgeService[] = [];
  afterEach(() => {
    for (const s of open.splice(0)) s.close();
  });
  const service = () => {
    const s = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
    open.push(s);
    return s;
  };
  const operator: Caller = { kind: 'operator' };
  /** Past the racy window (plan.ts isRacy, 100 ms): a file read now is recorded as one the next scan may trust. */
  const pastRacyWindow = () => new Promise((r) => setTimeout(r, RACY_WAIT_MS));
  /** An old mtime; its ctime (which no program sets) is now: trusted once pastRacyWindow() has passed too. */
  const old = (rel: string) => utimesSync(join(vault, rel), 1_700_000_000, 1_700_000_000);

  it('files edited, added, deleted and renamed between two in-process scans', async () => {
    for (const n of ['a', 'b', 'c']) {
      put(`private/${n}.md`, record(n, n.toUpperCase()));
      old(`private/${n}.md`);
    }
    await pastRacyWindow();
    const s = service();
    expect((await s.scan({ caller: operator })).added).toHaveLength(3);
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, unchanged: 3, git: null });
    appendFileSync(join(vault, 'private/a.md'), 'More.\n');
    old('private/a.md'); // an older mtime than recorded: only size and the rest tell
    put('private/d.md', record('d', 'D'));
    old('private/d.md');
    unlinkSync(join(vault, 'private/b.md'));
    renameSync(join(vault, 'private/c.md'), join(vault, 'private/e.md'));
    await pastRacyWindow();
    const r = await s.scan({ caller: operator });
    expect(r).toMatchObject({ modified: ['private/a.md'], added: ['private/d.md'], deleted: ['private/b.md'], renamed: [{ from: 'private/c.md', to: 'private/e.md' }] });
    expect(r.git?.state).toBe('committed');
    // What that scan recorded is what the next one compares with: nothing read, nothing reported.
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, unchanged: 3, added: [], modified: [], deleted: [], renamed: [], git: null });
    // An edit in place that keeps the size, the inode and even the old mtime is still seen when the mtime differs from the recorded one.
    writeFileSync(join(vault, 'private/d.md'), record('d', 'X'));
    utimesSync(join(vault, 'private/d.md'), 1_700_000_001, 1_700_000_001);
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: ['private/d.md'], hashed: 1 });
  });

  it('a baseline of 1,500 files: the blobs go into the repository ahead of the commit, which holds exactly the files, index in step', () => {
    // Past PRELOAD_MIN_FILES files to write, a scan preloads their blobs on a worker thread (src/git/blob-preload.ts).
    const text = (i: number, v = 1) => record(`rec-${i}`, `Note ${i}`, '', `Version ${v} of note ${i}.\n`);
    for (let i = 0; i < 1500; i++) put(`private/pages/n${i % 7}/note-${i}.md`, text(i));
    const r = scan();
    expect(r).toMatchObject({ baseline: true, git: { state: 'committed' } });
    expect(r.added).toHaveLength(1500);
    expect(tree().filter((p) => p.startsWith('private/'))).toHaveLength(1500);
    expect(userGit(sb, vault, ['show', 'main:private/pages/n6/note-1000.md'])).toBe(text(1000));
    // A pack of blobs only, all 1,500 of them: the preload's (the commit's own pack has its trees and commit).
    const packs = userGit(sb, vault, ['count-objects', '-v']);
    expect(packs).toMatch(/packs: [2-9]/);
    const blobPacks = readdirSync(join(vault, '.git/objects/pack')).filter((n) => n.endsWith('.idx')).map((idx) => {
      const kinds = userGit(sb, vault, ['verify-pack', '-v', join(vault, '.git/objects/pack', idx)]).split('\n').map((l) => l.split(' ')[1]).filter((k) => k === 'blob' || k === 'tree' || k === 'commit');
      return { blobs: kinds.filter((k) => k === 'blob').length, other: kinds.filter((k) => k !== 'blob').length };
    }).filter((p) => p.other === 0);
    expect(blobPacks.map((p) => p.blobs)).toContain(1500);
    expect(userGitRaw(sb, vault, ['fsck', '--strict']).status).toBe(0);
    expect(userGit(sb, vault, ['status', '--porcelain']).trim()).toBe('');
    // A large edit later: again exactly those files, one commit.
    for (let i = 0; i < 1200; i++) put(`private/pages/n${i % 7}/note-${i}.md`, text(i, 2));
    const before = commits();
    const e = scan();
    expect(e.modified).toHaveLength(1200);
    expect(commits()).toBe(before + 1);
    expect(nameStatus('main')).toHaveLength(1200);
    expect(userGit(sb, vault, ['show', 'main:private/pages/n6/note-1000.md'])).toBe(text(1000, 2));
    expect(userGitRaw(sb, vault, ['fsck', '--strict']).status).toBe(0);
    expect(userGit(sb, vault, ['status', '--porcelain']).trim()).toBe('');
  });

  it('two scans started at once on one open service run one after the other: one baseline, then nothing new', async () => {
    // 1,500 files to write: the first scan waits for its blob preload between staging and applying,
    // which is where a second scan clearing the staging table would take its files away.
    for (let i = 0; i < 1500; i++) put(`private/pages/n${i % 7}/note-${i}.md`, record(`rec-${i}`, `Note ${i}`));
    for (let i = 0; i < 7; i++) for (const n of readdirSync(join(vault, `private/pages/n${i}`))) old(`private/pages/n${i}/${n}`);
    await pastRacyWindow();
    const s = service();
    const [a, b] = await Promise.all([s.scan({ caller: operator }), s.scan({ caller: operator })]);
    expect(a).toMatchObject({ baseline: true, git: { state: 'committed' } });
    expect(a.added).toHaveLength(1500);
    expect(b).toMatchObject({ baseline: false, added: [], modified: [], deleted: [], unchanged: 1500, hashed: 0, git: null });
    expect(tree().filter((p) => p.startsWith('private/'))).toHaveLength(1500);
    expect(s.store.db.prepare('SELECT count(*) FROM scan_staging').pluck().get()).toBe(0);
  });

  it('a vault of 10,000 files, listed and stat-ed by worker threads: the CLI and an open service see exactly the edits', async () => {
    // Past PREFETCH_MIN_FILES recorded files, rescans walk over the workers' listings (src/scan/prefetch.ts).
    const hh = (n: number) => n.toString(16).padStart(2, '0');
    for (let d = 0; d < 100; d++) for (let i = 0; i < 100; i++) put(`private/pages/${hh(d)}/n-${d}-${i}.md`, `# Note ${d}/${i}\n`);
    for (let d = 0; d < 100; d++) utimesSync(join(vault, `private/pages/${hh(d)}`), 1_700_000_000, 1_700_000_000);
    spawnSync('find', [join(vault, 'private'), '-type', 'f', '-exec', 'touch', '-d', '@1700000000', '{}', '+']);
    await pastRacyWindow();
    expect(scan([], NO_GIT).added).toHaveLength(10_000);
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 10_000, git: null });
    writeFileSync(join(vault, 'private/pages/05/n-5-5.md'), '# Note 5/5, edited in place\n');
    unlinkSync(join(vault, 'private/pages/07/n-7-7.md'));
    renameSync(join(vault, 'private/pages/09/n-9-9.md'), join(vault, 'private/pages/0a/moved.md'));
    put('private/pages/63/new.md', '# New\n');
    const r = scan([], NO_GIT);
    expect(r).toMatchObject({ modified: ['private/pages/05/n-5-5.md'], added: ['private/pages/63/new.md'], deleted: ['private/pages/07/n-7-7.md'], renamed: [{ from: 'private/pages/09/n-9-9.md', to: 'private/pages/0a/moved.md' }], unchanged: 9_997 });
    const s = service();
    expect(await s.scan({ caller: operator })).toMatchObject({ added: [], modified: [], deleted: [], renamed: [] });
    writeFileSync(join(vault, 'private/pages/44/n-68-1.md'), '# Note 68/1, edited by the service\n');
    utimesSync(join(vault, 'private/pages/44/n-68-1.md'), 1_700_000_100, 1_700_000_100);
    await pastRacyWindow(); // its ctime too: the next scan may trust it
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: ['private/pages/44/n-68-1.md'], added: [], deleted: [] });
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, modified: [], unchanged: 10_000 });
  });

  it('folders found wholly unchanged are recognised by a digest of their listing, which never hides an edit, a new or gone file, or a publication', async () => {
    const folders = ['a', 'b', 'c', 'd'];
    for (const f of folders) for (const n of [1, 2, 3]) {
      put(`private/${f}/n${n}.md`, `# ${f} ${n}\n`);
      old(`private/${f}/n${n}.md`);
    }
    const digests = () => {
      const d = db();
      try {
        return Object.fromEntries((d.prepare("SELECT dir, digest FROM scan_folders WHERE partition = 'private' ORDER BY dir").raw().all() as Array<[string, string | null]>)
          .map(([dir, digest]) => [dir.slice('private/'.length), digest !== null]));
      } finally {
        d.close();
      }
    };
    await pastRacyWindow();
    expect(scan([], NO_GIT).added).toHaveLength(12);
    expect(digests()).toEqual({ a: false, b: false, c: false, d: false }); // just recorded: nothing compared yet
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 12 });
    expect(digests()).toEqual({ a: true, b: true, c: true, d: true });
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 12, added: [], modified: [], deleted: [] }); // by digest alone

    writeFileSync(join(vault, 'private/a/n1.md'), '# a 1, edited\n');
    old('private/a/n1.md'); // an older mtime than recorded: size and inode tell
    put('private/b/new.md', '# new\n');
    old('private/b/new.md');
    unlinkSync(join(vault, 'private/c/n2.md'));
    utimesSync(join(vault, 'private/d/n3.md'), 1_700_000_500, 1_700_000_500); // touched, same bytes
    await pastRacyWindow();
    expect(scan([], NO_GIT)).toMatchObject({ modified: ['private/a/n1.md'], added: ['private/b/new.md'], deleted: ['private/c/n2.md'], hashed: 3, unchanged: 9 });
    expect(digests()).toEqual({ a: false, b: false, c: false, d: false });
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 12, modified: [] });
    expect(digests()).toEqual({ a: true, b: true, c: true, d: true });

    // Same size, same inode, another mtime: an edit in place.
    writeFileSync(join(vault, 'private/b/n2.md'), '# b X\n');
    old('private/b/n2.md');
    utimesSync(join(vault, 'private/b/n2.md'), 1_700_000_001, 1_700_000_001);
    rmSync(join(vault, 'private/d'), { recursive: true });
    await pastRacyWindow();
    const s = service();
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: ['private/b/n2.md'], deleted: ['private/d/n1.md', 'private/d/n2.md', 'private/d/n3.md'], hashed: 1 });
    expect(digests()).toEqual({ a: true, b: false, c: true, d: false });
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, unchanged: 9, deleted: [] });
    expect(digests()).toEqual({ a: true, b: true, c: true }); // a folder left with nothing recorded is forgotten
    // A publication's install clears the digest of its folder: it is compared file by file, and is not an outside edit.
    const rec = (v: number) => `---\nkind: page\nid: rec-pub\n${v > 1 ? 'revision: 1\n' : ''}title: Published\n---\nVersion ${v}.\n`;
    const path = (await s.publish({ partition: 'private', actor: 'operator', records: [rec(1)], evidence: [] })).records[0]!.path as string;
    const dir = path.slice('private/'.length, path.lastIndexOf('/'));
    await pastRacyWindow();
    expect(await s.scan({ caller: operator })).toMatchObject({ added: [], modified: [], hashed: 1 }); // racy: read once more
    expect(digests()[dir]).toBe(false);
    expect(await s.scan({ caller: operator })).toMatchObject({ added: [], modified: [], hashed: 0 });
    expect(digests()[dir]).toBe(true);
    await s.publish({ partition: 'private', actor: 'operator', records: [rec(2)], evidence: [] });
    expect(digests()[dir]).toBe(false);
    expect(await s.scan({ caller: operator })).toMatchObject({ added: [], modified: [], deleted: [] });
    expect(readFileSync(join(vault, path), 'utf8')).toContain('Version 2.');
  });

  it('folders named with characters beyond the BMP (emoji): edits, deletions and renames in their subfolders', async () => {
    const top = 'private/\u{1F4DA} Books/\u{1F3AC}\u{1F3AC}\u{1F3AC} Films';
    for (const rel of ['index.md', 'A/x.md', 'AB/y.md', 'A/B/z.md']) {
      put(`${top}/${rel}`, `# ${rel}\n`);
      old(`${top}/${rel}`);
    }
    await pastRacyWindow();
    expect(scan([], NO_GIT).added).toHaveLength(4);
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 4 });
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 4 });
    writeFileSync(join(vault, `${top}/A/x.md`), '# x, edited\n');
    old(`${top}/A/x.md`);
    unlinkSync(join(vault, `${top}/AB/y.md`));
    renameSync(join(vault, `${top}/A/B/z.md`), join(vault, `${top}/A/z.md`));
    await pastRacyWindow();
    expect(scan([], NO_GIT)).toMatchObject({ modified: [`${top}/A/x.md`], deleted: [`${top}/AB/y.md`], renamed: [{ from: `${top}/A/B/z.md`, to: `${top}/A/z.md` }], added: [] });
    expect(scan([], NO_GIT)).toMatchObject({ hashed: 0, unchanged: 3, added: [], modified: [], deleted: [] });
  });

  it('what a publication records of its own install is racy: a same-size edit that keeps the recorded mtime is still seen', async () => {
    const s = service();
    const pub = await s.publish({ partition: 'private', actor: 'operator', records: ['---\nkind: page\nid: rec-racy\ntitle: Racy\n---\nVersion A.\n'], evidence: [] });
    const path = pub.records[0]!.path as string;
    const abs = join(vault, path);
    const recorded = s.store.db.prepare('SELECT mtime_ns, ino, racy FROM vault_files WHERE path = ?').get(path) as { mtime_ns: string; ino: string; racy: number };
    expect(recorded.racy).toBe(1);
    // Edited in place right after the install (same inode, same size), its mtime back at the recorded one,
    // as an edit in the same clock tick as the install would leave it.
    writeFileSync(abs, readFileSync(abs, 'utf8').replace('Version A.', 'Version B.'));
    const ns = BigInt(recorded.mtime_ns);
    const t = spawnSync('touch', ['-m', '-d', `@${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, '0')}`, abs]);
    expect(t.status).toBe(0);
    const now = lstatSync(abs, { bigint: true });
    expect([now.mtimeNs.toString(), now.ino.toString()]).toEqual([recorded.mtime_ns, recorded.ino]);
    await pastRacyWindow(); // the scan below then records what it reads as trustworthy (else it stays racy)
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: [path], hashed: 1 });
    // Read once, recorded as it is now (not racy any more): the next scan trusts it.
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: [], hashed: 0 });
  });

  describe('[REC-4] a record put back by hand at an older revision goes on from its highest revision: no revision number names two versions', () => {
    const page = (id: string, revision: number | null, body: string) => `---\nkind: page\nid: ${id}\n${revision ? `revision: ${revision}\n` : ''}title: ${id}\n---\n${body}\n`;
    /** Three revisions of `id`; its path and its first version's bytes, from the vault's own history. */
    function threeRevisions(id: string): { path: string; first: string } {
      const first = publish(page(id, null, 'body 1'));
      publish(page(id, 1, 'body 2'));
      const path = publish(page(id, 2, 'body 3')).records[0].path as string;
      return { path, first: userGit(sb, vault, ['show', `${first.git.commit}:${path}`]) };
    }
    const nextRevision = (id: string, expected: number | null) => publish(page(id, expected, 'published after the rollback')).records[0].revision;

    it('put back in place: revised from what its file says (revision 1), it becomes 4; deleted then, and published again, 4 as well', () => {
      const a = threeRevisions('rec-back');
      const b = threeRevisions('rec-gone');
      writeFileSync(join(vault, a.path), a.first);
      writeFileSync(join(vault, b.path), b.first);
      expect(scan()).toMatchObject({ modified: [a.path, b.path].sort() });
      expect(nextRevision('rec-back', 1)).toBe(4);
      rmSync(join(vault, b.path));
      expect(scan()).toMatchObject({ deleted: [b.path] });
      expect(nextRevision('rec-gone', null)).toBe(4);
    });

    it('put back in a later scan than the one that saw it deleted, broken, or its newer copy removed', () => {
      const deleted = threeRevisions('rec-deleted');
      const broken = threeRevisions('rec-broken');
      const copied = threeRevisions('rec-copied');
      rmSync(join(vault, deleted.path));
      writeFileSync(join(vault, broken.path), '---\nkind: page\nid: rec-broken\n: : [\n---\nbroken\n');
      put(join(dirname(copied.path), 'copy.md'), copied.first); // an older copy beside it: the id claimed twice
      scan();
      writeFileSync(join(vault, deleted.path), deleted.first);
      writeFileSync(join(vault, broken.path), broken.first);
      rmSync(join(vault, copied.path)); // the newer one gone: the older copy is the record again
      scan();
      expect(nextRevision('rec-deleted', 1)).toBe(4);
      expect(nextRevision('rec-broken', 1)).toBe(4);
      expect(nextRevision('rec-copied', 1)).toBe(4);
    });
  });

  it('an edit made after a publication installed a file and before it recorded the file\'s fingerprint is seen by the next scan, however long before the fingerprint it was made', async () => {
    writeFileSync(join(sb.dir, 'slow.md'), '---\nkind: page\nid: rec-slow\ntitle: Slow\n---\nInstalled bytes.\n');
    // The publication pauses between its install and its acknowledgement (as a large evidence file's hashing would).
    const child = spawn(process.execPath, [cliPath, 'publish', '--store', 'st', '--json', 'slow.md'], {
      cwd: sb.dir, env: { ...sb.env, KNOWLEDGE_PAUSE_AT: 'after-install:1500' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (c) => { out += c; });
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    const pages = join(vault, 'private', 'pages');
    const installed = () => (existsSync(pages) ? readdirSync(pages, { recursive: true, encoding: 'utf8' }).find((n) => n.endsWith('slow.md')) : undefined);
    for (let i = 0; i < 500 && installed() === undefined; i++) await new Promise((tick) => setTimeout(tick, 10));
    const rel = installed();
    expect(rel, 'the publication installed its file').toBeDefined();
    appendFileSync(join(pages, rel!), 'Line added by an outside editor.\n');
    expect(await exited).toBe(0);
    const path = (JSON.parse(out) as { records: Array<{ path: string }> }).records[0]!.path;
    const r = scan();
    expect(r).toMatchObject({ modified: [path], git: { state: 'committed' } });
    expect(userGit(sb, vault, ['show', `main:${path}`])).toContain('Line added by an outside editor.');
  });

  it('an edit in place that keeps the size and puts the old mtime back (cp -p, touch -r) is seen by its ctime, from the CLI', async () => {
    put('private/notes/a.md', 'Version A.\n');
    old('private/notes/a.md');
    await pastRacyWindow(); // the baseline records it as trustworthy
    expect(scan()).toMatchObject({ added: ['private/notes/a.md'] });
    const before = lstatSync(join(vault, 'private/notes/a.md'), { bigint: true });
    const other = join(sb.dir, 'b.md');
    writeFileSync(other, 'Version B.\n');
    utimesSync(other, 1_700_000_000, 1_700_000_000);
    const cp = spawnSync('cp', ['-p', other, join(vault, 'private/notes/a.md')]);
    expect(cp.status, cp.stderr.toString()).toBe(0);
    const after = lstatSync(join(vault, 'private/notes/a.md'), { bigint: true });
    // Size, mtime and inode all as recorded: only the ctime tells.
    expect([after.size, after.mtimeNs, after.ino]).toEqual([before.size, before.mtimeNs, before.ino]);
    expect(after.ctimeNs).not.toBe(before.ctimeNs);
    await pastRacyWindow();
    const r = scan();
    expect(r).toMatchObject({ modified: ['private/notes/a.md'], hashed: 1 });
    expect(userGit(sb, vault, ['show', `${r.git!.commit}:private/notes/a.md`])).toBe('Version B.\n');
    // Recorded with its new ctime, and trusted again.
    expect(scan()).toMatchObject({ modified: [], hashed: 0, unchanged: 1 });
    // `touch -r` puts the mtime back after an edit the same way.
    writeFileSync(join(vault, 'private/notes/a.md'), 'Version C.\n');
    expect(spawnSync('touch', ['-r', other, join(vault, 'private/notes/a.md')]).status).toBe(0);
    await pastRacyWindow();
    expect(scan()).toMatchObject({ modified: ['private/notes/a.md'], hashed: 1 });
  });

  it('files recorded before ctimes were kept (migration 009) are read once more, as touched, with no checkpoint; then trusted', async () => {
    put('private/notes/a.md', 'A.\n');
    put('private/notes/b.md', 'B.\n');
    old('private/notes/a.md');
    old('private/notes/b.md');
    await pastRacyWindow();
    expect(scan()).toMatchObject({ added: ['private/notes/a.md', 'private/notes/b.md'] });
    const before = commits();
    // What migration 009 leaves of a store recorded before it: rows without a ctime, no folder digest.
    const w = new Database(join(store, 'state.sqlite'));
    w.exec('UPDATE vault_files SET ctime_ns = NULL; UPDATE scan_folders SET digest = NULL;');
    w.close();
    expect(scan()).toMatchObject({ added: [], modified: [], deleted: [], hashed: 2, git: null });
    expect(db().prepare('SELECT count(*) FROM vault_files WHERE ctime_ns IS NULL').pluck().get()).toBe(0);
    expect(scan()).toMatchObject({ hashed: 0, unchanged: 2, git: null });
    expect(commits()).toBe(before);
  });

  // The restore below puts back the very inode, size and mtime recorded before a publication replaced the file:
  // only records (and folder digests) that followed the publication (or another writer) can tell that the file changed.
  async function publishThenRestore(publisher: () => KnowledgeService | ((path: string) => void)) {
    const s = service();
    const first = await s.publish({ partition: 'private', actor: 'operator', records: ['---\nkind: page\nid: rec-kept\ntitle: Kept\n---\nVersion one.\n'], evidence: [] });
    const path = first.records[0]!.path as string;
    await pastRacyWindow();
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 1, added: [], modified: [] }); // its own install, racy: read once more
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, added: [] });
    linkSync(join(vault, path), join(sb.dir, 'kept-inode'));
    const writer = publisher();
    if (typeof writer === 'function') writer(path);
    else await writer.publish({ partition: 'private', actor: 'operator', records: ['---\nkind: page\nid: rec-kept\nrevision: 1\ntitle: Kept\n---\nVersion two, longer.\n'], evidence: [] });
    renameSync(join(sb.dir, 'kept-inode'), join(vault, path)); // version one again, same inode and mtime
    // The rename set the file's ctime to now: a scan within the racy window would record it as racy and the
    // scan after it would read it once more (seen in CI: a second scan hashed 1 where 0 was asserted).
    await pastRacyWindow();
    return { s, path };
  }

  it('a publication by the same service between two scans', async () => {
    const { s, path } = await publishThenRestore(() => open[0]!);
    const r = await s.scan({ caller: operator });
    expect(r).toMatchObject({ modified: [path], hashed: 1 });
    expect(readFileSync(join(vault, path), 'utf8')).toContain('Version one.');
  });

  it('a publication through another connection between two scans of a long-running service', async () => {
    const { s, path } = await publishThenRestore(() => service());
    expect(await s.scan({ caller: operator })).toMatchObject({ modified: [path], hashed: 1 });
  });

  it('another process writing the store between two scans of a long-running service', async () => {
    const { s, path } = await publishThenRestore(() => (p: string) => {
      // Another process rewrites what is recorded for the file (as a second Knowledge build or a repair might).
      const child = spawnSync(process.execPath, ['-e', `
        const db = new (require('better-sqlite3'))(process.argv[1]);
        db.prepare('UPDATE vault_files SET size = size + 1 WHERE path = ?').run(process.argv[2]);`, join(store, 'state.sqlite'), p],
        { cwd: process.cwd(), encoding: 'utf8' });
      expect(child.status, child.stderr).toBe(0);
    });
    // The table no longer matches the file: it is read again (same bytes as recorded: no edit).
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 1, modified: [], git: null });
    expect(await s.scan({ caller: operator })).toMatchObject({ hashed: 0, git: null });
    expect(path).toMatch(/^private\//);
  });
});

describe('[SCAN-1] authority: an operator may scan all; an agent only its own partitions', () => {
  let svc: KnowledgeService | null = null;
  afterEach(() => {
    svc?.close();
    svc = null;
  });
  const open = () => (svc = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } }));
  const agent: Caller = { kind: 'agent', agentId: 'bot', session: 's1' };

  async function code(p: Promise<unknown>): Promise<string> {
    try {
      await p;
      return 'ok';
    } catch (err) {
      return err instanceof KnowledgeError ? err.code : String(err);
    }
  }

  it('an agent scans private and its own conversation, and is denied any other', async () => {
    put('private/p.md', record('p', 'P'));
    put('conversations/s1/c.md', record('c1', 'C1', '', 'x\n', 'conversation:s1'));
    put('conversations/s2/c.md', record('c2', 'C2', '', 'x\n', 'conversation:s2'));
    const s = open();
    expect(await code(s.scan({ caller: agent, partition: 'conversation:s2' }))).toBe('E_DENIED');
    expect(await code(s.scan({ caller: agent, partition: 'conversation:nope' }))).toBe('E_DENIED');
    expect(await code(s.scan({ caller: { ...agent, sandboxed: true } }))).toBe('E_DENIED');
    const mine = await s.scan({ caller: agent });
    expect(mine.partitions).toEqual(['conversation:s1', 'private']);
    expect(mine.added).toEqual(['conversations/s1/c.md', 'private/p.md']);
    const all = await s.scan({ caller: { kind: 'operator' } });
    expect(all.partitions).toEqual(['conversation:s1', 'conversation:s2', 'private']);
    expect(all.added).toEqual(['conversations/s2/c.md']);
    expect(all.baselined).toEqual(['conversation:s2']);
  });

  it('an agent\'s duplicate-id diagnostic names no file of a conversation it cannot read', async () => {
    put('private/dupe.md', record('x', 'X'));
    put('conversations/s1/dupe.md', record('x', 'X', '', 'x\n', 'conversation:s1'));
    put('conversations/s2/dupe.md', record('x', 'X', '', 'x\n', 'conversation:s2'));
    put('conversations/s2/secret-name.md', record('y', 'Y', '', 'x\n', 'conversation:s2'));
    put('conversations/s1/other.md', record('y', 'Y', '', 'x\n', 'conversation:s1'));
    const s = open();
    // The operator reads everything, and is told every claimant.
    const all = await s.scan({ caller: { kind: 'operator' } });
    expect(all.diagnostics.find((d) => d.path === 'private/dupe.md')!.reason).toMatch(/also claimed by conversations\/s1\/dupe\.md, conversations\/s2\/dupe\.md;/);
    const mine = await s.scan({ caller: agent, partition: 'conversation:s1' });
    const reasons = mine.diagnostics.map((d) => `${d.path}: ${d.reason}`);
    expect(reasons).toEqual([
      'conversations/s1/dupe.md: record id x is also claimed by private/dupe.md, a file you cannot read; lookup returns no record for it',
      'conversations/s1/other.md: record id y is also claimed by a file you cannot read; lookup returns no record for it',
    ]);
    expect(JSON.stringify(mine)).not.toContain('conversations/s2');
  });

  it('an agent\'s scan retries every waiting checkpoint but lists only those of partitions it may read', async () => {
    writeFileSync(join(sb.dir, 'o.md'), '---\nkind: page\ntitle: Other conversation\n---\nnot yours\n');
    writeFileSync(join(sb.dir, 'm.md'), '---\nkind: page\ntitle: Mine\n---\nyours\n');
    const theirs = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--partition', 'conversation:s2', 'o.md'], { env: NO_GIT }).stdout);
    const mine = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--partition', 'conversation:s1', 'm.md'], { env: NO_GIT }).stdout);
    expect([theirs.git.state, mine.git.state]).toEqual(['unavailable', 'unavailable']);
    const s = open();
    const r = await s.scan({ caller: agent, partition: 'conversation:s1' });
    expect(r.retried.map((x) => x.id)).toEqual([mine.publicationId]);
    // Both were committed, in order.
    expect(JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', theirs.publicationId]).stdout).git.state).toBe('committed');
  });

  it('the CLI (the operator) reports a missing partition, a bad id and a read-only store with stable codes', () => {
    put('conversations/not a session/x.md', 'x\n');
    const missing = cli(sb, ['scan', '--store', 'st', '--partition', 'conversation:nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^E_NOT_FOUND: /);
    const bad = cli(sb, ['scan', '--store', 'st', '--partition', 'elsewhere']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^E_VALIDATION: /);
    expect(cli(sb, ['scan', '--store', 'st', 'extra']).code).toBe(2);
    expect(codes(scan())).toEqual(['not-a-partition conversations/not a session']);
    expect(cli(sb, ['init', 'ro', '--read-only']).code).toBe(0);
    const ro = cli(sb, ['scan', '--store', 'ro']);
    expect(ro.code).toBe(1);
    expect(ro.stderr).toMatch(/^E_READ_ONLY: /);
  });

  it('one partition only: other partitions are neither walked nor committed', () => {
    put('private/p.md', record('p', 'P'));
    put('conversations/s1/c.md', record('c1', 'C1', '', 'x\n', 'conversation:s1'));
    const r = scan(['--partition', 'conversation:s1']);
    expect(r).toMatchObject({ partition: 'conversation:s1', partitions: ['conversation:s1'], added: ['conversations/s1/c.md'] });
    expect(tree()).toEqual(['conversations/s1/c.md']);
  });
});

describe('Done when: tried as a new user would', () => {
  it('fill by hand, baseline, edit/rename/delete with ordinary tools, one external commit, then nothing', () => {
    put('private/journal/2026-01-01.md', record('j1', 'New year'));
    put('private/journal/2026-01-02.md', record('j2', 'Second day'));
    put('private/people/ada.md', record('ada', 'Ada'));
    put('private/meta.yaml', 'owner: me\n');
    const base = scan();
    expect(base.baseline).toBe(true);
    expect(commits()).toBe(1);
    spawnSync('sh', ['-c', 'echo "Another line." >> private/journal/2026-01-02.md && mv private/people/ada.md private/people/ada-lovelace.md && rm private/meta.yaml'], { cwd: vault });
    const r = scan();
    expect(r).toMatchObject({
      modified: ['private/journal/2026-01-02.md'],
      renamed: [{ from: 'private/people/ada.md', to: 'private/people/ada-lovelace.md' }],
      deleted: ['private/meta.yaml'],
      added: [],
    });
    expect(commits()).toBe(2);
    expect(userGit(sb, vault, ['log', '-1', '--format=%(trailers:key=Knowledge-Actor,valueonly)']).trim()).toBe('external');
    expect(nameStatus('main')).toEqual(['D\tprivate/meta.yaml', 'M\tprivate/journal/2026-01-02.md', 'R100\tprivate/people/ada.md\tprivate/people/ada-lovelace.md']);
    expect(scan()).toMatchObject({ added: [], modified: [], deleted: [], renamed: [], git: null });
    expect(commits()).toBe(2);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
  });
});

/**
 * committedBlobs (what `knowledge verify` compares with each committed
 * batch's blob ids) gives, for every (commit, path), what git's own
 * `cat-file --batch-check` of `<commit>:<path>` gives — the way verify asked
 * before, one line a file — for a large folder, folders shared by commits,
 * lone files and every kind of entry that is not a file; and it reads a
 * folder once, not once a file.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { GitRunner } from '../git/runner.js';
import { vaultEnv } from '../git/inspect.js';
import { makeSandbox, ugit, writeFile, type GitSandbox } from '../git/test-sandbox.js';
import { blobKey, committedBlobs, treeEntries, type CommittedFile } from './committed-blobs.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});

const BIG = 1200;
const big = (i: number) => `big/f${String(i).padStart(4, '0')}.md`;

/** Commit the index as it is (objects may be missing), on top of `parent`. */
function commitIndex(s: GitSandbox, repo: string, message: string, parent?: string): string {
  const tree = ugit(s, repo, ['write-tree', '--missing-ok']).trim();
  return ugit(s, repo, ['commit-tree', tree, '-m', message, ...(parent ? ['-p', parent] : [])]).trim();
}

/** The old way: one `<commit>:<path>` line a file, one cat-file; the same reading of its answers. */
function reference(s: GitSandbox, repo: string, files: CommittedFile[]): Map<string, string | null> {
  const out = ugit(s, repo, ['cat-file', '--batch-check=%(objectname) %(objecttype)'], files.map((f) => blobKey(f.commit, f.path)).join('\n') + '\n').split('\n');
  return new Map(files.map((f, i) => {
    const m = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) (\w+)$/.exec(out[i] ?? '');
    return [blobKey(f.commit, f.path), m && m[2] === 'blob' ? m[1]! : null];
  }));
}

function countingRunner(): { r: GitRunner; calls: string[][] } {
  const r = new GitRunner();
  const calls: string[][] = [];
  const run = r.run.bind(r);
  r.run = (args, opts) => {
    calls.push(args);
    return run(args, opts);
  };
  return { r, calls };
}

describe('committedBlobs', () => {
  it('answers as `cat-file <commit>:<path>` does, reading each folder once', async () => {
    sb = makeSandbox();
    const s = sb;
    const repo = join(s.dir, 'vault');
    writeFile(repo, 'README.md', 'hello\n');
    ugit(s, repo, ['init', '-q', '-b', 'main']);
    for (let i = 0; i < BIG; i++) writeFile(repo, big(i), `# ${i}\n`);
    const plain: Record<string, string> = {
      'top.md': 'top\n',
      'lone/only.md': 'only\n',
      'deep/a/b/c.md': 'c\n',
      'deep/a/b/d.md': 'd\n',
      'sp ace/x y.md': 'xy\n',
      'sp ace/z.md': 'z\n',
      'uni/é.md': 'e acute\n',
      'uni/ü.md': 'u umlaut\n',
      'colon:dir/a:b.md': 'ab\n',
      'colon:dir/c.md': 'c\n',
      'cr\r/a.md': 'cr folder a\n',
      'cr\r/b.md': 'cr folder b\n',
      'crname/a.md': 'plain a\n',
      'crname/a.md\r': 'a with a carriage return\n',
      'crlone/x.md\r': 'lone, with a carriage return\n',
      'tree-at-file/x.md/inner': 'inner\n',
      'tree-at-file/y.md': 'y\n',
      'file-as-dir': 'a file\n',
    };
    for (const [p, text] of Object.entries(plain)) writeFile(repo, p, text);
    ugit(s, repo, ['add', '-A']);
    ugit(s, repo, ['update-index', '--add', '--cacheinfo', `120000,${ugit(s, repo, ['hash-object', '-w', '--stdin'], 'target').trim()},links/l1`]);
    ugit(s, repo, ['update-index', '--add', '--cacheinfo', `120000,${ugit(s, repo, ['hash-object', '-w', '--stdin'], 'elsewhere').trim()},links/l2`]);
    const blob = ugit(s, repo, ['hash-object', '-w', '--stdin'], 'kept\n').trim();
    ugit(s, repo, ['update-index', '--add', '--index-info'], [
      `160000 ${'1'.repeat(40)}\tsub/mod`, // a submodule (its commit is not in this repository)
      `100644 ${blob}\tsub/file.md`,
      `100644 ${'2'.repeat(40)}\tgone/missing.md`, // an entry whose blob is missing
      `100644 ${blob}\tgone/ok.md`,
    ].join('\n') + '\n');
    // A name that is not UTF-8.
    ugit(s, repo, ['update-index', '-z', '--add', '--index-info'], Buffer.concat([Buffer.from(`100644 ${blob}\tbytes/x`), Buffer.from([0xff]), Buffer.from('.md\0'), Buffer.from(`100644 ${blob}\tbytes/y.md\0`)]));
    const c1 = commitIndex(s, repo, 'one');
    // Change and delete some of the big folder, then a second commit with the very same tree (a folder shared by commits).
    for (let i = 0; i < 100; i++) writeFile(repo, big(i), `# ${i} changed\n`);
    ugit(s, repo, ['add', ...Array.from({ length: 100 }, (_, i) => big(i))]);
    ugit(s, repo, ['rm', '-q', '--cached', ...Array.from({ length: 100 }, (_, i) => big(100 + i))]);
    const c2 = commitIndex(s, repo, 'two', c1);
    const c3 = commitIndex(s, repo, 'three', c2);

    const paths = [
      ...Array.from({ length: BIG }, (_, i) => big(i)),
      'big/nope.md', 'README.md', 'nothing-here.md', ...Object.keys(plain),
      'links/l1', 'links/l2', 'sub/mod', 'sub/file.md', 'sub/mod/x', 'gone/missing.md', 'gone/ok.md',
      'bytes/x\uFFFD.md', 'bytes/y.md', 'tree-at-file/x.md', 'file-as-dir/a.md', 'file-as-dir/b.md',
      'nofolder/a.md', 'nofolder/b.md', 'uni/e\u0301.md', 'deep/a', 'deep/a/b', 'crlone/x.md', 'crname/b.md',
    ];
    const files: CommittedFile[] = [c1, c2, c3].flatMap((commit) => paths.map((path) => ({ commit, path })));
    // Read whole: every folder, those with two files or more, and (the default) only those with many.
    for (const readFolderFrom of [1, 2, undefined]) {
      const { r, calls } = countingRunner();
      const got = await committedBlobs(r, repo, vaultEnv(repo), files, { readFolderFrom });
      if (!got.ok) throw new Error(`${got.what}: ${got.stderr}`);
      // Three cat-files for 3 x 1,200 files of one folder (each distinct folder once).
      expect(calls.map((a) => a[0])).toEqual(['cat-file', 'cat-file', 'cat-file']);
      expect(calls[1]).toEqual(['cat-file', '--batch']);

      const want = reference(s, repo, files);
      // The old lines lost a name's last carriage return: `crname/a.md<CR>` was read as `crname/a.md`.
      const fixed = files.filter((f) => f.path.endsWith('\r'));
      expect(fixed.length).toBe(6);
      for (const f of fixed) {
        const k = blobKey(f.commit, f.path);
        expect(got.blobs.get(k)).toBe(ugit(s, repo, ['rev-parse', k]).trim());
        want.set(k, got.blobs.get(k)!);
      }
      expect(got.blobs.size).toBe(want.size);
      for (const [k, v] of want) expect(got.blobs.get(k), k).toBe(v);

      // Sanity: both kinds of answer are there.
      expect(got.blobs.get(blobKey(c1, big(0)))).not.toBe(got.blobs.get(blobKey(c2, big(0))));
      expect(got.blobs.get(blobKey(c2, big(150)))).toBeNull();
      expect(got.blobs.get(blobKey(c3, big(BIG - 1)))).toMatch(/^[0-9a-f]{40}$/);
      for (const p of ['links/l1', 'sub/file.md', 'gone/ok.md', 'bytes/y.md', 'uni/é.md', 'cr\r/a.md']) expect(got.blobs.get(blobKey(c1, p)), p).toMatch(/^[0-9a-f]{40}$/);
      for (const p of ['sub/mod', 'gone/missing.md', 'bytes/x\uFFFD.md', 'tree-at-file/x.md', 'file-as-dir/a.md', 'uni/e\u0301.md']) expect(got.blobs.get(blobKey(c1, p)), p).toBeNull();
    }
  });

  it('lone files are asked for one line each, and nothing at all asks nothing', async () => {
    sb = makeSandbox();
    const s = sb;
    const repo = join(s.dir, 'vault');
    for (let i = 0; i < 20; i++) writeFile(repo, `s/${i}/a.md`, `${i}\n`);
    ugit(s, repo, ['init', '-q', '-b', 'main']);
    ugit(s, repo, ['add', '-A']);
    ugit(s, repo, ['commit', '-q', '-m', 'x']);
    const head = ugit(s, repo, ['rev-parse', 'HEAD']).trim();
    const files = Array.from({ length: 20 }, (_, i) => ({ commit: head, path: `s/${i}/a.md` }));
    const { r, calls } = countingRunner();
    const got = await committedBlobs(r, repo, vaultEnv(repo), files);
    if (!got.ok) throw new Error(got.stderr);
    expect(calls.length).toBe(1);
    expect(got.blobs).toEqual(reference(s, repo, files));
    const none = await committedBlobs(r, repo, vaultEnv(repo), []);
    expect(none.ok && none.blobs.size).toBe(0);
    expect(calls.length).toBe(1);
    // A folder with as many files as readFolderFrom (here one) is read whole: the same answers, in three cat-files.
    const whole = countingRunner();
    const read = await committedBlobs(whole.r, repo, vaultEnv(repo), files, { readFolderFrom: 1 });
    if (!read.ok) throw new Error(read.stderr);
    expect(whole.calls.map((a) => a[1])).toEqual(['--batch-check=%(objectname) %(objecttype)', '--batch', '--batch-check=%(objectname) %(objecttype)']);
    expect(read.blobs).toEqual(got.blobs);
  });

  it('a SHA-256 repository: folders read whole give its 64-digit ids', async () => {
    sb = makeSandbox();
    const s = sb;
    const repo = join(s.dir, 'vault');
    for (let i = 0; i < 3; i++) writeFile(repo, `d/${i}.md`, `${i}\n`);
    writeFile(repo, 'd/sub/x.md', 'x\n');
    ugit(s, repo, ['init', '-q', '-b', 'main', '--object-format=sha256']);
    ugit(s, repo, ['add', '-A']);
    ugit(s, repo, ['commit', '-q', '-m', 'x']);
    const head = ugit(s, repo, ['rev-parse', 'HEAD']).trim();
    const files = [...Array.from({ length: 3 }, (_, i) => ({ commit: head, path: `d/${i}.md` })), { commit: head, path: 'd/sub' }, { commit: head, path: 'd/nope.md' }];
    const got = await committedBlobs(new GitRunner(), repo, vaultEnv(repo), files, { readFolderFrom: 1 });
    if (!got.ok) throw new Error(got.stderr);
    expect(got.blobs.get(blobKey(head, 'd/0.md'))).toMatch(/^[0-9a-f]{64}$/);
    expect(got.blobs).toEqual(reference(s, repo, files));
  });

  it('a folder that names one file twice (a malformed tree) answers with the first entry, as git does', async () => {
    sb = makeSandbox();
    const s = sb;
    const repo = join(s.dir, 'vault');
    ugit(s, s.dir, ['init', '-q', '-b', 'main', 'vault']);
    const one = ugit(s, repo, ['hash-object', '-w', '--stdin'], 'one\n').trim();
    const two = ugit(s, repo, ['hash-object', '-w', '--stdin'], 'two\n').trim();
    const entry = (mode: string, name: string, id: string) => Buffer.concat([Buffer.from(`${mode} ${name}\0`), Buffer.from(id, 'hex')]);
    const folder = ugit(s, repo, ['hash-object', '-t', 'tree', '-w', '--literally', '--stdin'], Buffer.concat([entry('100644', 'a.md', one), entry('100644', 'a.md', two)])).trim();
    const top = ugit(s, repo, ['hash-object', '-t', 'tree', '-w', '--literally', '--stdin'], entry('40000', 'd', folder)).trim();
    const commit = ugit(s, repo, ['commit-tree', top, '-m', 'twice']).trim();
    const files = [{ commit, path: 'd/a.md' }];
    const got = await committedBlobs(new GitRunner(), repo, vaultEnv(repo), files, { readFolderFrom: 1 });
    if (!got.ok) throw new Error(got.stderr);
    expect(got.blobs.get(blobKey(commit, 'd/a.md'))).toBe(one);
    expect(got.blobs).toEqual(reference(s, repo, files));
  });

  it('a cat-file that fails at any of its three steps makes the answer unreadable, never files gone', async () => {
    sb = makeSandbox();
    const s = sb;
    const repo = join(s.dir, 'vault');
    for (let i = 0; i < 3; i++) writeFile(repo, `d/${i}.md`, `${i}\n`);
    ugit(s, repo, ['init', '-q', '-b', 'main']);
    ugit(s, repo, ['add', '-A']);
    ugit(s, repo, ['commit', '-q', '-m', 'x']);
    const head = ugit(s, repo, ['rev-parse', 'HEAD']).trim();
    const files = Array.from({ length: 3 }, (_, i) => ({ commit: head, path: `d/${i}.md` }));
    const steps = ['reading committed files', 'reading committed folders', 'reading committed files'];
    for (let failing = 0; failing < steps.length; failing++) {
      const r = new GitRunner();
      const run = r.run.bind(r);
      let n = 0;
      r.run = (args, opts) => (n++ === failing
        ? Promise.resolve({ code: 128, stdout: Buffer.alloc(0), stderr: 'fatal: simulated read failure', timedOut: false })
        : run(args, opts));
      const got = await committedBlobs(r, repo, vaultEnv(repo), files, { readFolderFrom: 1 });
      expect(got, `step ${failing + 1}`).toEqual({ ok: false, what: steps[failing], stderr: 'fatal: simulated read failure', timedOut: false });
    }
  });

  it('treeEntries reads names as bytes and ids of either hash length, and refuses a cut tree', () => {
    const sha1 = Buffer.concat([Buffer.from('100644 a b\0'), Buffer.alloc(20, 0xab), Buffer.from('40000 d\xff\0', 'latin1'), Buffer.alloc(20, 1)]);
    expect(treeEntries(sha1, 20)).toEqual([{ name: 'a b', oidAt: 11 }, { name: 'd\xff', oidAt: 40 }]);
    expect(sha1.toString('hex', 40, 60)).toBe('01'.repeat(20));
    const sha256 = Buffer.concat([Buffer.from('100755 x\0'), Buffer.alloc(32, 0xcd)]);
    expect(treeEntries(sha256, 32)).toEqual([{ name: 'x', oidAt: 9 }]);
    expect(() => treeEntries(sha1.subarray(0, sha1.length - 1), 20)).toThrow(/malformed/);
  });
});

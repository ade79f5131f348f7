/**
 * What `<commit>:<path>` names in the repository, for many (commit, path)
 * pairs at once: the blob id there, or null when the commit holds no file at
 * that path (no such path, a folder, a submodule). `knowledge verify` compares
 * it with the blob id each committed batch queued [GIT-7].
 *
 * One `cat-file --batch-check` of `<commit>:<path>` per file asks git to find
 * the path anew each time: git reads the path's folder (tree object) again and
 * searches it from its first entry, so N files of one folder cost N x N (a
 * baseline scan's files in one folder: 2.8 s of git CPU at 5,000 files, ~70 s
 * at 20,000, past the runner's 30 s timeout). Here the files are grouped by
 * commit and folder: a folder that holds many of them is read once
 * (`cat-file --batch`) and its entries matched in one pass; files of other
 * folders are asked for one by one as before. The answer is git's own: the entry's object id, and a blob only when the object
 * database says so (`--batch-check` of those ids), as `<commit>:<path>` gives.
 * One difference, a fix: a name that ends in a carriage return is found (the
 * old per-file line lost that character to cat-file's line reading).
 */
import type { GitRunner } from '../git/runner.js';

export interface CommittedFile {
  commit: string;
  path: string;
}

export type CommittedBlobs =
  | { ok: true; blobs: Map<string, string | null> }
  | { ok: false; what: string; stderr: string; timedOut: boolean };

/** The key of one file in the answer. */
export const blobKey = (commit: string, path: string): string => `${commit}:${path}`;

const OBJECT_LINE = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) (\w+)$/;

/**
 * Files of one (commit, folder) from which the folder is read whole. Below it, git's own search per file (of a
 * folder S entries long: ~S/2 entries each, in C) costs less than sending the folder and matching it here (S
 * entries, in Node): measured on 20,000 records published 200 at a time (shards holding 2-5 of a commit's files),
 * reading from 2 files on was ~20% slower than asking per file. Per (commit, folder) the files asked for one by one
 * cost at most this many times the folder's length, so the total stays linear.
 */
const READ_FOLDER_FROM = 16;

interface Folder {
  commit: string;
  dir: string;
  /** Full paths and their last component (as latin1 of the UTF-8 bytes: git compares bytes). */
  files: Array<{ path: string; name: string }>;
}

export async function committedBlobs(
  runner: GitRunner,
  vault: string,
  env: Record<string, string>,
  files: CommittedFile[],
  opts: { readFolderFrom?: number } = {},
): Promise<CommittedBlobs> {
  const readFolderFrom = opts.readFolderFrom ?? READ_FOLDER_FROM;
  const blobs = new Map<string, string | null>();
  if (files.length === 0) return { ok: true, blobs };

  const folders = new Map<string, Folder>();
  for (const f of files) {
    if (f.path.includes('\n')) throw new Error('committedBlobs: a path with a line break cannot be named to cat-file');
    const slash = f.path.lastIndexOf('/');
    const dir = slash < 0 ? '' : f.path.slice(0, slash);
    const key = blobKey(f.commit, dir);
    let g = folders.get(key);
    if (!g) folders.set(key, (g = { commit: f.commit, dir, files: [] }));
    g.files.push({ path: f.path, name: Buffer.from(f.path.slice(slash + 1), 'utf8').toString('latin1') });
  }

  // 1. One --batch-check: each other file's `<commit>:<path>`, each folder's `<commit>:<dir>/` (`<commit>:` the top).
  //    cat-file drops a carriage return that ends an input line: `<commit>:a<CR>` would name `a`. So a folder is
  //    named with its slash, and a file whose name ends in one is always found in its folder.
  const asked: Array<{ file: { path: string; commit: string } } | { folder: Folder }> = [];
  for (const g of folders.values()) {
    if (g.files.length >= readFolderFrom || g.files.some((f) => f.path.endsWith('\r'))) asked.push({ folder: g });
    else for (const f of g.files) asked.push({ file: { path: f.path, commit: g.commit } });
  }
  const first = await runner.run(['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    cwd: vault,
    env,
    input: asked.map((a) => ('file' in a ? blobKey(a.file.commit, a.file.path) : blobKey(a.folder.commit, a.folder.dir === '' ? '' : `${a.folder.dir}/`))).join('\n') + '\n',
  });
  if (first.code !== 0) return { ok: false, what: 'reading committed files', stderr: first.stderr, timedOut: first.timedOut };
  const lines = first.stdout.toString('utf8').split('\n');
  /** Tree id -> the folders (of any commit) it is. */
  const trees = new Map<string, Folder[]>();
  asked.forEach((a, i) => {
    const m = OBJECT_LINE.exec(lines[i] ?? '');
    if ('file' in a) {
      // Only a blob is a file: a folder (tree) or a submodule (commit) now at the path means the file is gone.
      blobs.set(blobKey(a.file.commit, a.file.path), m && m[2] === 'blob' ? m[1]! : null);
    } else if (m && m[2] === 'tree') {
      const same = trees.get(m[1]!);
      if (same) same.push(a.folder);
      else trees.set(m[1]!, [a.folder]);
    } else {
      // No folder there (or a file, a submodule): none of its files is in the commit.
      for (const f of a.folder.files) blobs.set(blobKey(a.folder.commit, f.path), null);
    }
  });
  if (trees.size === 0) return { ok: true, blobs };

  // 2. Each distinct folder read once, its entries matched against the names wanted from it.
  const ids = [...trees.keys()];
  const read = await runner.run(['cat-file', '--batch'], { cwd: vault, env, input: ids.join('\n') + '\n' });
  if (read.code !== 0) return { ok: false, what: 'reading committed folders', stderr: read.stderr, timedOut: read.timedOut };
  /** Blob key -> the object id its entry names (its type is asked next). */
  const entries = new Map<string, string>();
  const out = read.stdout;
  let at = 0;
  for (const id of ids) {
    const eol = out.indexOf(0x0a, at);
    if (eol < 0) return { ok: false, what: 'reading committed folders', stderr: 'cat-file --batch: output cut short', timedOut: false };
    const header = out.toString('latin1', at, eol).split(' ');
    at = eol + 1;
    const folders = trees.get(id)!;
    if (header[0] !== id || header[1] !== 'tree' || header.length !== 3) {
      if (header[1] !== 'missing' || header.length !== 2) {
        return { ok: false, what: 'reading committed folders', stderr: `cat-file --batch: unexpected answer for ${id}`, timedOut: false };
      }
      for (const g of folders) for (const f of g.files) blobs.set(blobKey(g.commit, f.path), null);
      continue;
    }
    const size = Number(header[2]);
    const wanted = new Map<string, Array<{ commit: string; path: string }>>();
    for (const g of folders) {
      for (const f of g.files) {
        const list = wanted.get(f.name);
        if (list) list.push({ commit: g.commit, path: f.path });
        else wanted.set(f.name, [{ commit: g.commit, path: f.path }]);
      }
    }
    const tree = out.subarray(at, at + size);
    let list: Array<{ name: string; oidAt: number }>;
    try {
      list = treeEntries(tree, hashBytes(id));
    } catch {
      return { ok: false, what: 'reading committed folders', stderr: `fatal: corrupt tree object ${id}`, timedOut: false };
    }
    for (const e of list) {
      const want = wanted.get(e.name);
      if (!want) continue;
      // The first entry of that name, as git's search of a (sorted) tree finds it.
      wanted.delete(e.name);
      const oid = tree.toString('hex', e.oidAt, e.oidAt + hashBytes(id));
      for (const w of want) entries.set(blobKey(w.commit, w.path), oid);
    }
    for (const want of wanted.values()) for (const w of want) blobs.set(blobKey(w.commit, w.path), null);
    at += size + 1; // the contents, then a line feed
  }

  // 3. The type of each object an entry names: only a blob (not a folder, a submodule's commit, a missing object) is a file.
  const oids = [...new Set(entries.values())];
  const types = new Map<string, string>();
  if (oids.length > 0) {
    const check = await runner.run(['cat-file', '--batch-check=%(objectname) %(objecttype)'], { cwd: vault, env, input: oids.join('\n') + '\n' });
    if (check.code !== 0) return { ok: false, what: 'reading committed files', stderr: check.stderr, timedOut: check.timedOut };
    const answers = check.stdout.toString('utf8').split('\n');
    oids.forEach((oid, i) => {
      const m = OBJECT_LINE.exec(answers[i] ?? '');
      if (m && m[1] === oid) types.set(oid, m[2]!);
    });
  }
  for (const [key, oid] of entries) blobs.set(key, types.get(oid) === 'blob' ? oid : null);
  return { ok: true, blobs };
}

const hashBytes = (hexId: string): number => hexId.length / 2;

/**
 * The entries of a raw tree object: `<mode> <name>\0<id>` one after another,
 * the id `hashBytes` raw bytes (at `oidAt`). Names as latin1 (one character a
 * byte). Throws on a malformed tree.
 */
export function treeEntries(tree: Buffer, hashBytes: number): Array<{ name: string; oidAt: number }> {
  const list: Array<{ name: string; oidAt: number }> = [];
  let at = 0;
  while (at < tree.length) {
    const space = tree.indexOf(0x20, at);
    const nul = space < 0 ? -1 : tree.indexOf(0, space + 1);
    if (nul < 0 || nul + 1 + hashBytes > tree.length) throw new Error('malformed tree object');
    list.push({ name: tree.toString('latin1', space + 1, nul), oidAt: nul + 1 });
    at = nul + 1 + hashBytes;
  }
  return list;
}

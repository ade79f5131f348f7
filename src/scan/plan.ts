/**
 * The pure half of a scan (STYLE habit 2): what Knowledge recorded plus what
 * the walk observed in, a classification out. No I/O, table-tested.
 *
 * Classification is by path first: a path that existed before and exists
 * now is an edit, however the editor saved it (rename over the file, delete
 * then recreate, a new inode) [SCAN-1]. Only paths that appeared and paths
 * that disappeared are paired into renames: first by identical content
 * (this covers moves across folders and case-only renames), then, for
 * records, by the record id their last and new versions claim (a rename
 * together with an edit).
 */
import { partitionOfPath } from '../store/layout.js';
import type { HashedFile, MissingFile, Rename, ScanPlan } from './types.js';
import type { KnownEntry } from './known.js';

/**
 * [SCAN-4] Same size, mtime, ctime and inode as recorded, and not racy:
 * unchanged without reading it. `st` is a number `lstat` (known.ts explains
 * the times). The ctime catches an edit that puts the old mtime back.
 */
export function isUnchanged(known: KnownEntry | undefined, st: { size: number; mtimeMs: number; ctimeMs: number; ino: number }): boolean {
  return known !== undefined && !known.racy && known.size === st.size && known.mtimeMs === st.mtimeMs && known.ctimeMs === st.ctimeMs && known.ino === st.ino;
}

/**
 * Whether a fingerprint taken now must not be trusted next time: the file's
 * mtime or ctime is so close to the moment of the scan that a same-size edit
 * in the same clock tick would keep them. Filesystems with whole-second
 * timestamps get a wider window. `nowNs` is the wall clock when the walk
 * started.
 */
export function isRacy(nowNs: bigint, mtimeNs: string, ctimeNs: string): boolean {
  return isRecent(BigInt(mtimeNs), nowNs) || isRecent(BigInt(ctimeNs), nowNs);
}

function isRecent(t: bigint, nowNs: bigint): boolean {
  const coarse = t % 1_000_000_000n === 0n;
  const window = coarse ? 2_000_000_000n : 100_000_000n;
  return t >= nowNs - window;
}

function baseName(p: string): string {
  return p.slice(p.lastIndexOf('/') + 1).toLowerCase();
}

function dirName(p: string): string {
  return p.slice(0, Math.max(0, p.lastIndexOf('/')));
}

const byPath = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function planScan(hashed: readonly HashedFile[], missing: readonly MissingFile[]): ScanPlan {
  const modified: string[] = [];
  const touched: string[] = [];
  const appeared: HashedFile[] = [];
  for (const h of hashed) {
    if (h.knownSha256 === null) appeared.push(h);
    else if (h.knownSha256 === h.sha256 && h.execChanged !== true) touched.push(h.path);
    else modified.push(h.path);
  }
  appeared.sort((a, b) => byPath(a.path, b.path));
  const gone = [...missing].sort((a, b) => byPath(a.path, b.path));

  const renamed: Rename[] = [];
  const pairedNew = new Set<string>();
  const pairedOld = new Set<string>();

  // 1. Identical content. Pairs of the same file name first, then of the same folder, then any: each preference
  // over every new file before the next, so a file moved under its own name is never taken by another new file of
  // the same bytes that happens to sort first (A/x.md moved to x.md while A.md gets the same bytes).
  const goneBySha = new Map<string, MissingFile[]>();
  for (const g of gone) {
    const list = goneBySha.get(g.sha256);
    if (list) list.push(g);
    else goneBySha.set(g.sha256, [g]);
  }
  const preferences: Array<(g: MissingFile, a: HashedFile) => boolean> = [
    (g, a) => baseName(g.path) === baseName(a.path),
    (g, a) => dirName(g.path) === dirName(a.path),
    () => true,
  ];
  for (const prefer of preferences) {
    for (const a of appeared) {
      if (pairedNew.has(a.path)) continue;
      const pick = goneBySha.get(a.sha256)?.find((g) => !pairedOld.has(g.path) && prefer(g, a));
      if (!pick) continue;
      pairedOld.add(pick.path);
      pairedNew.add(a.path);
      renamed.push({ from: pick.path, to: a.path });
    }
  }

  // 2. The same record id, when exactly one gone file and one new file claim it.
  const count = (ids: Array<string | null>) => {
    const m = new Map<string, number>();
    for (const id of ids) if (id !== null) m.set(id, (m.get(id) ?? 0) + 1);
    return m;
  };
  const restNew = appeared.filter((a) => !pairedNew.has(a.path));
  const restOld = gone.filter((g) => !pairedOld.has(g.path));
  const newIds = count(restNew.map((a) => a.recordId));
  const oldIds = count(restOld.map((g) => g.recordId));
  for (const a of restNew) {
    if (a.recordId === null || newIds.get(a.recordId) !== 1 || oldIds.get(a.recordId) !== 1) continue;
    const g = restOld.find((x) => x.recordId === a.recordId)!;
    pairedOld.add(g.path);
    pairedNew.add(a.path);
    renamed.push(g.sha256 === a.sha256 ? { from: g.path, to: a.path } : { from: g.path, to: a.path, edited: true });
  }

  renamed.sort((a, b) => byPath(a.to, b.to));
  return {
    added: appeared.filter((a) => !pairedNew.has(a.path)).map((a) => a.path),
    modified: modified.sort(byPath),
    deleted: gone.filter((g) => !pairedOld.has(g.path)).map((g) => g.path),
    renamed,
    touched: touched.sort(byPath),
  };
}

/** Exactly the changes the scan's checkpoint commits: new bytes for added, modified and renamed-to; deletions for the rest. */
export function committedPaths(plan: ScanPlan): { write: string[]; remove: string[] } {
  return {
    write: [...plan.added, ...plan.modified, ...plan.renamed.map((r) => r.to)].sort(byPath),
    remove: [...plan.deleted, ...plan.renamed.map((r) => r.from)].sort(byPath),
  };
}

/** How many files the checkpoint writes: `committedPaths(plan).write.length`, without building the list. */
export function writeCount(plan: ScanPlan): number {
  return plan.added.length + plan.modified.length + plan.renamed.length;
}

export function isEmptyPlan(plan: ScanPlan): boolean {
  return plan.added.length + plan.modified.length + plan.deleted.length + plan.renamed.length === 0;
}

const CHANGES = ['added', 'modified', 'renamed', 'deleted'] as const;
const COUNT = `\\d+ (?:${[...CHANGES, 'adopted'].join('|')})`;
/** subjectFor's shape, read back: its lead words, the partitions it names, its counts. */
const SUBJECT_RE = new RegExp(`^(Baseline of|External edits in) (.+?): (${COUNT}(?:, ${COUNT})*)$`);

/**
 * The checkpoint's commit subject: a baseline, or the counts of outside edits per partition; `adopted`: the
 * descriptors of the sources found on disk whose files the checkpoint carries (scan/adopt.ts), counted last.
 */
export function subjectFor(plan: ScanPlan, baselined: readonly string[], adopted: readonly string[] = []): string {
  const parts: string[] = [];
  for (const change of CHANGES) if (plan[change].length) parts.push(`${plan[change].length} ${change}`);
  if (adopted.length > 0) parts.push(`${adopted.length} adopted`);
  const touched = new Set<string>();
  for (const p of [...plan.added, ...plan.modified, ...plan.deleted, ...plan.renamed.flatMap((r) => [r.from, r.to]), ...adopted]) {
    touched.add(partitionOfPath(p) ?? 'vault');
  }
  const where = [...touched].sort().join(', ');
  if (baselined.length > 0 && [...touched].every((p) => baselined.includes(p))) return `Baseline of ${where}: ${parts.join(', ')}`;
  return `External edits in ${where}: ${parts.join(', ')}`;
}

/**
 * A scan's commit subject (subjectFor) as a caller who may not read every
 * partition it names sees it: only those it may read, without counts, which
 * would count the others' files too [SURF-3]. Other subjects are left as they are.
 */
export function subjectForReader(subject: string, mayReadPartition: (partition: string) => boolean): string {
  const m = SUBJECT_RE.exec(subject);
  if (!m) return subject;
  const named = m[2]!.split(', ');
  if (named.every(mayReadPartition)) return subject;
  const shown = named.filter(mayReadPartition);
  return `${m[1]} ${[...shown, shown.length > 0 ? 'partitions you cannot read' : 'a partition you cannot read'].join(' and ')}`;
}

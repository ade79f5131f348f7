/**
 * Sources a scan finds on disk that the store does not know [SCAN-1, REC-3]:
 * a vault that came without its state — a `git clone` of it adopted by
 * `knowledge init`, an older state.sqlite restored — holds retained originals
 * and their descriptors (`<partition>/evidence/<hh>/<sourceId>.yaml`) with no
 * `sources` row, so every citation of them is an invalid reference and a
 * publication of the same bytes is refused (evidence/source.ts
 * refuseOccupiedSourcePaths).
 *
 * A descriptor the store has no source for is adopted when it is a valid
 * descriptor of the source its name says (its source id, its sha256) and the
 * retained original it names, beside it, holds exactly those bytes: hashed
 * here, once, never taken on the descriptor's word. It becomes the row a
 * publication would have made (created when the descriptor says it was
 * retained, the descriptor's bytes kept), and the partition's references are
 * re-checked. Otherwise the descriptor gets an `unadopted-source` diagnostic
 * (the scan goes on), looked at again by every later scan while it stands,
 * so an original put back is adopted then: that costs a stat (and a hash,
 * when the size matches) per standing diagnostic, nothing for others.
 *
 * Only descriptors a scan read (new, changed, or racy: never an unchanged
 * file) are candidates, and a source the store knows is skipped by one
 * primary-key lookup, so a normal rescan does no adoption work.
 */
import { lstatSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { DB } from '../store/db.js';
import type { Store } from '../store/store.js';
import { installedUploads } from '../attach/partial.js';
import { partitionOfPath, type PartitionId } from '../store/layout.js';
import { vaultEntry } from '../fsutil.js';
import { yaml } from '../yaml-lazy.js';
import { EXCLUDED_GITIGNORE, SOURCE_FORMAT, ignoreBeside, sourceIdFor, sourceInserter, type NewSource } from '../evidence/source.js';
import { readStable } from './read.js';
import type { GitRunner } from '../git/runner.js';
import type { BatchChange } from '../git/types.js';
import { peekBranchTip } from '../git/inspect.js';
import { readTreeEntries } from '../git/index-sync.js';
import { blobId } from '../git/commit-stream.js';
import { HISTORY_SIZE_LIMIT, normalizeMediaType } from '../evidence/media.js';
import { isSafeRelativePath } from '../records/filename.js';
import type { ScanDiagnostic } from './types.js';
import { yieldToSignals } from '../interrupt.js';

/** `<partition>/evidence/<hh>/<sourceId>.yaml`, the shard being the source id's first two hex digits. */
const DESCRIPTOR_RE = /^(?:private|conversations\/[^/]+)\/evidence\/([0-9a-f]{2})\/(src-([0-9a-f]{24}))\.yaml$/;

export interface Adoption {
  /** Descriptors looked at: their standing `unadopted-source` diagnostics are replaced by `diagnostics`. */
  looked: string[];
  /** Sources to record. */
  sources: NewSource[];
  /** Descriptors not adopted, and why. */
  diagnostics: ScanDiagnostic[];
  /** By descriptor path: the branch tip that holds a source's files exactly, as the scan found it (placeAdoptions). */
  held: Map<string, string>;
  /** By descriptor path: the files of a source the branch does not hold, which the scan's checkpoint carries (placeAdoptions). */
  carry: Map<string, BatchChange[]>;
}

/** What one scan's checkpoint carries of adopted sources at most (their originals' bytes wait in memory until it is queued). */
export const CARRY_MAX_BYTES = 256 * 1024 * 1024;

/** Whether a vault-relative path is where a source's descriptor lies. */
export function isDescriptorPath(path: string): boolean {
  const m = DESCRIPTOR_RE.exec(path);
  return m !== null && m[3]!.startsWith(m[1]!);
}

/**
 * What this scan adopts: among the files it read, descriptors of sources
 * their partition does not know, and the descriptors whose `unadopted-source`
 * diagnostic stands in the partitions it walks (only those: a caller adopts
 * nothing in a partition it may not scan). Null when there is none.
 */
export async function planAdoptions(
  store: Store, scanId: string, partitions: readonly PartitionId[], read: ReadonlyArray<{ path: string }>,
  progress?: (done: number, of: number) => void,
): Promise<Adoption | null> {
  const db = store.db;
  const known = db.prepare('SELECT 1 FROM sources WHERE partition = ? AND source_id = ?').pluck();
  const candidates = new Set<string>();
  const consider = (path: string) => {
    if (!isDescriptorPath(path)) return;
    const p = partitionOfPath(path);
    if (p === null || !partitions.includes(p)) return;
    if (known.get(p, posix.basename(path, '.yaml')) === undefined) candidates.add(path);
  };
  for (const f of read) if (f.path.endsWith('.yaml')) consider(f.path);
  const standing = db.prepare("SELECT path FROM scan_diagnostics WHERE partition = ? AND code = 'unadopted-source'").pluck();
  const looked: string[] = [];
  for (const p of partitions) {
    for (const path of standing.all(p) as string[]) {
      looked.push(path);
      consider(path);
    }
  }
  if (candidates.size === 0 && looked.length === 0) return null;
  const out: Adoption = { looked: [...new Set([...looked, ...candidates])].sort(), sources: [], diagnostics: [], held: new Map(), carry: new Map() };
  const todo = [...candidates].sort();
  for (const [i, path] of todo.entries()) {
    // Each original is read whole (a clone's may be many, and large): the bar says how far, and Ctrl-C stops between two.
    progress?.(i, todo.length);
    if (i > 0) await yieldToSignals();
    let verdict: ReturnType<typeof adoptable>;
    try {
      verdict = adoptable(store, path, scanId);
    } catch (err) {
      // A permission or I/O error on the original: reported, never the end of the scan [SCAN-2].
      verdict = { reason: `its retained original cannot be read: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (verdict === null) continue;
    if ('reason' in verdict) {
      out.diagnostics.push({ path, code: 'unadopted-source', reason: `not adopted as a source of ${partitionOfPath(path)}: ${verdict.reason}` });
    } else {
      out.sources.push(verdict);
    }
  }
  return out;
}

/**
 * Knowledge's own unfinished work on a source: a publication journaled and not acknowledged that retains it
 * (its journal holds the descriptor), or an attachment of its bytes cut short after its install. Its files are
 * that request's, finished by recovery or `knowledge resume`, never taken over by a scan: adopted, the
 * publication could not record its new source, and the attachment would become one more attribution of a source
 * whose original no checkpoint carried [GIT-9]. Why, or null.
 */
function unfinishedWork(store: Store, path: string, sha256: string): string | null {
  const pub = store.db.prepare(
    "SELECT j.publication_id FROM journal_files j JOIN publications p USING (publication_id) WHERE j.path = ? AND p.status = 'journaled' ORDER BY p.created_at LIMIT 1",
  ).pluck().get(path) as string | undefined;
  if (pub !== undefined) return `publication ${pub} retains it and is not finished: \`knowledge resume ${pub}\` finishes it`;
  const att = installedUploads(store, partitionOfPath(path)!, sha256)[0];
  if (att !== undefined) return `attachment ${att} installed it and is not finished: \`knowledge resume ${att}\` finishes it`;
  return null;
}

/** The source a descriptor stands for, why it is not adopted, or null for a descriptor gone meanwhile. */
function adoptable(store: Store, path: string, scanId: string): NewSource | { reason: string } | null {
  const vault = store.paths.vault;
  const m = DESCRIPTOR_RE.exec(path)!;
  const sourceId = m[2]!;
  const dir = path.slice(0, -'.yaml'.length);
  const r = readStable(join(vault, path));
  if (r.kind === 'vanished') return null;
  if (r.kind !== 'ok') return { reason: `its descriptor cannot be read (${r.kind})` };
  let d: unknown;
  try {
    d = yaml().parse(r.bytes.toString('utf8'), { version: '1.2', schema: 'core', uniqueKeys: true, strict: true });
  } catch {
    return { reason: 'its descriptor is not valid YAML' };
  }
  const problem = descriptorProblem(d, sourceId, dir);
  if (problem !== null) return { reason: `its descriptor ${problem}; fix it or move it away, then scan again` };
  const desc = d as { sha256: string; size: number; media_type: string; retained_path: string; attribution: string; retained_at: string; in_history: boolean };
  const busy = unfinishedWork(store, path, desc.sha256);
  if (busy !== null) return { reason: busy };
  const rp = desc.retained_path;
  const moveAway = 'put the original back and scan again (or move the descriptor away)';
  const there = vaultEntry(vault, rp, { hash: false });
  if (there.kind === 'none') return { reason: `its retained original ${rp} is missing; ${moveAway}` };
  if (there.kind === 'other') return { reason: `its retained original: ${there.what}` };
  const st = lstatSync(join(vault, rp), { throwIfNoEntry: false });
  if (st === undefined) return { reason: `its retained original ${rp} is missing; ${moveAway}` };
  if (st.size !== desc.size) return { reason: `its retained original ${rp} holds ${st.size} bytes, not the ${desc.size} its descriptor names (edited or replaced?); ${moveAway}` };
  const hashed = vaultEntry(vault, rp);
  if (hashed.kind === 'none') return { reason: `its retained original ${rp} is missing; ${moveAway}` };
  if (hashed.kind === 'other') return { reason: `its retained original: ${hashed.what}` };
  if (hashed.sha256 !== desc.sha256) return { reason: `its retained original ${rp} does not hold the bytes its descriptor names (edited or replaced?); ${moveAway}` };
  return {
    partition: partitionOfPath(path)!,
    sourceId,
    sha256: desc.sha256,
    size: desc.size,
    mediaType: normalizeMediaType(desc.media_type)!, // lowercased, as a publication records it
    path: rp,
    descriptorPath: path,
    inHistory: desc.in_history,
    attributions: [{ attribution: desc.attribution, scanId, at: desc.retained_at }],
    createdAt: desc.retained_at,
    descriptor: r.bytes,
  };
}

/** What is wrong with a parsed descriptor of `sourceId` lying at `<dir>.yaml`, or null. */
function descriptorProblem(d: unknown, sourceId: string, dir: string): string | null {
  if (d === null || typeof d !== 'object' || Array.isArray(d)) return 'is not a mapping';
  const o = d as Record<string, unknown>;
  if (o.format !== SOURCE_FORMAT) return `has no "format: ${SOURCE_FORMAT}"`;
  if (o.source_id !== sourceId) return `names source ${JSON.stringify(o.source_id)}, not ${sourceId} (its file name)`;
  if (typeof o.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(o.sha256)) return 'has no valid sha256';
  if (sourceIdFor(o.sha256) !== sourceId) return `has a sha256 that is not the one of ${sourceId}`;
  if (typeof o.size !== 'number' || !Number.isSafeInteger(o.size) || o.size < 0) return 'has no valid size';
  if (typeof o.media_type !== 'string' || o.media_type === '') return 'has no media_type';
  // The checks a publication and an attachment apply to what they write [PUB-1]: a source adopted with a name or a
  // media type they refuse could never be given again (its original put back is refused as an unsafe path).
  try {
    normalizeMediaType(o.media_type);
  } catch {
    return `has a media_type, ${JSON.stringify(o.media_type)}, that is not of the form type/subtype`;
  }
  if (typeof o.retained_path !== 'string') return 'has no retained_path';
  const name = posix.basename(o.retained_path);
  if (posix.dirname(o.retained_path) !== dir || name.startsWith('.') || name === '') {
    return `names ${JSON.stringify(o.retained_path)} as its retained original, not a file in ${dir}/ beside it (copied from elsewhere?)`;
  }
  if (!isSafeRelativePath(o.retained_path)) return `names ${JSON.stringify(o.retained_path)} as its retained original, a name Knowledge never writes (control characters, a backslash, not NFC, or too long)`;
  if (typeof o.original_name !== 'string') return 'has no original_name';
  if (typeof o.attribution !== 'string') return 'has no attribution';
  if (typeof o.retained_at !== 'string' || Number.isNaN(Date.parse(o.retained_at))) return 'has no valid retained_at';
  if (typeof o.in_history !== 'boolean') return 'has no in_history';
  if (o.in_history && o.size >= HISTORY_SIZE_LIMIT) return 'says in_history for an original of 100 MiB or more, which stays out of history [GIT-9]';
  return null;
}

const EXCLUDED_IGNORE = Buffer.from(EXCLUDED_GITIGNORE, 'utf8');

/**
 * Where the files of each adopted source are in history [GIT-9], decided
 * before the scan's applying transaction. Its files: the descriptor, and the
 * original for one in history (for one kept out, the .gitignore beside it,
 * when it is there as a publication writes it). A source whose files the
 * branch tip holds exactly — a clone's, an older state's — is held by that
 * tip, the commit an attachment of the same bytes then names
 * (adopted_in_history); any other — copied there by hand, or the tip unknown
 * (no repository yet, git not answering) — has its files carried by the
 * scan's own checkpoint, so what a publication or an attachment would have
 * committed is committed, exactly.
 * The tip is read from the branch's ref even while an earlier checkpoint
 * waits (a lock held, say): the commit it names holds the files whatever
 * comes after. The original is read once more here, and only bytes that
 * still hash to the source are compared or carried; one changed meanwhile is
 * not adopted (a diagnostic: the next scan looks again). Carried originals
 * wait in memory until the checkpoint is queued: past CARRY_MAX_BYTES,
 * further sources are left to the next scan.
 */
export async function placeAdoptions(store: Store, runner: GitRunner, a: Adoption | null): Promise<void> {
  if (a === null || a.sources.length === 0) return;
  const vault = store.paths.vault;
  const tip = await peekBranchTip(vault);
  let entries: Map<string, { oid: string; mode: string }> | null = null;
  if (tip !== null && (await runner.detect()).ok) {
    const t = await readTreeEntries(runner, vault, tip, a.sources.flatMap((s) => [s.descriptorPath, s.inHistory ? s.path : ignoreBeside(s.path)]));
    if (t.ok) entries = t.entries;
  }
  const format = tip !== null && tip.length === 64 ? 'sha256' : 'sha1';
  const holds = (path: string, bytes: Buffer) => {
    const e = entries?.get(path);
    return e !== undefined && (e.mode === '100644' || e.mode === '100755') && e.oid === blobId(bytes, format);
  };
  const kept: NewSource[] = [];
  let carried = 0;
  for (const [i, s] of a.sources.entries()) {
    if (i > 0) await yieldToSignals();
    const not = (why: string) => a.diagnostics.push({ path: s.descriptorPath, code: 'unadopted-source', reason: `not adopted as a source of ${s.partition}: ${why}` });
    const files: BatchChange[] = [{ path: s.descriptorPath, bytes: s.descriptor! }];
    if (s.inHistory) {
      const r = readStable(join(vault, s.path));
      if (r.kind !== 'ok' || r.sha256 !== s.sha256) {
        not(`its retained original ${s.path} changed while the scan read it; scan again`);
        continue;
      }
      files.push({ path: s.path, bytes: r.bytes });
    } else {
      // The .gitignore a publication commits beside an original kept out of history, when it is there as written.
      const r = readStable(join(vault, ignoreBeside(s.path)));
      if (r.kind === 'ok' && r.bytes.equals(EXCLUDED_IGNORE)) files.push({ path: ignoreBeside(s.path), bytes: r.bytes });
    }
    if (tip !== null && files.every((f) => holds(f.path, f.bytes!))) {
      a.held.set(s.descriptorPath, tip);
      kept.push(s);
      continue;
    }
    const size = files.reduce((n, f) => n + f.bytes!.length, 0);
    if (carried > 0 && carried + size > CARRY_MAX_BYTES) {
      not(`left to the next scan: this one's checkpoint already carries ${carried} bytes of the sources it adopted`);
      continue;
    }
    carried += size;
    a.carry.set(s.descriptorPath, files);
    kept.push(s);
  }
  a.sources = kept;
}

/**
 * Record what planAdoptions found, in the scan's applying transaction: the
 * sources (with the row a publication makes), and the diagnostics of the
 * descriptors not adopted. Returns the partitions that gained sources, whose
 * references are then re-checked. A source the branch tip held when the scan
 * began has that tip kept as the commit to name for it where no batch of this
 * store carried it (an attachment of the same bytes); the others are carried
 * by the scan's own checkpoint (placeAdoptions), found by their paths in its
 * batch.
 */
export function recordAdoption(db: DB, a: Adoption): Set<string> {
  const clear = db.prepare("DELETE FROM scan_diagnostics WHERE path = ? AND code = 'unadopted-source'");
  for (const path of a.looked) clear.run(path);
  const note = db.prepare("INSERT OR REPLACE INTO scan_diagnostics(path, partition, code, reason) VALUES (?, ?, 'unadopted-source', ?)");
  for (const d of a.diagnostics) note.run(d.path, partitionOfPath(d.path) ?? '', d.reason);
  const known = db.prepare('SELECT 1 FROM sources WHERE partition = ? AND source_id = ?').pluck();
  const insert = sourceInserter(db);
  const inHistoryAt = db.prepare('INSERT OR REPLACE INTO adopted_in_history(commit_id, partition, source_id) VALUES (?, ?, ?)');
  const gained = new Set<string>();
  for (const s of a.sources) {
    if (known.get(s.partition, s.sourceId) !== undefined) continue;
    insert(s);
    const heldAt = a.held.get(s.descriptorPath);
    if (heldAt !== undefined) inHistoryAt.run(heldAt, s.partition, s.sourceId);
    gained.add(s.partition);
  }
  return gained;
}

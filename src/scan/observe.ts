/**
 * The observing phase of a scan [SCAN-1, SCAN-4]: walk the partitions,
 * recognise unchanged files from stored metadata without reading them, read
 * and hash the rest, check their bytes, and stage those bytes in
 * `scan_staging` in short transactions (so a 100k-file baseline neither holds
 * every file in memory nor keeps SQLite's write lock for the whole walk).
 * Then look again at recorded files the walk did not see before calling
 * them deleted.
 */
import { readdirSync } from 'node:fs';
import type { Store } from '../store/store.js';
import { partitionDir, partitionOfPath, type PartitionId } from '../store/layout.js';
import { crashPoint } from '../faults.js';
import { walkPartition } from './walk.js';
import { readStable, sleepSync } from './read.js';
import { checkFile } from './check.js';
import { isRacy, isUnchanged } from './plan.js';
import { dirInScope, isScannedFileName } from './scope.js';
import type { MissingFile, ReadFile, ScanDiagnostic, ScanProgress, StatEntry } from './types.js';

export interface Observation {
  /** Files read and hashed (new, changed metadata, or racy), with the fingerprints to record. */
  read: ReadFile[];
  /** Recorded files that are gone. */
  missing: MissingFile[];
  /** Files recognised from stored metadata alone. */
  unchanged: number;
  /** Recorded files before this scan. */
  known: number;
  diagnostics: ScanDiagnostic[];
}

/** Staged bytes are flushed to SQLite in transactions of at most this many files or bytes. */
const STAGE_FILES = 2000;
const STAGE_BYTES = 8 * 1024 * 1024;
/** Pauses before each look at a recorded file the walk did not see (ms); only scans that find deletions pay them. */
const MISSING_RECHECK_MS = [0, 20, 50, 100, 200];

/**
 * Recorded files of the partitions, as path → fingerprint key ('' when
 * racy), filtered by the same scope rule as the walk.
 */
function loadKnown(store: Store, partitions: readonly PartitionId[]): Map<string, string> {
  const known = new Map<string, string>();
  // The key is built by SQLite (knownKey's format): two values per row instead of five.
  const stmt = store.db.prepare(
    "SELECT path, CASE WHEN racy THEN '' ELSE size || ':' || mtime_ns || ':' || ino END FROM vault_files WHERE partition = ?",
  ).raw();
  for (const p of partitions) {
    const pdir = partitionDir(p);
    const dirOk = new Map<string, boolean>();
    for (const [path, key] of stmt.all(p) as Array<[string, string]>) {
      const slash = path.lastIndexOf('/');
      const dir = path.slice(0, slash);
      let ok = dirOk.get(dir);
      if (ok === undefined) dirOk.set(dir, (ok = dirInScope(dir, pdir)));
      if (ok && isScannedFileName(path.slice(slash + 1))) known.set(path, key);
    }
  }
  return known;
}

export function observe(
  store: Store,
  scanId: string,
  partitions: readonly PartitionId[],
  progress: ScanProgress,
  onProgress?: (p: ScanProgress) => void,
): Observation {
  const db = store.db;
  const vault = store.paths.vault;
  const known = loadKnown(store, partitions);
  const knownCount = known.size;
  progress.expected = knownCount;
  const getSha = db.prepare('SELECT sha256 FROM vault_files WHERE path = ?').pluck();
  const insStage = db.prepare('INSERT OR REPLACE INTO scan_staging(scan_id, path, bytes) VALUES (?, ?, ?)');
  const nowNs = BigInt(Date.now()) * 1_000_000n;
  const read: ReadFile[] = [];
  const diagnostics: ScanDiagnostic[] = [];
  const blocked: string[] = [];
  let unchanged = 0;
  let stage: Array<[string, Buffer]> = [];
  let stageBytes = 0;

  const flushStage = () => {
    if (stage.length === 0) return;
    const rows = stage;
    stage = [];
    stageBytes = 0;
    db.transaction(() => {
      for (const [path, bytes] of rows) insStage.run(scanId, path, bytes);
    })();
    crashPoint('scan-mid-stage');
  };

  const block = (path: string, d: ScanDiagnostic) => {
    diagnostics.push(d);
    blocked.push(path);
  };

  /**
   * Read a file whose metadata changed (or that is new). Returns false when
   * the name vanished; true when it was read, or reported and kept.
   */
  const readChanged = (path: string, wasKnown: boolean): boolean => {
    const r = readStable(`${vault}/${path}`);
    switch (r.kind) {
      case 'ok': {
        progress.hashed++;
        const knownSha = wasKnown ? ((getSha.get(path) as string | undefined) ?? null) : null;
        let recordId: string | null = null;
        if (knownSha !== r.sha256) {
          const check = checkFile(path, partitionOfPath(path) ?? '', r.bytes, r.sha256);
          // A copy: the id is a slice of the whole decoded file, which it would keep alive.
          if (check.kind === 'record') recordId = Buffer.from(check.row.id, 'utf8').toString('utf8');
          stage.push([path, r.bytes]);
          stageBytes += r.bytes.length;
          if (stage.length >= STAGE_FILES || stageBytes >= STAGE_BYTES) flushStage();
        }
        read.push({ path, sha256: r.sha256, knownSha256: knownSha, recordId, size: r.size, mtimeNs: r.mtimeNs, ino: r.ino, racy: isRacy(r.mtimeNs, nowNs) });
        return true;
      }
      case 'vanished':
        return false;
      case 'symlink':
        block(path, { path, code: 'symlink', reason: 'became a symbolic link; never followed or committed' });
        return true;
      case 'special':
        block(path, { path, code: 'special-file', reason: 'not a regular file; not read' });
        return true;
      case 'unreadable':
        block(path, { path, code: 'unreadable', reason: `cannot read this file: ${r.reason}; what Knowledge recorded is kept` });
        return true;
      case 'unstable':
        block(path, { path, code: 'unstable', reason: `${r.reason}; the next scan picks it up` });
        return true;
    }
  };

  // Seen files leave `known`; what is left afterwards was not seen.
  const visit = (e: StatEntry) => {
    const k = known.get(e.path);
    if (++progress.seen % 1024 === 0) onProgress?.(progress);
    if (isUnchanged(k, e)) {
      known.delete(e.path);
      unchanged++;
      return;
    }
    if (readChanged(e.path, k !== undefined) && k !== undefined) known.delete(e.path);
  };

  for (const p of partitions) {
    walkPartition(vault, partitionDir(p), { file: visit, diagnostic: (d) => diagnostics.push(d), blocked: (path) => blocked.push(path) });
  }
  const missing = recheckMissing(vault, known, blocked, readChanged).map((path) => ({ path, sha256: '', recordId: null as string | null }));
  flushStage();
  if (missing.length > 0) {
    const recordIdOf = db.prepare('SELECT id FROM records WHERE path = @p UNION ALL SELECT id FROM scan_duplicate_rows WHERE path = @p LIMIT 1').pluck();
    for (const m of missing) {
      m.sha256 = (getSha.get(m.path) as string | undefined) ?? '';
      m.recordId = (recordIdOf.get({ p: m.path }) as string | undefined) ?? null;
    }
  }
  return { read, missing, unchanged, known: knownCount, diagnostics };
}

/**
 * Recorded files the walk did not see. Before calling one deleted, look
 * again — exact name in its folder (on a case-insensitive filesystem lstat
 * of "Foo.md" also finds "foo.md"), then the file — because an editor's save
 * may have had it renamed away or deleted for a moment; and again after
 * short pauses. Files at or under a blocked path are kept.
 */
function recheckMissing(vault: string, unseen: Map<string, string>, blocked: readonly string[], readChanged: (path: string, wasKnown: boolean) => boolean): string[] {
  const isBlocked = (path: string) => blocked.some((b) => path === b || path.startsWith(b + '/'));
  let candidates = [...unseen.keys()].filter((p) => !isBlocked(p));
  for (const pause of MISSING_RECHECK_MS) {
    if (candidates.length === 0) break;
    if (pause > 0) sleepSync(pause);
    const listing = new Map<string, Set<string> | null>();
    const still: string[] = [];
    for (const path of candidates) {
      const slash = path.lastIndexOf('/');
      const dir = path.slice(0, slash);
      let names = listing.get(dir);
      if (names === undefined) {
        try {
          names = new Set(readdirSync(`${vault}/${dir}`));
        } catch {
          names = null;
        }
        listing.set(dir, names);
      }
      if (names?.has(path.slice(slash + 1)) && readChanged(path, true)) continue;
      still.push(path);
    }
    candidates = still;
  }
  return candidates.sort();
}

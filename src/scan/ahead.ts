/**
 * The CLI's head start for large rescans [SCAN-4]. Before `knowledge scan`
 * loads the rest of Knowledge and opens the store (~0.15 s), it looks at
 * state.sqlite read-only: when the scan will be a rescan of at least
 * PREFETCH_MIN_FILES recorded files (no partition needing its baseline read
 * ahead), the worker threads start listing its partition folders now, and
 * the scan takes their listing over (prefetch.ts prefetchAhead).
 *
 * Only ever a head start: anything unexpected (no store, an older schema, a
 * partition the scan will refuse) means no early listing, and the scan runs
 * exactly as it would have; a listing the scan does not take is stopped.
 */
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { partitionDir, storePaths } from '../store/layout.js';
import type { Caller } from '../access.js';
import { resolvePartitions } from './partitions.js';
import { listingWanted, prefetchAhead } from './prefetch.js';
import { recordedCounts } from './known.js';

export function scanAhead(storeDir: string, caller: Caller, partition: string | undefined): void {
  try {
    const paths = storePaths(resolve(storeDir));
    // No waiting on a busy database: this is only a head start.
    const db = new Database(paths.database, { readonly: true, fileMustExist: true, timeout: 0 });
    try {
      const partitions = resolvePartitions({ paths, db }, caller, partition, []);
      // The listing the scan will want (observe.ts); one that reads a baseline ahead is left to the scan itself.
      const wanted = listingWanted(recordedCounts(db, partitions));
      if (!wanted || wanted.readAhead.some(Boolean)) return;
      prefetchAhead(paths.vault, partitions.map(partitionDir));
    } finally {
      db.close();
    }
  } catch {
    // No head start; the scan itself reports whatever this was.
  }
}

/**
 * Phase 3: install records and retained evidence outside any SQLite write
 * lock [PUB-3]: staging file, fsync, then into place without ever replacing
 * a file saved there since it was hashed (fsutil installVaultFile), directory
 * fsync.
 * Idempotent, so a retry after a crash re-runs it safely.
 */
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { installVaultFile, restoreHeld, writableEntry } from '../fsutil.js';
import { sha256Hex } from '../records/record.js';
import type { Store } from '../store/store.js';
import type { PlannedPublication } from './validate.js';
import { crashPoint } from '../faults.js';

export function install(store: Store, planned: PlannedPublication): void {
  const holdFor = (path: string) => join(store.paths.staging, `.held.${sha256Hex(path).slice(0, 32)}`);
  // A file moved aside by an attempt cut short is put back first — every one, before any refusal below.
  for (const f of planned.plan.files) restoreHeld(join(store.paths.vault, f.path), holdFor(f.path));
  for (const f of planned.plan.files) {
    const data = planned.bytes.get(f.path);
    if (!data) throw new KnowledgeError('E_INTERNAL', `journal has no bytes for ${f.path}`);
    const hold = holdFor(f.path);
    const there = writableEntry(store.paths.vault, f.path);
    const current = there?.sha256 ?? null;
    if (current === sha256Hex(data)) continue; // installed before an interruption
    // Never over a save another program makes, before this check or after it (installVaultFile).
    if (current !== f.priorSha256 || !installVaultFile(store.paths.vault, f.path, data, store.paths.staging, there?.seen ?? null, hold)) {
      throw new KnowledgeError('E_CONFLICT', `${f.path} changed on disk while the publication was being installed`);
    }
    crashPoint('mid-install');
  }
}

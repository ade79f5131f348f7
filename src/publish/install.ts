/**
 * Phase 3: install records and retained evidence outside any SQLite write
 * lock [PUB-3]: staging file, fsync, rename, directory fsync (fsutil).
 * Idempotent, so a retry after a crash re-runs it safely.
 */
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { atomicWrite, requireWritable } from '../fsutil.js';
import { sha256Hex } from '../records/record.js';
import type { Store } from '../store/store.js';
import type { PlannedPublication } from './validate.js';
import { crashPoint } from '../faults.js';

export function install(store: Store, planned: PlannedPublication): void {
  for (const f of planned.plan.files) {
    const data = planned.bytes.get(f.path);
    if (!data) throw new KnowledgeError('E_INTERNAL', `journal has no bytes for ${f.path}`);
    const target = join(store.paths.vault, f.path);
    const current = requireWritable(store.paths.vault, f.path);
    if (current === sha256Hex(data)) continue; // installed before an interruption
    if (current !== f.priorSha256) {
      throw new KnowledgeError('E_CONFLICT', `${f.path} changed on disk while the publication was being installed`);
    }
    atomicWrite(target, data, store.paths.staging);
    crashPoint('mid-install');
  }
}

/**
 * A scan receipt's diagnostics with those of the files the scan found changed
 * (added, modified, renamed to) first, then the standing ones of files
 * unchanged since an earlier scan: the order a person reads them in, and the
 * order a kept receipt keeps its first KEPT_DIAGNOSTICS of (receipt.ts).
 */
import type { ScanDiagnostic, ScanReceipt } from './types.js';

export function diagnosticsChangedFirst(r: Pick<ScanReceipt, 'added' | 'modified' | 'renamed' | 'diagnostics'>): ScanDiagnostic[] {
  const changed = new Set([...r.added, ...r.modified, ...r.renamed.map((x) => x.to)]);
  return [...r.diagnostics.filter((d) => changed.has(d.path)), ...r.diagnostics.filter((d) => !changed.has(d.path))];
}

/** Human rendering of a scan receipt (the `--json` form is the receipt itself, Appendix A). */
import type { GitState } from '../git/types.js';
import type { ScanReceipt } from '../scan/types.js';

export function renderScan(r: ScanReceipt, formatGit: (g: GitState) => string): string {
  const lines = [`scan ${r.scanId} of ${r.partitions.join(', ') || 'no partition'}${r.baseline ? ` (baseline of ${r.baselined.join(', ')})` : ''}`];
  for (const x of r.retried) lines.push(`  retried ${x.kind} ${x.id}: ${formatGit(x.git)}`);
  for (const p of r.added) lines.push(`  added     ${p}`);
  for (const p of r.modified) lines.push(`  modified  ${p}`);
  for (const x of r.renamed) lines.push(`  renamed   ${x.from} -> ${x.to}`);
  for (const p of r.deleted) lines.push(`  deleted   ${p}`);
  lines.push(`  ${r.unchanged} unchanged, ${r.hashed} read`);
  for (const d of r.diagnostics) lines.push(`  ${d.code}: ${d.path}: ${d.reason}`);
  lines.push(`  git: ${r.git ? formatGit(r.git) : 'nothing to commit'}`);
  return lines.join('\n') + '\n';
}

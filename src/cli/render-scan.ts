/** Human rendering of a scan receipt (the `--json` form is the receipt itself, Appendix A). */
import type { GitState } from '../git/types.js';
import type { ScanReceipt } from '../scan/types.js';

/**
 * A name as a terminal may show it: control characters (C0, DEL, C1) as
 * `\xNN` and a backslash as `\\`, so a file name can neither fake lines of
 * this output nor send escape sequences to the terminal, and a name that
 * holds a literal `\x0a` reads differently from one holding a line break
 * (the scan reports such names as invalid-name; `--json` escapes them as
 * JSON does).
 */
export function shown(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f-\u009f\\]/g, (c) => (c === '\\' ? '\\\\' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
}

export function renderScan(r: ScanReceipt, formatGit: (g: GitState) => string): string {
  const lines = [`scan ${r.scanId} of ${r.partitions.join(', ') || 'no partition'}${r.baseline ? ` (baseline of ${r.baselined.join(', ')})` : ''}`];
  for (const x of r.retried) lines.push(`  retried ${x.kind} ${x.id}: ${formatGit(x.git)}`);
  for (const p of r.added) lines.push(`  added     ${shown(p)}`);
  for (const p of r.modified) lines.push(`  modified  ${shown(p)}`);
  for (const x of r.renamed) lines.push(`  renamed   ${shown(x.from)} -> ${shown(x.to)}`);
  for (const p of r.deleted) lines.push(`  deleted   ${shown(p)}`);
  lines.push(`  ${r.unchanged} unchanged, ${r.hashed} read`);
  for (const d of r.diagnostics) lines.push(`  ${d.code}: ${shown(d.path)}: ${shown(d.reason)}`);
  lines.push(`  git: ${r.git ? formatGit(r.git) : 'nothing to commit'}`);
  return lines.join('\n') + '\n';
}

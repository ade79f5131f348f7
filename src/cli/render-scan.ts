/** Human rendering of a scan receipt (the `--json` form is the receipt itself, Appendix A). */
import type { GitState } from '../git/types.js';
import type { ScanReceipt } from '../scan/types.js';
import { diagnosticsChangedFirst } from '../scan/diagnostics-order.js';
// Names as a terminal may show them: a file name with a line break is reported as invalid-name, and shown as `\x0a`.
import { shown } from './shown.js';

/**
 * Lines shown per list (added, modified, renamed, deleted, diagnostics); the
 * rest is counted. A baseline of a large vault adds every file, and a vault
 * of hand-written notes has a standing diagnostic for each: listing them all
 * on every scan would bury what changed. `--json` lists everything.
 */
export const SHOWN_PER_LIST = 50;

export function renderScan(r: ScanReceipt, formatGit: (g: GitState) => string): string {
  const lines = [`scan ${r.scanId} of ${r.partitions.join(', ') || 'no partition'}${r.baseline ? ` (baseline of ${r.baselined.join(', ')})` : ''}`];
  for (const x of r.retried) lines.push(`  retried ${x.kind} ${x.id}: ${formatGit(x.git)}`);
  const list = <T>(items: readonly T[], what: string, line: (x: T) => string, json = 'every one') => {
    for (const x of items.slice(0, SHOWN_PER_LIST)) lines.push(line(x));
    if (items.length > SHOWN_PER_LIST) lines.push(`  ... and ${items.length - SHOWN_PER_LIST} more ${what} (--json lists ${json})`);
  };
  list(r.added, 'added', (p) => `  added     ${shown(p)}`);
  list(r.modified, 'modified', (p) => `  modified  ${shown(p)}`);
  list(r.renamed, 'renamed', (x) => `  renamed   ${shown(x.from)} -> ${shown(x.to)}${x.edited ? ' (and edited)' : ''}`);
  list(r.deleted, 'deleted', (p) => `  deleted   ${shown(p)}`);
  list(r.adopted ?? [], 'adopted', (x) => `  adopted   source ${x.sourceId} (${shown(x.path)}): found on disk, unknown to the store`);
  const omitted = r.diagnosticsOmitted ?? 0;
  const found = r.diagnostics.length + omitted;
  lines.push(`  ${r.unchanged} unchanged, ${r.hashed} read${found > 0 ? `, ${found} diagnostic${found === 1 ? '' : 's'}` : ''}`);
  // Diagnostics of files this scan found changed come first; standing ones (files unchanged since an earlier scan) after.
  list(diagnosticsChangedFirst(r), 'diagnostics', (d) => `  ${d.code}: ${shown(d.path)}: ${shown(d.reason)}`, omitted > 0 ? 'those kept' : undefined);
  if (omitted > 0) lines.push(`  ... and ${omitted} more diagnostics, not kept with this receipt (knowledge scan lists those that stand now)`);
  // Changes and no checkpoint: the branch's tip already held every one of them (scan/in-history.ts).
  const changes = r.added.length + r.modified.length + r.renamed.length + r.deleted.length > 0;
  lines.push(`  git: ${r.git ? formatGit(r.git) : changes ? 'nothing to commit: the branch already holds these versions' : 'nothing to commit'}`);
  return lines.join('\n') + '\n';
}

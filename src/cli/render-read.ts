/**
 * Human renderings of the read side for the CLI (`history`, `show`,
 * `search`, `lookup`, `list`). `--json` prints the core's values unchanged;
 * these are only the text forms. Whatever a record, a file name or Git
 * gave is shown as a terminal may show it (./shown.ts): a body cannot send
 * escape sequences to the operator's terminal.
 */
import type {
  HistoryGit,
  ListResult,
  LookupResult,
  RecordDiff,
  RecordHistory,
  RecordSummary,
  RecordView,
  SearchResult,
} from '../read/types.js';
import { shown, shownText } from './shown.js';

function summaryLine(r: RecordSummary): string {
  return `${shown(r.id)}  ${shown(r.kind).padEnd(12)} r${r.revision}  ${shown(r.lifecycle).padEnd(10)} ${shown(r.title)}  (${shown(r.partition)}, ${shown(r.path)})`;
}

/** The page line; `cursor`, where the page has one, names the next page by cursor as well. */
function page(count: number, total: number, offset: number, next: number | null, cursor: string | null = null): string {
  if (total === 0) return '';
  return `${offset + 1}-${offset + count} of ${total}${next !== null ? `  (next: --offset ${next}${cursor !== null ? `, or --cursor ${cursor}` : ''})` : ''}\n`;
}

/** A page past the last: an offset at or beyond the total. */
function pastTheEnd(total: number, offset: number): string {
  return `nothing this far: ${total} in all, and --offset ${offset} skips them all\n`;
}

export function renderHistoryGit(git: HistoryGit): string {
  switch (git.state) {
    case 'ready':
      return git.head ? `branch ${shown(git.branch.replace(/^refs\/heads\//, ''))} at ${git.head}` : `branch ${shown(git.branch.replace(/^refs\/heads\//, ''))} has no commits yet`;
    case 'absent':
      return shown(git.reason);
    case 'pending':
      return `history cannot be read (${git.code}): ${shown(git.reason)}`;
    case 'unavailable':
      return `git unavailable: ${shown(git.reason)}`;
  }
}

export function renderHistory(h: RecordHistory): string {
  const lines = [`history of ${shown(h.id)}  ${shown(h.path)}`, `  git: ${renderHistoryGit(h.git)}`];
  if (h.queued > 0) lines.push(`  ${h.queued} version(s) waiting for a checkpoint (not in Git yet)`);
  if (h.offBranch) {
    const where = h.git.state === 'ready' ? `on branch ${shown(h.git.branch.replace(/^refs\/heads\//, ''))}` : 'in the repository';
    lines.push(`  ${h.offBranch} commit(s) Knowledge made of this record's file are not ${where} (was it reset, or .git replaced?); knowledge verify names them`);
  }
  if (h.versions.length === 0) lines.push('  no committed versions');
  for (const v of h.versions) {
    const ref = v.publicationId ?? v.scanId ?? '';
    // The subject and trailers are a commit's: anyone with the repository can write one.
    lines.push(`  ${shown(v.commit.slice(0, 12))}  ${shown(v.date)}  ${shown(v.actor).padEnd(8)} r${v.revision ?? '?'}  ${shown(v.subject)}${ref ? `  [${shown(ref)}]` : ''}${v.path !== h.path ? `  (${shown(v.path)})` : ''}`);
  }
  return lines.join('\n') + '\n';
}

export function renderDiff(d: RecordDiff): string {
  return d.patch === '' ? `no differences between ${shown(d.from.slice(0, 12))} and ${shown(d.to.slice(0, 12))}\n` : shownText(d.patch);
}

export function renderRecord(v: RecordView): string {
  const r = v.record;
  const lines = [
    `${shown(r.title)}`,
    `  id ${shown(r.id)}  ${shown(r.kind)}  revision ${r.revision}  ${shown(r.lifecycle)}`,
    `  ${shown(r.partition)}  ${shown(r.path)}${r.onDisk === 'same' ? '' : `  (file on disk: ${r.onDisk})`}`,
    `  updated ${shown(r.updatedAt)}  recorded ${shown(r.recordedAt)}`,
  ];
  if (r.aliases.length) lines.push(`  aliases: ${r.aliases.map(shown).join(', ')}`);
  if (r.tags.length) lines.push(`  tags: ${r.tags.map(shown).join(', ')}`);
  for (const e of v.evidence) {
    const where = e.citation.lines ? ` lines ${e.citation.lines[0]}-${e.citation.lines[1]}` : '';
    lines.push(e.known
      ? `  evidence ${shown(e.sourceId)}${where}  ${shown(e.path)}  ${e.size} bytes  ${shown(e.mediaType)}${e.inHistory ? '' : '  (kept out of history)'}`
      : `  evidence ${shown(e.sourceId)}${where}  (unknown source)`);
  }
  if (v.links.length) lines.push(`  links: ${v.links.map(shown).join(', ')}`);
  if (v.backlinksTotal) lines.push(`  backlinks (${v.backlinksTotal}): ${v.backlinks.map((b) => shown(b.id)).join(', ')}`);
  // The body as written, its line breaks and tabs kept (`--json` gives it exactly).
  lines.push('', shownText(r.body.replace(/\n$/, '')));
  return lines.join('\n') + '\n';
}

export function renderSearch(s: SearchResult, offset: number): string {
  if (s.total === 0) return 'no matches\n';
  if (s.results.length === 0) return pastTheEnd(s.total, offset);
  const lines = s.results.map((h) => `${summaryLine(h)}\n    ${shown(h.snippet)}`);
  return lines.join('\n') + '\n' + page(s.results.length, s.total, offset, s.nextOffset);
}

/** `from`: the page's offset, or 'cursor' when it was asked for by --cursor (its position is not counted). */
export function renderList(l: ListResult, from: number | 'cursor'): string {
  if (l.total === 0) return 'no records\n';
  if (from === 'cursor') {
    if (l.records.length === 0) return `nothing after this cursor: ${l.total} in all\n`;
    return l.records.map(summaryLine).join('\n') + '\n' +
      `${l.records.length} after the cursor, of ${l.total}${l.nextCursor !== null ? `  (next: --cursor ${l.nextCursor})` : ''}\n`;
  }
  if (l.records.length === 0) return pastTheEnd(l.total, from);
  // The cursor too, so that a walk begun from this text can go on by cursor.
  return l.records.map(summaryLine).join('\n') + '\n' + page(l.records.length, l.total, from, l.nextOffset, l.nextCursor);
}

export function renderLookup(l: LookupResult): string {
  switch (l.status) {
    case 'found':
      return `found: ${summaryLine(l.record)}\n`;
    case 'ambiguous':
      return `ambiguous: ${l.candidates.length} records match\n` + l.candidates.map((c) => `  ${summaryLine(c)}\n`).join('');
    case 'missing':
      return 'missing\n';
  }
}

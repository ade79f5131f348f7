/**
 * Pure half of record history [READ-2]: the `git log` format we ask for, and
 * parsers for its output and for `git cat-file --batch`. No I/O; table-tested.
 */
import { parseRecordText } from '../records/record.js';
import { fastParseRecord } from '../scan/frontmatter.js';
import type { HistoryActor } from './types.js';
import { messageSubject, parseTrailers } from '../git/trailers.js';

const FS = '\x1f'; // between fields

/**
 * One header per commit: id, parents, author date, and the raw message last
 * (it is the only free text, so a stray separator in it cannot shift the
 * other fields). Its subject and trailers are read by Knowledge
 * (git/trailers.ts): the repository's trailer.* configuration can blind
 * git's own `%(trailers)` [GIT-12].
 */
export const LOG_FORMAT = '--format=%H%x1f%P%x1f%aI%x1f%B';

export interface LogEntry {
  commit: string;
  parent: string | null;
  /** A merge commit (more than one parent). */
  merge: boolean;
  date: string;
  actor: HistoryActor;
  subject: string;
  /** The followed file's path in this commit; null when git listed no file (e.g. some merges). */
  path: string | null;
  /** R/C/A/M/D/T... from --name-status. */
  status: string | null;
  publicationId?: string;
  scanId?: string;
  attachmentId?: string;
}

const HEX_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

export function actorLabel(v: string | undefined): HistoryActor {
  const s = v?.trim();
  return s === 'agent' || s === 'operator' || s === 'external' ? s : 'unknown';
}

/** Author dates come as strict ISO with an offset; report UTC like every other timestamp. */
export function utcIso(gitIso: string): string {
  const ms = Date.parse(gitIso);
  return Number.isFinite(ms) ? new Date(ms).toISOString().replace('.000Z', 'Z') : gitIso;
}

function parseHeader(token: string): LogEntry | null {
  const f = token.split(FS);
  if (f.length < 4) return null;
  const [commit = '', parents = '', date = ''] = f;
  if (!HEX_RE.test(commit)) return null;
  const message = f.slice(3).join(FS);
  const trailers = parseTrailers(message);
  const entry: LogEntry = {
    commit,
    parent: parents.trim() === '' ? null : parents.trim().split(' ')[0]!,
    merge: parents.trim().includes(' '),
    date: utcIso(date),
    actor: actorLabel(trailers.first('Knowledge-Actor')),
    subject: messageSubject(message),
    path: null,
    status: null,
  };
  const p = trailers.first('Knowledge-Publication');
  if (p) entry.publicationId = p;
  const s = trailers.first('Knowledge-Scan');
  if (s) entry.scanId = s;
  const a = trailers.first('Knowledge-Attachment');
  if (a) entry.attachmentId = a;
  return entry;
}

/**
 * Parse `git log -z --name-status LOG_FORMAT`: NUL-separated tokens,
 * `header`, then per file `\nSTATUS`, path (two paths for renames and
 * copies: old, new). The followed path of a commit is its last (new) path.
 */
export function parseLog(out: string): LogEntry[] {
  const tokens = out.split('\0');
  const entries: LogEntry[] = [];
  let cur: LogEntry | null = null;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t === '' || t === '\n') continue;
    if (t.startsWith('\n') && cur) {
      const status = t.slice(1);
      const two = status.startsWith('R') || status.startsWith('C');
      const a = tokens[i + 1];
      const b = two ? tokens[i + 2] : undefined;
      i += two ? 2 : 1;
      if (cur.path === null) {
        cur.status = status;
        cur.path = (two ? b : a) ?? null;
      }
      continue;
    }
    const header = parseHeader(t.startsWith('\n') ? t.slice(1) : t);
    if (header) {
      cur = header;
      entries.push(cur);
    }
  }
  return entries;
}

export type BatchObject = { found: true; bytes: Buffer } | { found: false };

/**
 * Parse `git cat-file --batch` output: per request `<oid> <type> <size>\n`
 * + content + `\n`, or `<request> missing\n` (also `ambiguous`). Returns one
 * entry per request, in order; stops early on malformed output.
 */
export function parseCatFileBatch(out: Buffer, requests: number): BatchObject[] {
  const result: BatchObject[] = [];
  let pos = 0;
  while (result.length < requests && pos < out.length) {
    const nl = out.indexOf(0x0a, pos);
    if (nl < 0) break;
    const header = out.subarray(pos, nl).toString('utf8');
    pos = nl + 1;
    const m = / (blob|tree|commit|tag) (\d+)$/.exec(header);
    if (!m) {
      // "<request> missing" / "ambiguous": no content follows.
      result.push({ found: false });
      continue;
    }
    const size = Number(m[2]);
    if (pos + size > out.length) break;
    const bytes = out.subarray(pos, pos + size);
    pos += size + 1; // content, then a newline
    result.push(m[1] === 'blob' ? { found: true, bytes: Buffer.from(bytes) } : { found: false });
  }
  return result;
}

/** `id` and `revision` of one committed version's frontmatter (null where unreadable). */
export function versionFacts(bytes: Buffer): { id: string | null; revision: number | null } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { id: null, revision: null };
  }
  // The scan's fast path first [SCAN-4]: where it answers, its data equals the full parser's (frontmatter.test.ts
  // checks that); anything outside its subset (CRLF, a BOM, comments, anchors, escapes…) is parsed in full, as before.
  // Most versions are files Knowledge wrote, so a long history seldom loads the YAML parser.
  let data = fastParseRecord(text)?.data;
  if (data === undefined) {
    const parsed = parseRecordText(text);
    if (!parsed.ok) return { id: null, revision: null };
    data = parsed.file.data;
  }
  const { id, revision } = data;
  return {
    id: typeof id === 'string' ? id : null,
    revision: typeof revision === 'number' && Number.isSafeInteger(revision) && revision > 0 ? revision : null,
  };
}

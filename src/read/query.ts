/**
 * Pure half of reading: validate query input at the boundary, and turn user
 * text into FTS5 MATCH expressions [READ-1]. No file I/O (which words give
 * tokens is asked of an in-memory SQLite table, tokens.ts); table-tested.
 *
 * User text never reaches FTS5 as syntax: every word becomes a double-quoted
 * FTS5 string (embedded quotes doubled), which FTS5 only tokenizes. So
 * `title:x OR *`, `NEAR(a b)`, `"`, `^`, `-` and parentheses are searched for
 * as words (or dropped as punctuation), never interpreted.
 */
import { KnowledgeError } from '../errors.js';
import { parsePartition, type PartitionId } from '../store/layout.js';
import { isUtcTimestamp } from '../records/record.js';
import { LIFECYCLES, RECORD_KINDS, type Lifecycle, type RecordKind } from '../records/types.js';
import type { ListQuery, SearchMode, SearchQuery } from './types.js';
import { givesToken } from './tokens.js';

export const MAX_QUERY_LENGTH = 500;
export const MAX_KEY_LENGTH = 500;
export const MAX_WORDS = 64;
export const SEARCH_LIMIT = { min: 1, max: 50, default: 20 } as const;
export const LIST_LIMIT = { min: 1, max: 500, default: 100 } as const;
export const MAX_OFFSET = 1_000_000;

/** Characters as the limits count them: Unicode code points (an emoji is one), as for titles. */
export function codePointLength(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** Marks around matched words in search snippets (Markdown bold: readable as text). */
export const SNIPPET_OPEN = '**';
export const SNIPPET_CLOSE = '**';

/** An FTS5 string: tokenized by the table's tokenizer, never parsed as syntax. */
export function ftsString(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

/**
 * Split user text into searchable words: whitespace-separated, and only the
 * words that give the tokenizer a token (tokens.ts): punctuation-only words
 * are dropped, a word of emoji newer than unicode61's tables is kept.
 */
export function queryWords(query: string): string[] {
  return query
    .normalize('NFC')
    .split(/[\s\p{Cc}]+/u)
    .filter((w) => w !== '' && givesToken(w));
}

/**
 * Letters whose case FTS5's unicode61 tokenizer does not fold (its Unicode
 * tables predate them: the lower case of Cherokee, Georgian Mtavruli, Adlam,
 * Osage, newer Latin letters), each with its other case. Measured against the
 * bundled SQLite; query.test.ts measures again and fails when this differs.
 */
export const UNFOLDED_CASE = /[\u{19B}\u{25C}\u{261}\u{264}\u{26A}\u{26C}\u{282}\u{287}\u{29D}-\u{29E}\u{37F}\u{3F3}\u{528}-\u{52F}\u{10D0}-\u{10FA}\u{10FD}-\u{10FF}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C89}-\u{1C8A}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D8E}\u{2C2F}\u{2C5F}\u{A698}-\u{A69B}\u{A794}\u{A796}-\u{A79F}\u{A7AB}-\u{A7AE}\u{A7B0}-\u{A7DC}\u{A7F5}-\u{A7F6}\u{AB53}\u{AB70}-\u{ABBF}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10570}-\u{1057A}\u{1057C}-\u{1058A}\u{1058C}-\u{10592}\u{10594}-\u{10595}\u{10597}-\u{105A1}\u{105A3}-\u{105B1}\u{105B3}-\u{105B9}\u{105BB}-\u{105BC}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{10D50}-\u{10D65}\u{10D70}-\u{10D85}\u{118A0}-\u{118DF}\u{16E40}-\u{16E7F}\u{16EA0}-\u{16EB8}\u{16EBB}-\u{16ED3}\u{1E900}-\u{1E943}]/u;

/**
 * Text in the cases FTS5 must be asked for it to be found in any case: as
 * written, lower, upper, and each word's first letter upper (a title-case
 * title). Only text with letters of UNFOLDED_CASE; any other text is folded
 * by the tokenizer itself and is returned alone. Callers that need the case
 * to match exactly compare afterwards.
 */
export function caseVariants(text: string): string[] {
  if (!UNFOLDED_CASE.test(text)) return [text];
  const lower = text.toLowerCase();
  const title = lower.replace(/(^|[^\p{L}\p{M}\p{N}])(\p{L})/gu, (_, before: string, letter: string) => before + letter.toUpperCase());
  return [...new Set([text, lower, text.toUpperCase(), title])];
}

/** Case variants of a phrase asked for in full (every combination of its words' own); beyond, the phrase's own. */
export const MAX_PHRASE_VARIANTS = 64;

/**
 * A phrase in the cases FTS5 must be asked for it: every combination of its
 * words' caseVariants (one word may be written upper case, the next lower),
 * up to MAX_PHRASE_VARIANTS; past that, the phrase's own variants.
 */
export function phraseVariants(words: readonly string[]): string[] {
  let out = [''];
  for (const w of words) {
    const vs = caseVariants(w);
    if (out.length * vs.length > MAX_PHRASE_VARIANTS) return caseVariants(words.join(' '));
    out = out.flatMap((p) => vs.map((v) => (p ? `${p} ${v}` : v)));
  }
  return out;
}

/** One FTS5 phrase of `words` (one word: a string), or its case variants OR-ed (phraseVariants). */
function ftsPhraseAnyCase(words: readonly string[]): string {
  const variants = phraseVariants(words);
  return variants.length === 1 ? ftsString(variants[0]!) : `(${variants.map(ftsString).join(' OR ')})`;
}

/** The columns user words may match: never `facets`. */
export const TEXT_COLUMNS = '{title aliases body}';

/**
 * The MATCH expression for a search, or null when the text has no searchable
 * word (then nothing matches). `all`: every word; `any`: at least one;
 * `phrase`: the words adjacent and in order. Confined to the text columns.
 */
export function matchExpression(query: string, mode: SearchMode): string | null {
  const words = queryWords(query);
  if (words.length === 0) return null;
  switch (mode) {
    case 'all':
      return `${TEXT_COLUMNS} : (${words.map((w) => ftsPhraseAnyCase([w])).join(' AND ')})`;
    case 'any':
      return `${TEXT_COLUMNS} : (${words.map((w) => ftsPhraseAnyCase([w])).join(' OR ')})`;
    case 'phrase':
      return `${TEXT_COLUMNS} : (${ftsPhraseAnyCase(words)})`;
  }
}

/**
 * One token of the `facets` column (migration 003): a prefix letter and the
 * hex of the value's UTF-8 bytes, so every value is one exact token.
 */
export function facetToken(prefix: 'p' | 'k' | 'l' | 't', value: string): string {
  return `${prefix}${Buffer.from(value, 'utf8').toString('hex')}`;
}

/**
 * FTS5 terms for filters and partition scope, to AND with the user's
 * expression; null when the caller may read no partition (nothing matches).
 */
export function facetTerms(f: { readable: 'all' | readonly string[]; partition?: string; kind?: string; lifecycle?: string; tag?: string }): string[] | null {
  const terms: string[] = [];
  if (f.readable !== 'all') {
    if (f.readable.length === 0) return null;
    terms.push(`facets : (${f.readable.map((p) => ftsString(facetToken('p', p))).join(' OR ')})`);
  }
  if (f.partition) terms.push(`facets : ${ftsString(facetToken('p', f.partition))}`);
  if (f.kind) terms.push(`facets : ${ftsString(facetToken('k', f.kind))}`);
  if (f.lifecycle) terms.push(`facets : ${ftsString(facetToken('l', f.lifecycle))}`);
  if (f.tag) terms.push(`facets : ${ftsString(facetToken('t', f.tag))}`);
  return terms;
}

/**
 * Candidates for an exact title, alias or wiki link: the text as one phrase
 * within a column (in each of its caseVariants); `anchored` also requires it
 * to start the column (FTS5 `^`).
 * Null when the text has no searchable word.
 */
export function columnPhrase(column: 'title' | 'aliases' | 'body', text: string, anchored = false): string | null {
  const words = queryWords(text);
  if (words.length === 0) return null;
  const phrases = phraseVariants(words).map((p) => `${column} : ${anchored ? '^' : ''}${ftsString(p)}`);
  return phrases.length === 1 ? phrases[0]! : `(${phrases.join(' OR ')})`;
}

/** How lookup compares titles and aliases: NFC, locale-independent lowercase [READ-1]. */
export function foldKey(s: string): string {
  return s.normalize('NFC').toLowerCase().normalize('NFC');
}

// ---------------------------------------------------------------------------
// Boundary validation: unknown input in, typed values out, E_VALIDATION otherwise.

function bad(message: string): never {
  throw new KnowledgeError('E_VALIDATION', message);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optString(o: Record<string, unknown>, key: string, max = 200): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.trim() === '' || v.length > max) bad(`${key} must be a non-empty string of at most ${max} characters`);
  return v;
}

function optKind(o: Record<string, unknown>): RecordKind | undefined {
  const v = optString(o, 'kind');
  if (v !== undefined && !(RECORD_KINDS as readonly string[]).includes(v)) bad(`kind must be one of ${RECORD_KINDS.join(' | ')}, got ${JSON.stringify(v)}`);
  return v as RecordKind | undefined;
}

function optLifecycle(o: Record<string, unknown>): Lifecycle | undefined {
  const v = optString(o, 'lifecycle');
  if (v !== undefined && !(LIFECYCLES as readonly string[]).includes(v)) bad(`lifecycle must be one of ${LIFECYCLES.join(' | ')}, got ${JSON.stringify(v)}`);
  return v as Lifecycle | undefined;
}

function optInt(o: Record<string, unknown>, key: string, min: number, max: number, dflt: number): number {
  let v = o[key];
  if (v === undefined || v === null) return dflt;
  // Surfaces that parse strings (query parameters, CLI flags) may pass digits.
  if (typeof v === 'string' && /^\d{1,9}$/.test(v)) v = Number(v);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) bad(`${key} must be an integer from ${min} to ${max}, got ${JSON.stringify(o[key])}`);
  return v;
}

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A UTC timestamp, or a calendar date meaning its midnight UTC; returned as an ISO timestamp. */
export function parseInstant(key: string, v: string): string {
  const d = DATE_RE.exec(v);
  const ts = d ? `${v}T00:00:00Z` : v;
  if (!isUtcTimestamp(ts)) bad(`${key} must be a UTC timestamp like 2024-01-31T12:00:00Z or a date like 2024-01-31, got ${JSON.stringify(v)}`);
  return ts;
}

/**
 * A date option as a surface names it (`--after`, `updated_after`, `after`):
 * checked here so its error names what the caller typed; the ISO timestamp
 * it returns passes the service's own check unchanged.
 */
export function instantOption<T>(name: string, v: T): T {
  return (typeof v === 'string' ? parseInstant(name, v) : v) as T;
}

export interface ParsedSearch {
  query: string;
  mode: SearchMode;
  /** null: the text has no searchable word; the search matches nothing. */
  match: string | null;
  kind?: RecordKind;
  tag?: string;
  lifecycle?: Lifecycle;
  updatedAfter?: string;
  updatedBefore?: string;
  limit: number;
  offset: number;
}

export function parseSearchQuery(input: unknown): ParsedSearch {
  if (!isRecord(input)) bad('search query must be an object');
  const q = input as SearchQuery & Record<string, unknown>;
  if (typeof q.query !== 'string' || q.query.trim() === '') bad('query must be a non-empty string');
  const chars = codePointLength(q.query);
  if (chars > MAX_QUERY_LENGTH) bad(`query is ${chars} characters; at most ${MAX_QUERY_LENGTH} are allowed`);
  const mode = q.mode ?? 'all';
  if (mode !== 'all' && mode !== 'any' && mode !== 'phrase') bad(`mode must be all | any | phrase, got ${JSON.stringify(mode)}`);
  const words = queryWords(q.query);
  if (words.length > MAX_WORDS) bad(`query has ${words.length} words; at most ${MAX_WORDS} are allowed`);
  const out: ParsedSearch = {
    query: q.query,
    mode,
    match: matchExpression(q.query, mode),
    limit: optInt(q, 'limit', SEARCH_LIMIT.min, SEARCH_LIMIT.max, SEARCH_LIMIT.default),
    offset: optInt(q, 'offset', 0, MAX_OFFSET, 0),
  };
  const kind = optKind(q);
  if (kind) out.kind = kind;
  const tag = optString(q, 'tag');
  if (tag !== undefined) out.tag = tag;
  const lifecycle = optLifecycle(q);
  if (lifecycle) out.lifecycle = lifecycle;
  const after = optString(q, 'updatedAfter', 40);
  if (after !== undefined) out.updatedAfter = parseInstant('updatedAfter', after);
  const before = optString(q, 'updatedBefore', 40);
  if (before !== undefined) out.updatedBefore = parseInstant('updatedBefore', before);
  return out;
}

export interface ParsedList {
  partition?: PartitionId;
  kind?: RecordKind;
  type?: string;
  tag?: string;
  lifecycle?: Lifecycle;
  limit: number;
  offset: number;
  /** The position after which the page starts (a decoded `cursor`). */
  after?: ListPosition;
}

/** A place in the inventory order: a record's updated_at as the order compares it, and its id. */
export interface ListPosition {
  updatedKey: string;
  id: string;
}

/** A list cursor is this many characters at most (an id is at most a few hundred). */
const MAX_CURSOR_LENGTH = 1024;
const UPDATED_KEY_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** An opaque cursor: base64url of a small JSON array (a place in some order). */
export function encodeCursor(parts: Array<string | number>): string {
  return Buffer.from(JSON.stringify(parts), 'utf8').toString('base64url');
}

/**
 * The array an `encodeCursor` cursor holds, when `valid` takes it; otherwise
 * E_VALIDATION saying `expected` (what a cursor is taken from).
 */
export function decodeCursor(cursor: unknown, expected: string, valid: (v: unknown[]) => boolean): unknown[] {
  const refuse = (): never => bad(`cursor must be ${expected}`);
  if (typeof cursor !== 'string' || cursor === '' || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) refuse();
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor as string, 'base64url').toString('utf8'));
  } catch {
    refuse();
  }
  if (!Array.isArray(v) || !valid(v)) refuse();
  return v as unknown[];
}

/**
 * Where a page asked for by `cursor` starts (`decode` reads the cursor), or
 * undefined without one (the page starts at its offset). A cursor with an
 * offset is E_VALIDATION: the list and Activity refuse it alike.
 */
export function cursorStart<T>(offset: number, cursor: unknown, decode: (cursor: unknown) => T): T | undefined {
  if (cursor === undefined || cursor === null) return undefined;
  if (offset !== 0) bad('give cursor or offset, not both: a cursor already says where the page starts');
  return decode(cursor);
}

/** The opaque cursor naming `p`. */
export function encodeListCursor(p: ListPosition): string {
  return encodeCursor([p.updatedKey, p.id]);
}

function decodeListCursor(cursor: unknown): ListPosition {
  const v = decodeCursor(cursor, 'the nextCursor of an earlier list page',
    (a) => a.length === 2 && typeof a[0] === 'string' && UPDATED_KEY_RE.test(a[0]) && typeof a[1] === 'string' && a[1] !== '');
  return { updatedKey: v[0] as string, id: v[1] as string };
}

export function parseListQuery(input: unknown): ParsedList {
  const q = (input ?? {}) as ListQuery & Record<string, unknown>;
  if (!isRecord(q)) bad('list query must be an object');
  const out: ParsedList = {
    limit: optInt(q, 'limit', LIST_LIMIT.min, LIST_LIMIT.max, LIST_LIMIT.default),
    offset: optInt(q, 'offset', 0, MAX_OFFSET, 0),
  };
  const partition = optString(q, 'partition', 80);
  if (partition !== undefined) out.partition = parsePartition(partition);
  const kind = optKind(q);
  if (kind) out.kind = kind;
  const tag = optString(q, 'tag');
  if (tag !== undefined) out.tag = tag;
  const type = optString(q, 'type', 100);
  if (type !== undefined) out.type = type;
  const lifecycle = optLifecycle(q);
  if (lifecycle) out.lifecycle = lifecycle;
  const after = cursorStart(out.offset, q.cursor, decodeListCursor);
  if (after) out.after = after;
  return out;
}

/** A lookup key: non-empty, bounded. */
export function parseLookupKey(key: unknown): string {
  if (typeof key !== 'string' || key.trim() === '') bad('lookup key must be a non-empty string');
  const chars = codePointLength(key);
  if (chars > MAX_KEY_LENGTH) bad(`lookup key is ${chars} characters; at most ${MAX_KEY_LENGTH} are allowed`);
  return key;
}

/** Full hexadecimal commit ids only (SHA-1 or SHA-256): never revisions, ranges or options. */
export function isFullCommitId(s: unknown): s is string {
  return typeof s === 'string' && /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(s);
}

export function nextOffset(offset: number, returned: number, total: number): number | null {
  const next = offset + returned;
  return returned > 0 && next < total ? next : null;
}

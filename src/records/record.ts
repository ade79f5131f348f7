/**
 * Record envelope: parse, validate, complete and serialize one
 * `knowledge-record-v1` Markdown file [REC-1..REC-3].
 *
 * The YAML Document is kept (not just its JS value) so that a rewrite only
 * touches store-owned fields: unknown keys, their values, comments and key
 * order survive [REC-2].
 */
import { createHash } from 'node:crypto';
import type { CST, Document, Scalar, ScalarTag, Tags, YAMLMap } from 'yaml';
import { yaml } from '../yaml-lazy.js';
import { KnowledgeError } from '../errors.js';
import {
  LIFECYCLES,
  MAX_TITLE_LENGTH,
  RECORD_FORMAT,
  RECORD_KINDS,
  type Citation,
  type Lifecycle,
  type RecordKind,
  type RecordMeta,
} from './types.js';

export interface ParsedFile {
  doc: Document;
  data: Record<string, unknown>;
  body: string;
  /** Present when the file's frontmatter ends its lines with CRLF: written back so, like its body. */
  crlf?: true;
}

export type ParseResult = { ok: true; file: ParsedFile } | { ok: false; reason: string };

/** What a caller wrote (may lack store-owned fields). */
export interface DraftInput {
  file: ParsedFile;
}

export interface ValidationIssue {
  field: string;
  message: string;
}

export interface CompleteFill {
  id: string;
  revision: number;
  scope: string;
  now: string;
  /** Keep the original `recorded_at` on revisions; defaults to `now`. */
  recordedAt?: string;
}

export interface CompletedDraft {
  meta: RecordMeta;
  text: string;
  /** The completed file (a fresh Document; the input file is not mutated). */
  file: ParsedFile;
}

const YAML_PARSE_OPTIONS = {
  version: '1.2',
  schema: 'core',
  // Duplicate keys are found by keyProblem, in one pass and with aliases resolved.
  uniqueKeys: false,
  strict: true,
  prettyErrors: false,
  customTags: keepNumberSource,
} as const;

const NUMBER_TAGS = new Set(['tag:yaml.org,2002:int', 'tag:yaml.org,2002:float']);

/**
 * [REC-2] A number is written back as its author wrote it. The `yaml` package
 * writes a parsed number from its value: `12345678901234567890` would come
 * back as `12345678901234567000` (a double), `0x1F` as `0x1f`, `+12` as `12`,
 * `1.0e+400` as `.inf`. Each number tag's writer here gives back the scalar's
 * own source text while that text still reads as the very value the node
 * holds (a value the store set is written as usual).
 */
function keepNumberSource(tags: Tags): Tags {
  return tags.map((t) => {
    if (typeof t === 'string' || !('stringify' in t) || !t.stringify || !NUMBER_TAGS.has(t.tag)) return t;
    const write = t.stringify;
    return {
      ...t,
      stringify(item, ctx, onComment, onChompKeep) {
        const source = (item as Scalar).source as unknown;
        if (typeof source === 'string' && typeof item.value === 'number' && Object.is(numberOfSource(source), item.value)) return source;
        return write(item, ctx, onComment, onChompKeep);
      },
    } as ScalarTag;
  });
}

/** The number a plain scalar's text reads as under the core schema (NaN-safe with Object.is); undefined when not a number. */
function numberOfSource(source: string): unknown {
  if (source.length > 400 || /[\n\r#:]/.test(source)) return undefined;
  try {
    const v: unknown = yaml().parse(source, { version: '1.2', schema: 'core' });
    return typeof v === 'number' ? v : undefined;
  } catch {
    return undefined;
  }
}

const YAML_STRINGIFY_OPTIONS = {
  // Never fold long strings: keeps values on the lines the author wrote them.
  lineWidth: 0,
} as const;

// ---------------------------------------------------------------------------
// Small predicates

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const TS_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;
/** C0, DEL, C1 controls and the Unicode line/paragraph separators. */
function hasControlChars(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x1f || (c >= 0x7f && c <= 0x9f) || c === 0x2028 || c === 0x2029) return true;
  }
  return false;
}

/** Record id syntax: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`. */
export function isValidId(id: unknown): id is string {
  return typeof id === 'string' && ID_RE.test(id);
}

/** ISO-8601 UTC `YYYY-MM-DDTHH:MM:SS(.fraction)?Z` naming a real calendar instant. */
export function isUtcTimestamp(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const m = TS_RE.exec(value);
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return false;
  const date = new Date(Date.UTC(y, mo - 1, d));
  // Date.UTC maps years 0..99 to 1900..1999; setUTCFullYear fixes that.
  date.setUTCFullYear(y);
  return date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}

/** Claims and relationships must cite evidence; pages may. */
export function requiresEvidence(kind: RecordKind): boolean {
  return kind === 'claim' || kind === 'relationship';
}

export function sha256Hex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

// ---------------------------------------------------------------------------
// Envelope

/**
 * The first line of a YAML error, worded for a person. The parser reports
 * collections nested past its stack (~1000 levels) as V8's own words.
 */
export function yamlErrorMessage(message: string): string {
  const first = message.split('\n')[0] ?? message;
  return /Maximum call stack size exceeded/.test(first) ? YAML_TOO_DEEP : first;
}

/**
 * Collections nested deeper than this are refused before the YAML is
 * composed [REC-3, SCAN-2]. The composer recurses, so without a limit of its
 * own the depth at which a file stopped being readable was where the stack
 * ran out: ~900 levels on the main thread, more on a worker thread (4 MiB
 * stack) — the same file valid or not depending on which thread read it.
 */
export const MAX_YAML_DEPTH = 200;

/** The reason given for YAML nested past {@link MAX_YAML_DEPTH} (or past the parser's stack). */
export const YAML_TOO_DEEP = 'collections are nested too deeply to read';

/**
 * The first key of `doc` that repeats another of its map, in one pass over
 * each map's keys. The parser's own check (`uniqueKeys`) compares each key
 * with every earlier one — minutes for a 1 MiB record of 100k keys, under the
 * writer lock — and scalar keys only, so `*k : …` beside `updated_at: …`,
 * with `&k updated_at`, passed, and the later value silently won. Keys
 * compare as they become a JS object's keys: `true` and "true", `1` and "1"
 * are one key. With `strictKeys` (a record's frontmatter, whose fields are
 * named by plain scalars) an alias or a collection as a key is refused
 * itself; otherwise an alias is resolved and a collection key is not
 * compared. `offset` is where the key is in the text.
 */
export function keyProblem(doc: Document, strictKeys: boolean): { message: string; offset: number } | null {
  const { visit, isAlias, isCollection, isScalar } = yaml();
  let found: { message: string; offset: number } | null = null;
  visit(doc, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        let key: unknown = pair.key;
        const offset = (yaml().isNode(key) ? key.range?.[0] : undefined) ?? map.range?.[0] ?? 0;
        if (isAlias(key)) {
          if (strictKeys) found = { message: 'a YAML alias (*name) cannot be a key', offset };
          else key = key.resolve(doc);
        }
        if (found === null && isCollection(key) && strictKeys) found = { message: 'a collection cannot be a key', offset };
        if (found !== null) return visit.BREAK;
        if (isCollection(key)) continue;
        const value = isScalar(key) ? key.value : key;
        const text = value === null || value === undefined ? '' : String(value);
        // A record's keys become a JS object's (`true` and "true" are one key there); a plain YAML file's are
        // compared as YAML does, by type and value.
        const name = strictKeys ? text : `${value === null || value === undefined ? 'null' : typeof value}:${text}`;
        if (seen.has(name)) {
          found = { message: `Map keys must be unique: ${JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text)} twice`, offset };
          return visit.BREAK;
        }
        seen.add(name);
      }
      return undefined;
    },
  });
  return found;
}

/**
 * The parser's tokens of `text`, unless it nests collections more than
 * {@link MAX_YAML_DEPTH} deep: then `tooDeepAt` is the offset of the first
 * collection past the limit (-1 otherwise). Each level needs a line of its
 * own or a `[`, `{`, `-` or `?`, so most texts are cleared by counting those
 * (their tokens are then parsed as they are read); the rest are measured on
 * the tokens (the lexer and parser keep their own stacks: no recursion here).
 */
export function yamlTokens(text: string): { tooDeepAt: -1; tokens: Iterable<CST.Token> } | { tooDeepAt: number; tokens: null } {
  const { CST, Parser } = yaml();
  let bound = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 13 || c === 0x5b || c === 0x7b || c === 0x2d || c === 0x3f) bound++;
  }
  if (bound <= MAX_YAML_DEPTH) return { tooDeepAt: -1, tokens: new Parser().parse(text) };
  let tokens: CST.Token[];
  try {
    tokens = Array.from(new Parser().parse(text));
  } catch (err) {
    // The parser recurses once per level it closes at once: it runs out of stack only
    // thousands of levels deep, far past the limit, on any thread. Where is not known.
    if (err instanceof RangeError) return { tooDeepAt: 0, tokens: null };
    throw err;
  }
  const stack: Array<[CST.Token | undefined, number]> = [];
  for (const token of tokens) if (token.type === 'document') stack.push([token.value, 0]);
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [token, depth] = top;
    if (token === undefined || !CST.isCollection(token)) continue;
    if (depth + 1 > MAX_YAML_DEPTH) return { tooDeepAt: token.offset, tokens: null };
    for (const item of token.items) {
      if (item.key) stack.push([item.key, depth + 1]);
      if (item.value) stack.push([item.value, depth + 1]);
    }
  }
  return { tooDeepAt: -1, tokens };
}

/**
 * How deeply `value` (plain data, as decoded from JSON) nests arrays and
 * objects, counted as YAML collections, or `limit + 1` as soon as it is known
 * to be deeper than `limit`. Iterative: a value nested thousands deep (which
 * would exhaust the YAML stringifier's stack) is measured without recursion.
 */
export function collectionDepth(value: unknown, limit: number = MAX_YAML_DEPTH): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, depth] = top;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > limit) return limit + 1;
    if (depth + 1 > deepest) deepest = depth + 1;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}

function fail(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

function lineOfOffset(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/**
 * Parse a record file's text. The text must begin with a `---` line (LF or
 * CRLF), then YAML 1.2 (core schema) frontmatter that is a mapping, closed by
 * a line that is exactly `---`. The body is everything after the closing
 * line, kept exactly. A byte order mark is rejected.
 */
export function parseRecordText(text: string): ParseResult {
  if (typeof text !== 'string') return fail('record is not text');
  const lone = loneSurrogateProblem('record text', text);
  if (lone !== null) return fail(lone);
  if (text.startsWith('\uFEFF')) {
    return fail('record starts with a byte order mark (BOM); it must begin with a "---" line');
  }
  let start: number;
  if (text.startsWith('---\n')) start = 4;
  else if (text.startsWith('---\r\n')) start = 5;
  else return fail('missing frontmatter: a record must begin with a "---" line');

  let lineStart = start;
  let close = -1;
  let bodyStart = -1;
  for (;;) {
    const nl = text.indexOf('\n', lineStart);
    const lineEnd = nl === -1 ? text.length : nl;
    let line = text.slice(lineStart, lineEnd);
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '---') {
      close = lineStart;
      bodyStart = nl === -1 ? text.length : nl + 1;
      break;
    }
    if (nl === -1) break;
    lineStart = nl + 1;
  }
  if (close < 0) return fail('unclosed frontmatter: no closing "---" line');

  const yamlText = text.slice(start, close);
  // (Frontmatter past the cheap bound is parsed twice, here and by parseDocument: rare, and small.)
  const tooDeep = yamlTokens(yamlText).tooDeepAt;
  // Line numbers count from the top of the file (the opening "---" is line 1).
  if (tooDeep >= 0) return fail(`invalid YAML frontmatter (line ${lineOfOffset(yamlText, tooDeep) + 1}): ${YAML_TOO_DEEP}`);
  let doc: Document;
  try {
    doc = yaml().parseDocument(yamlText, YAML_PARSE_OPTIONS);
  } catch (err) {
    return fail(`invalid YAML frontmatter: ${yamlErrorMessage(err instanceof Error ? err.message : String(err))}`);
  }
  const firstError = doc.errors[0];
  if (firstError) {
    // Line numbers count from the top of the file (the opening "---" is line 1).
    const line = lineOfOffset(yamlText, firstError.pos[0]) + 1;
    return fail(`invalid YAML frontmatter (line ${line}): ${yamlErrorMessage(firstError.message)}`);
  }
  const keys = keyProblem(doc, true);
  if (keys) return fail(`invalid YAML frontmatter (line ${lineOfOffset(yamlText, keys.offset) + 1}): ${keys.message}`);
  // A "---" of its own (with a trailing space or comment, it was not the closing line) or a % directive:
  // written back, it would end the frontmatter for the next reader (this one included).
  const dir = doc.directives;
  if (dir?.docStart || dir?.yaml.explicit || Object.keys(dir?.tags ?? {}).some((t) => t !== '!!')) {
    return fail('frontmatter must be one YAML document without a "---" marker or % directives of its own inside it');
  }
  if (!yaml().isMap(doc.contents)) {
    return fail('frontmatter must be a YAML mapping of keys to values');
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    return fail(`invalid YAML frontmatter: ${yamlErrorMessage(err instanceof Error ? err.message : String(err))}`);
  }
  if (!isPlainObject(data)) return fail('frontmatter must be a YAML mapping of keys to values');
  const illFormed = firstIllFormed(data);
  if (illFormed !== null) {
    const shown = illFormed.length > 60 ? `${illFormed.slice(0, 60)}…` : illFormed;
    return fail(loneSurrogateProblem(`invalid YAML frontmatter: ${JSON.stringify(shown)}`, illFormed)!);
  }
  return { ok: true, file: { doc, data, body: text.slice(bodyStart), ...(start === 5 ? { crlf: true as const } : {}) } };
}

/** A UTF-16 surrogate with no partner (with the `u` flag, a pair is one code point and does not match). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

const surrogateName = (c: string) => `\\u${c.charCodeAt(0).toString(16)}`;

/**
 * Why `s` is no Unicode text, naming it `what` (`record text`, `attribution`):
 * `… holds a lone UTF-16 surrogate (\ud800), …`; null when UTF-8 can hold it.
 * Text given as a JS string (a JSON escape, a YAML one) may hold one, which
 * encoding to UTF-8 would silently turn into U+FFFD: refused wherever text
 * becomes bytes or is stored, never altered.
 */
export function loneSurrogateProblem(what: string, s: string): string | null {
  const lone = LONE_SURROGATE.exec(s);
  return lone ? `${what} holds a lone UTF-16 surrogate (${surrogateName(lone[0])}), which is no Unicode character (UTF-8 cannot hold it)` : null;
}

/**
 * The first string (key or value) of `data` that is not Unicode text: a YAML
 * escape (`"\ud800"`) gives a lone surrogate, which the file keeps as the
 * escape but SQLite would be given as bytes that are no UTF-8. Null when none.
 */
function firstIllFormed(data: unknown): string | null {
  const seen = new Set<object>();
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return v;
    } else if (typeof v === 'object' && v !== null && !seen.has(v)) {
      seen.add(v);
      if (Array.isArray(v)) for (const x of v as unknown[]) stack.push(x);
      else {
        for (const [k, x] of Object.entries(v)) {
          if (LONE_SURROGATE.test(k)) return k;
          stack.push(x);
        }
      }
    }
  }
  return null;
}

/** Parse raw file bytes: rejects invalid UTF-8 and a BOM, then {@link parseRecordText}. */
export function parseRecordBytes(bytes: Uint8Array): ParseResult {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return fail('record is not valid UTF-8');
  }
  return parseRecordText(text);
}

/** `'---\n' + yaml + '---\n' + body`. */
export function serializeRecord(file: ParsedFile): string {
  let yaml = file.doc.toString(YAML_STRINGIFY_OPTIONS);
  if (!yaml.endsWith('\n')) yaml += '\n';
  const text = `---\n${yaml}---\n`;
  return `${file.crlf ? text.replace(/\n/g, '\r\n') : text}${file.body}`;
}

// ---------------------------------------------------------------------------
// Validation

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function own(data: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(data, key) ? data[key] : undefined;
}

function isSingleLine(s: string): boolean {
  return s.trim().length > 0 && !hasControlChars(s);
}

type Mode = 'stored' | 'draft';

interface Checked {
  issues: ValidationIssue[];
  meta: Partial<RecordMeta>;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  // JSON has no Infinity or NaN: it would say "null" for `.inf`.
  if (typeof v === 'number') return `number ${String(v)}`;
  return `${typeof v} ${JSON.stringify(v)}`;
}

function checkStringList(
  data: Record<string, unknown>,
  key: 'aliases' | 'tags' | 'dependencies',
  issues: ValidationIssue[],
): string[] {
  const v = own(data, key);
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    issues.push({ field: key, message: `must be a list, got ${describe(v)}` });
    return [];
  }
  const out: string[] = [];
  v.forEach((item: unknown, i) => {
    const field = `${key}[${i}]`;
    if (key === 'dependencies') {
      if (!isValidId(item)) {
        issues.push({ field, message: `must be a record id (letters, digits, '.', '_', ':', '-'; at most 128 characters), got ${describe(item)}` });
        return;
      }
    } else if (typeof item !== 'string' || !isSingleLine(item)) {
      issues.push({ field, message: `must be a non-empty single-line string, got ${describe(item)}` });
      return;
    }
    out.push(item as string);
  });
  return out;
}

function checkEvidence(data: Record<string, unknown>, issues: ValidationIssue[]): Citation[] {
  const v = own(data, 'evidence');
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    issues.push({ field: 'evidence', message: `must be a list of citations, got ${describe(v)}` });
    return [];
  }
  const out: Citation[] = [];
  v.forEach((item: unknown, i) => {
    const field = `evidence[${i}]`;
    if (!isPlainObject(item)) {
      issues.push({ field, message: `must be a citation mapping with a "source", got ${describe(item)}` });
      return;
    }
    let ok = true;
    const source = own(item, 'source');
    if (typeof source !== 'string' || !isSingleLine(source)) {
      issues.push({ field: `${field}.source`, message: source === undefined ? 'is required' : `must be a non-empty source id string, got ${describe(source)}` });
      ok = false;
    }
    const citation: Citation = { source: source as string };
    const lines = own(item, 'lines');
    if (lines !== undefined && lines !== null) {
      const good =
        Array.isArray(lines) &&
        lines.length === 2 &&
        lines.every((n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 1) &&
        (lines[0] as number) <= (lines[1] as number);
      if (!good) {
        issues.push({ field: `${field}.lines`, message: `must be an inclusive line range [first, last] of positive integers with first <= last, got ${describe(lines)}` });
        ok = false;
      } else {
        citation.lines = [lines[0] as number, lines[1] as number];
      }
    }
    const quote = own(item, 'quote');
    if (quote !== undefined && quote !== null) {
      if (typeof quote !== 'string' || quote.length === 0) {
        issues.push({ field: `${field}.quote`, message: `must be a non-empty string, got ${describe(quote)}` });
        ok = false;
      } else {
        citation.quote = quote;
      }
    }
    if (ok) out.push(citation);
  });
  return out;
}

function check(data: Record<string, unknown>, mode: Mode): Checked {
  const issues: ValidationIssue[] = [];
  const meta: Partial<RecordMeta> = {};
  const stored = mode === 'stored';

  const format = own(data, 'format');
  if (format === undefined) {
    if (stored) issues.push({ field: 'format', message: `is required (${RECORD_FORMAT})` });
  } else if (format !== RECORD_FORMAT) {
    issues.push({ field: 'format', message: `must be ${RECORD_FORMAT}, got ${describe(format)}` });
  } else meta.format = RECORD_FORMAT;

  const id = own(data, 'id');
  if (id === undefined || id === null) {
    if (stored) issues.push({ field: 'id', message: 'is required' });
  } else if (!isValidId(id)) {
    issues.push({
      field: 'id',
      message: `must be a string of letters, digits, '.', '_', ':', '-' starting with a letter or digit, at most 128 characters (quote numeric ids), got ${describe(id)}`,
    });
  } else meta.id = id;

  if (stored) {
    const revision = own(data, 'revision');
    if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 1) {
      issues.push({ field: 'revision', message: revision === undefined ? 'is required' : `must be a positive integer, got ${describe(revision)}` });
    } else meta.revision = revision;

    const scope = own(data, 'scope');
    if (typeof scope !== 'string' || !isSingleLine(scope)) {
      issues.push({ field: 'scope', message: scope === undefined ? 'is required' : `must be a partition id string, got ${describe(scope)}` });
    } else meta.scope = scope;

    for (const key of ['recorded_at', 'updated_at'] as const) {
      const ts = own(data, key);
      if (!isUtcTimestamp(ts)) {
        issues.push({ field: key, message: ts === undefined ? 'is required' : `must be a UTC ISO-8601 timestamp like 2024-01-31T12:00:00Z, got ${describe(ts)}` });
      } else meta[key] = ts;
    }
  }

  const kind = own(data, 'kind');
  if (typeof kind !== 'string' || !(RECORD_KINDS as readonly string[]).includes(kind)) {
    issues.push({ field: 'kind', message: kind === undefined ? `is required (${RECORD_KINDS.join(' | ')})` : `must be one of ${RECORD_KINDS.join(' | ')}, got ${describe(kind)}` });
  } else meta.kind = kind as RecordKind;

  const title = own(data, 'title');
  if (title === undefined || title === null) {
    issues.push({ field: 'title', message: 'is required' });
  } else if (typeof title !== 'string') {
    issues.push({ field: 'title', message: `must be a string (quote it), got ${describe(title)}` });
  } else if (!isSingleLine(title)) {
    issues.push({ field: 'title', message: 'must be a non-empty single line without control characters' });
  } else if ([...title].length > MAX_TITLE_LENGTH) {
    issues.push({ field: 'title', message: `must be at most ${MAX_TITLE_LENGTH} characters, got ${[...title].length}` });
  } else meta.title = title;

  const lifecycle = own(data, 'lifecycle');
  if (lifecycle === undefined) {
    if (stored) issues.push({ field: 'lifecycle', message: `is required (${LIFECYCLES.join(' | ')})` });
    else meta.lifecycle = 'active';
  } else if (typeof lifecycle !== 'string' || !(LIFECYCLES as readonly string[]).includes(lifecycle)) {
    issues.push({ field: 'lifecycle', message: `must be one of ${LIFECYCLES.join(' | ')}, got ${describe(lifecycle)}` });
  } else meta.lifecycle = lifecycle as Lifecycle;

  meta.aliases = checkStringList(data, 'aliases', issues);
  meta.tags = checkStringList(data, 'tags', issues);
  meta.dependencies = checkStringList(data, 'dependencies', issues);
  meta.evidence = checkEvidence(data, issues);

  if (kind === 'claim') {
    const ck = own(data, 'claim_kind');
    if (typeof ck !== 'string' || !isSingleLine(ck)) {
      issues.push({ field: 'claim_kind', message: ck === undefined ? 'is required for claims (fact, preference, decision, commitment, event, ...)' : `must be a non-empty single-line string, got ${describe(ck)}` });
    } else meta.claim_kind = ck;
  }
  if (kind === 'relationship') {
    const rt = own(data, 'relationship_type');
    if (typeof rt !== 'string' || !isSingleLine(rt)) {
      issues.push({ field: 'relationship_type', message: rt === undefined ? 'is required for relationships' : `must be a non-empty single-line string, got ${describe(rt)}` });
    } else meta.relationship_type = rt;
    for (const key of ['from', 'to'] as const) {
      const end = own(data, key);
      if (!isValidId(end)) {
        issues.push({ field: key, message: end === undefined ? 'is required for relationships (an endpoint record id)' : `must be an endpoint record id, got ${describe(end)}` });
      } else meta[key] = end;
    }
  }
  return { issues, meta };
}

function formatIssues(issues: ValidationIssue[]): string {
  return issues.map((i) => `${i.field}: ${i.message}`).join('; ');
}

/** Order the meta keys deterministically (useful for JSON output and equality). */
function finishMeta(m: Partial<RecordMeta>): RecordMeta {
  const meta: RecordMeta = {
    format: RECORD_FORMAT,
    id: m.id as string,
    revision: m.revision as number,
    kind: m.kind as RecordKind,
    title: m.title as string,
    recorded_at: m.recorded_at as string,
    updated_at: m.updated_at as string,
    scope: m.scope as string,
    lifecycle: m.lifecycle as Lifecycle,
    aliases: m.aliases ?? [],
    tags: m.tags ?? [],
    dependencies: m.dependencies ?? [],
    evidence: m.evidence ?? [],
  };
  if (m.claim_kind !== undefined) meta.claim_kind = m.claim_kind;
  if (m.relationship_type !== undefined) meta.relationship_type = m.relationship_type;
  if (m.from !== undefined) meta.from = m.from;
  if (m.to !== undefined) meta.to = m.to;
  return meta;
}

/** Full validation of a record as it sits in the vault [REC-1]. Does not require evidence (see requiresEvidence). */
export function validateStored(
  file: ParsedFile,
): { ok: true; meta: RecordMeta } | { ok: false; reason: string; issues: ValidationIssue[] } {
  const { issues, meta } = check(file.data, 'stored');
  if (issues.length > 0) return { ok: false, reason: formatIssues(issues), issues };
  return { ok: true, meta: finishMeta(meta) };
}

/** Validate a caller's draft without completing it; throws E_VALIDATION naming each bad field. */
export function validateDraft(file: ParsedFile): void {
  const { issues } = check(file.data, 'draft');
  if (issues.length > 0) {
    throw new KnowledgeError('E_VALIDATION', formatIssues(issues), { errors: issues });
  }
}

/**
 * The caller's expected revision from a draft (`revision:`), or undefined when
 * absent. Throws E_VALIDATION when present but not a positive integer.
 */
export function draftExpectedRevision(file: ParsedFile): number | undefined {
  const v = own(file.data, 'revision');
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    const issues = [{ field: 'revision', message: `the expected revision must be a positive integer, got ${describe(v)}` }];
    throw new KnowledgeError('E_VALIDATION', formatIssues(issues), { errors: issues });
  }
  return v;
}

// ---------------------------------------------------------------------------
// Completion (store-owned fields)

const YAML11_SPECIAL = /^(?:y|n|yes|no|true|false|on|off|null)$/i;
const SAFE_PLAIN = /^[A-Za-z_][A-Za-z0-9_.:-]*$/;

/** A scalar node for a store-written value; strings that any YAML parser could misread are double-quoted. */
function storeScalar(value: string | number): Scalar {
  const { Scalar } = yaml();
  const node = new Scalar(value);
  if (typeof value === 'string') {
    const plain = SAFE_PLAIN.test(value) && !value.endsWith(':') && !YAML11_SPECIAL.test(value);
    node.type = plain ? Scalar.PLAIN : Scalar.QUOTE_DOUBLE;
  }
  return node;
}

function keyName(key: unknown): string | undefined {
  if (yaml().isScalar(key) && typeof key.value === 'string') return key.value;
  return typeof key === 'string' ? key : undefined;
}

/**
 * Set a store-owned value in place: an existing pair keeps its position and
 * its comments; an absent key is inserted at `insertAt`. Returns true when inserted.
 */
function setOwned(map: YAMLMap, key: string, value: string | number, insertAt: number): boolean {
  const node = storeScalar(value);
  const pair = map.items.find((p) => keyName(p.key) === key);
  if (pair) {
    const old = pair.value;
    if (yaml().isNode(old)) {
      if (old.comment !== undefined) node.comment = old.comment;
      if (old.commentBefore !== undefined) node.commentBefore = old.commentBefore;
      if (old.spaceBefore !== undefined) node.spaceBefore = old.spaceBefore;
    }
    pair.value = node;
    return false;
  }
  const { Pair, Scalar } = yaml();
  map.items.splice(insertAt, 0, new Pair(new Scalar(key), node));
  return true;
}

function internal(message: string): KnowledgeError {
  return new KnowledgeError('E_INTERNAL', message);
}

/**
 * Validate a caller's draft and fill the store-owned fields on a copy of its
 * YAML Document. Throws E_VALIDATION naming the field on bad input, and
 * E_INTERNAL when `fill` itself is invalid.
 *
 * Store-owned: format, id (the caller's id wins when present), revision,
 * scope, recorded_at (fill.recordedAt ?? fill.now), updated_at (fill.now);
 * lifecycle defaults to active when absent. Absent keys are inserted first,
 * in the order format, id, revision, scope, recorded_at, updated_at, lifecycle.
 */
export function completeDraft(file: ParsedFile, fill: CompleteFill): CompletedDraft {
  validateDraft(file);

  const callerId = own(file.data, 'id');
  const id = isValidId(callerId) ? callerId : fill.id;
  if (!isValidId(id)) throw internal(`completeDraft: invalid fill.id ${JSON.stringify(fill.id)}`);
  if (!Number.isSafeInteger(fill.revision) || fill.revision < 1) {
    throw internal(`completeDraft: invalid fill.revision ${String(fill.revision)}`);
  }
  if (typeof fill.scope !== 'string' || !isSingleLine(fill.scope)) {
    throw internal(`completeDraft: invalid fill.scope ${JSON.stringify(fill.scope)}`);
  }
  if (!isUtcTimestamp(fill.now)) throw internal(`completeDraft: invalid fill.now ${JSON.stringify(fill.now)}`);
  const recordedAt = fill.recordedAt ?? fill.now;
  if (!isUtcTimestamp(recordedAt)) {
    throw internal(`completeDraft: invalid fill.recordedAt ${JSON.stringify(fill.recordedAt)}`);
  }

  const doc = file.doc.clone();
  const map = doc.contents;
  if (!yaml().isMap(map)) throw new KnowledgeError('E_VALIDATION', 'frontmatter must be a YAML mapping of keys to values');

  const values: [string, string | number][] = [
    ['format', RECORD_FORMAT],
    ['id', id],
    ['revision', fill.revision],
    ['scope', fill.scope],
    ['recorded_at', recordedAt],
    ['updated_at', fill.now],
  ];
  if (own(file.data, 'lifecycle') === undefined) values.push(['lifecycle', 'active']);
  let inserted = 0;
  for (const [key, value] of values) {
    if (setOwned(map, key, value, inserted)) inserted++;
  }

  let data: Record<string, unknown>;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown>;
  } catch (err) {
    // The store writes its own fields' values: an alias elsewhere to an anchor on one of them is left without it.
    if (err instanceof ReferenceError) {
      throw new KnowledgeError('E_VALIDATION', `frontmatter refers (YAML alias) to an anchor on a field the store fills (${values.map(([k]) => k).join(', ')}): ${err.message}`);
    }
    throw err;
  }
  const completed: ParsedFile = { doc, data, body: file.body, ...(file.crlf ? { crlf: true as const } : {}) };
  const result = validateStored(completed);
  if (!result.ok) throw internal(`completeDraft produced an invalid record: ${result.reason}`);
  return { meta: result.meta, text: serializeRecord(completed), file: completed };
}

/**
 * When the draft has no explicit citations (`evidence` absent, null or an
 * empty list), return a copy citing every given source id; otherwise return
 * the file unchanged. (Appendix A: "given --evidence files and no explicit
 * citations cites every given file".)
 */
export function withDefaultCitations(file: ParsedFile, sourceIds: readonly string[]): ParsedFile {
  if (sourceIds.length === 0) return file;
  const current = own(file.data, 'evidence');
  if (current !== undefined && current !== null && !(Array.isArray(current) && current.length === 0)) return file;
  const doc = file.doc.clone();
  const map = doc.contents;
  const { isMap, Pair, Scalar } = yaml();
  if (!isMap(map)) return file;
  const node = doc.createNode(sourceIds.map((source) => ({ source })));
  const pair = map.items.find((p) => keyName(p.key) === 'evidence');
  if (pair) {
    // An anchor on the empty list would leave its aliases (elsewhere in the frontmatter) naming nothing.
    if (yaml().isNode(pair.value) && pair.value.anchor) {
      throw new KnowledgeError('E_VALIDATION', 'evidence: an empty evidence list with a YAML anchor (&name) cannot be filled with the given files; remove the anchor, or cite the sources yourself');
    }
    pair.value = node;
  } else map.items.push(new Pair(new Scalar('evidence'), node));
  const data = doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown>;
  return { doc, data, body: file.body, ...(file.crlf ? { crlf: true as const } : {}) };
}

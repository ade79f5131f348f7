/**
 * Safe, deterministic record file names. A file name is never identity
 * [REC-2]; it only has to be safe on every filesystem and stable.
 */
import { KnowledgeError } from '../errors.js';
import { sha256Hex } from './record.js';
import type { RecordKind } from './types.js';

export const MAX_SLUG_BYTES = 80;
const FALLBACK_SLUG = 'record';
const KEEP_RE = /^[\p{L}\p{N}]$/u;
const MARK_RE = /^\p{M}$/u;
// Windows device names (also with superscript digits, which Windows treats alike).
const RESERVED_RE = /^(?:con|prn|aux|nul|com[1-9\u00b9\u00b2\u00b3]|lpt[1-9\u00b9\u00b2\u00b3])$/;

/** C0, DEL and C1 control characters. */
function hasControlChars(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}

const encoder = new TextEncoder();
function byteLength(s: string): number {
  return encoder.encode(s).length;
}

let segmenter: Intl.Segmenter | undefined;
function graphemes(s: string): string[] {
  segmenter ??= new Intl.Segmenter('und', { granularity: 'grapheme' });
  return Array.from(segmenter.segment(s), (x) => x.segment);
}

/** Longest prefix of `s` within `max` UTF-8 bytes, cut on a grapheme (else code point) boundary. */
function cutBytes(s: string, max: number): string {
  if (byteLength(s) <= max) return s;
  let out = '';
  let used = 0;
  for (const g of graphemes(s)) {
    const n = byteLength(g);
    if (used + n > max) break;
    out += g;
    used += n;
  }
  if (out.length > 0) return out;
  // A single grapheme longer than the limit: fall back to code points.
  for (const cp of s) {
    const n = byteLength(cp);
    if (used + n > max) break;
    out += cp;
    used += n;
  }
  return out;
}

function trimDashes(s: string): string {
  return s.replace(/^-+/, '').replace(/-+$/, '');
}

/**
 * A file-name-safe slug for a title: NFC, lowercased (locale-independent),
 * letters and digits of any script kept (with their combining marks), every
 * other run mapped to a single '-', trimmed of '-', at most 80 UTF-8 bytes,
 * never empty ('record'), never a Windows device name ('-record' appended).
 * Idempotent: slugForTitle(slugForTitle(t)) === slugForTitle(t).
 */
export function slugForTitle(title: string): string {
  const text = String(title).normalize('NFC').toLowerCase().normalize('NFC');
  let out = '';
  let prevKept = false;
  for (const ch of text) {
    if (KEEP_RE.test(ch)) {
      out += ch;
      prevKept = true;
    } else if (MARK_RE.test(ch) && prevKept) {
      out += ch; // combining mark attached to a kept letter/digit
    } else {
      if (!out.endsWith('-')) out += '-';
      prevKept = false;
    }
  }
  let slug = trimDashes(out).normalize('NFC');
  slug = trimDashes(cutBytes(slug, MAX_SLUG_BYTES)).normalize('NFC');
  if (slug.length === 0 || slug === '.' || slug === '..') slug = FALLBACK_SLUG;
  if (RESERVED_RE.test(slug)) slug = `${slug}-record`;
  return slug;
}

/**
 * A path relative to the vault root that is safe to join: not absolute (no
 * leading '/', no drive letter), only '/' separators, no '.', '..' or empty
 * segments, no control characters, NFC-normalized, each segment at most 255
 * UTF-8 bytes and the whole at most 1024 bytes. `existing`: a path a file of
 * the vault already has (a record a scan indexed), which may be in another
 * normal form — files written on macOS have decomposed (NFD) names — and is
 * used as it is; only the names Knowledge makes must be NFC.
 */
export function isSafeRelativePath(p: string, opts: { existing?: boolean } = {}): boolean {
  if (typeof p !== 'string' || p.length === 0) return false;
  if (p.startsWith('/') || p.includes('\\') || hasControlChars(p)) return false;
  if (/^[A-Za-z]:/.test(p)) return false;
  if (!opts.existing && p !== p.normalize('NFC')) return false;
  if (byteLength(p) > 1024) return false;
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.' || seg === '..') return false;
    if (byteLength(seg) > 255) return false;
  }
  return true;
}

export interface RecordPathOptions {
  /** e.g. 'private' or 'conversations/abc' */
  partitionDir: string;
  kind: RecordKind;
  title: string;
  id: string;
  /** Whether a candidate path (relative to the vault root) is already taken. */
  taken: (relPath: string) => boolean;
}

const MAX_ATTEMPTS = 10_000;

/**
 * Records of one kind are spread over 256 shard folders named by the first
 * two hex digits of sha256(slug), so no folder grows past a few thousand
 * entries even in a million-record vault: every checkpoint rewrites the tree
 * object of each folder it touches, and a flat 100k-entry folder made that
 * a ~5 MB write per commit (BENCHMARKS.md, issue 3). The shard depends only
 * on the title's slug: records of the same title sit side by side, and the
 * same title gets the same path in any store.
 *
 * '<partitionDir>/<kind>s/<hh>/<slug>.md'; when taken, '<slug>-<first 8 hex
 * of sha256(id)>.md', then '<slug>-<hash8>-2.md', '-3', ... (deterministic).
 */
export function recordPath(opts: RecordPathOptions): string {
  const { partitionDir, kind, title, id, taken } = opts;
  if (!isSafeRelativePath(partitionDir)) {
    throw new KnowledgeError('E_INTERNAL', `unsafe partition directory ${JSON.stringify(partitionDir)}`);
  }
  const slug = slugForTitle(title);
  const hash8 = sha256Hex(id).slice(0, 8);
  const dir = `${partitionDir}/${kind}s/${sha256Hex(slug).slice(0, 2)}`;
  const candidates = function* (): Generator<string> {
    yield `${dir}/${slug}.md`;
    yield `${dir}/${slug}-${hash8}.md`;
    for (let n = 2; n < MAX_ATTEMPTS; n++) yield `${dir}/${slug}-${hash8}-${n}.md`;
  };
  for (const candidate of candidates()) {
    if (!isSafeRelativePath(candidate)) {
      throw new KnowledgeError('E_INTERNAL', `unsafe record path ${JSON.stringify(candidate)}`);
    }
    if (!taken(candidate)) return candidate;
  }
  throw new KnowledgeError('E_CONFLICT', `no free file name for ${JSON.stringify(slug)} in ${dir}`);
}

/**
 * Media detection for the history rule [GIT-9]: images, audio and video stay
 * out of automatic snapshots. A file's own signature wins over its extension
 * and a declared type (a renamed .png is still a PNG), and a media extension
 * or declared media type is enough to call a file media. Signatures are
 * checked whole, not by their first bytes alone: a UTF-16 text starts with
 * FF FE, which a bare MPEG frame-sync test took for MP3, and a text may start
 * with "ID3". A bare MPEG frame header (two bytes and a few bits) decides
 * only when neither the extension nor a declared type says what the file is.
 */
import { KnowledgeError } from '../errors.js';

// Maps, not object literals: an extension such as `constructor` or `__proto__` must find nothing.
const MEDIA_EXT: ReadonlyMap<string, string> = new Map(Object.entries({
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp',
  tif: 'image/tiff', tiff: 'image/tiff', heic: 'image/heic', avif: 'image/avif', ico: 'image/x-icon', svg: 'image/svg+xml',
  mp3: 'audio/mpeg', wav: 'audio/wav', flac: 'audio/flac', ogg: 'audio/ogg', oga: 'audio/ogg', m4a: 'audio/mp4', aac: 'audio/aac', opus: 'audio/opus',
  mp4: 'video/mp4', m4v: 'video/mp4', mov: 'video/quicktime', webm: 'video/webm', mkv: 'video/x-matroska', avi: 'video/x-msvideo', ogv: 'video/ogg',
}));

const OTHER_EXT: ReadonlyMap<string, string> = new Map(Object.entries({
  pdf: 'application/pdf', txt: 'text/plain', md: 'text/markdown', json: 'application/json', csv: 'text/csv',
  html: 'text/html', htm: 'text/html', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml',
  log: 'text/plain', zip: 'application/zip', gz: 'application/gzip', docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
}));

/** `type/subtype`, as RFC 6838 allows their names (no parameters). */
const MEDIA_TYPE_RE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,62}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,62}$/i;

/**
 * A caller's declared media type, checked and lowercased (types compare
 * without regard to case: `Video/MP4` is video). Undefined or empty: none.
 * Throws E_VALIDATION for anything not of the form type/subtype.
 */
export function normalizeMediaType(declared: unknown): string | undefined {
  if (declared === undefined || declared === null || declared === '') return undefined;
  if (typeof declared !== 'string' || !MEDIA_TYPE_RE.test(declared)) {
    throw new KnowledgeError('E_VALIDATION', `media type ${JSON.stringify(declared)} is not of the form type/subtype`);
  }
  return declared.toLowerCase();
}

/** The byte-order marks of UTF-8, UTF-16 LE and UTF-16 BE: text, whatever follows. */
function startsWithTextBom(head: Buffer): boolean {
  return (head.length >= 3 && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) ||
    (head.length >= 2 && ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff)));
}

/** An ID3v2 tag header: "ID3", major version 2-4, a revision byte, flags, and a size of four 7-bit bytes. */
function isId3v2(head: Buffer): boolean {
  if (head.length < 10 || head.toString('latin1', 0, 3) !== 'ID3') return false;
  const major = head[3]!;
  if (major < 2 || major > 4 || head[4] === 0xff) return false;
  for (let i = 6; i < 10; i++) if (head[i]! >= 0x80) return false;
  return true;
}

/** An MPEG audio frame header: sync bits, and no reserved version, layer, bitrate or sample rate. */
function isMpegFrame(head: Buffer): boolean {
  if (head.length < 4 || head[0] !== 0xff || (head[1]! & 0xe0) !== 0xe0) return false;
  const version = (head[1]! >> 3) & 3;
  const layer = (head[1]! >> 1) & 3;
  const bitrate = head[2]! >> 4;
  const rate = (head[2]! >> 2) & 3;
  return version !== 1 && layer !== 0 && bitrate !== 15 && rate !== 3;
}

function sniff(head: Buffer): string | null {
  if (startsWithTextBom(head)) return null;
  const s = (off: number, sig: string) => head.length >= off + sig.length && head.toString('latin1', off, off + sig.length) === sig;
  if (s(0, '\x89PNG\r\n\x1a\n')) return 'image/png';
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (s(0, 'GIF87a') || s(0, 'GIF89a')) return 'image/gif';
  if (s(0, 'RIFF') && s(8, 'WEBP')) return 'image/webp';
  if (s(0, 'RIFF') && s(8, 'WAVE')) return 'audio/wav';
  if (s(0, 'RIFF') && s(8, 'AVI ')) return 'video/x-msvideo';
  if (isId3v2(head)) return 'audio/mpeg';
  if (s(0, 'fLaC')) return 'audio/flac';
  if (s(0, 'OggS')) return 'audio/ogg';
  if (s(4, 'ftyp')) {
    const brand = head.toString('latin1', 8, 12);
    if (brand.startsWith('M4A')) return 'audio/mp4';
    if (brand === 'heic' || brand === 'heix' || brand === 'mif1') return 'image/heic';
    if (brand === 'avif') return 'image/avif';
    if (brand === 'qt  ') return 'video/quicktime';
    return 'video/mp4';
  }
  if (head.length >= 4 && head[0] === 0x1a && head[1] === 0x45 && head[2] === 0xdf && head[3] === 0xa3) return 'video/webm';
  if (s(0, '%PDF-')) return 'application/pdf';
  return null;
}

export interface MediaInfo { mediaType: string; isMedia: boolean }

export function isMediaType(t: string): boolean {
  return t.startsWith('image/') || t.startsWith('audio/') || t.startsWith('video/');
}

/** `head`: the first bytes of the file (64 are plenty); `declared`: as {@link normalizeMediaType} returns it. */
export function detectMedia(filename: string, head: Buffer, declared?: string): MediaInfo {
  const ext = filename.includes('.') ? filename.slice(filename.lastIndexOf('.') + 1).toLowerCase() : '';
  const sniffed = sniff(head);
  const byExt = MEDIA_EXT.get(ext) ?? OTHER_EXT.get(ext);
  // Two bytes of frame sync and a few bits: only when nothing else says what the file is (a declared
  // application/octet-stream, what clients send for "some bytes", says nothing).
  const saysWhat = declared !== undefined && declared !== 'application/octet-stream';
  const weak = sniffed === null && !saysWhat && byExt === undefined && !startsWithTextBom(head) && isMpegFrame(head) ? 'audio/mpeg' : null;
  const mediaType = sniffed ?? (saysWhat ? declared : undefined) ?? byExt ?? weak ?? declared ?? 'application/octet-stream';
  const isMedia = isMediaType(mediaType) || (sniffed === null && MEDIA_EXT.has(ext)) || (declared !== undefined && isMediaType(declared));
  return { mediaType, isMedia };
}

/** [GIT-9]: originals of 100 MiB or more stay out of history. */
export const HISTORY_SIZE_LIMIT = 100 * 1024 * 1024;

export function belongsInHistory(size: number, media: MediaInfo): boolean {
  return !media.isMedia && size < HISTORY_SIZE_LIMIT;
}

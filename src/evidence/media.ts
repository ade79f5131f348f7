/**
 * Media detection for the history rule [GIT-9]: images, audio and video stay
 * out of automatic snapshots. Content sniffing wins over the extension, and
 * either one is enough to call a file media (a renamed .png is still a PNG).
 */
const MEDIA_EXT: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp',
  tif: 'image/tiff', tiff: 'image/tiff', heic: 'image/heic', avif: 'image/avif', ico: 'image/x-icon', svg: 'image/svg+xml',
  mp3: 'audio/mpeg', wav: 'audio/wav', flac: 'audio/flac', ogg: 'audio/ogg', oga: 'audio/ogg', m4a: 'audio/mp4', aac: 'audio/aac', opus: 'audio/opus',
  mp4: 'video/mp4', m4v: 'video/mp4', mov: 'video/quicktime', webm: 'video/webm', mkv: 'video/x-matroska', avi: 'video/x-msvideo', ogv: 'video/ogg',
};

const OTHER_EXT: Record<string, string> = {
  pdf: 'application/pdf', txt: 'text/plain', md: 'text/markdown', json: 'application/json', csv: 'text/csv',
  html: 'text/html', htm: 'text/html', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml',
  log: 'text/plain', zip: 'application/zip', gz: 'application/gzip', docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};

function sniff(head: Buffer): string | null {
  const s = (off: number, sig: string) => head.length >= off + sig.length && head.toString('latin1', off, off + sig.length) === sig;
  if (s(0, '\x89PNG\r\n\x1a\n')) return 'image/png';
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (s(0, 'GIF87a') || s(0, 'GIF89a')) return 'image/gif';
  if (s(0, 'RIFF') && s(8, 'WEBP')) return 'image/webp';
  if (s(0, 'RIFF') && s(8, 'WAVE')) return 'audio/wav';
  if (s(0, 'RIFF') && s(8, 'AVI ')) return 'video/x-msvideo';
  if (s(0, 'BM') && head.length > 14) return null; // too weak alone; rely on extension
  if (s(0, 'ID3') || (head.length >= 2 && head[0] === 0xff && (head[1]! & 0xe0) === 0xe0)) return 'audio/mpeg';
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

/** `head`: the first bytes of the file (64 are plenty). */
export function detectMedia(filename: string, head: Buffer, declared?: string): MediaInfo {
  const ext = filename.includes('.') ? filename.slice(filename.lastIndexOf('.') + 1).toLowerCase() : '';
  const sniffed = sniff(head);
  const byExt = MEDIA_EXT[ext] ?? OTHER_EXT[ext];
  const mediaType = sniffed ?? declared ?? byExt ?? 'application/octet-stream';
  const isMedia = isMediaType(mediaType) || (sniffed === null && ext in MEDIA_EXT) || (declared !== undefined && isMediaType(declared));
  return { mediaType, isMedia };
}

/** [GIT-9]: originals of 100 MiB or more stay out of history. */
export const HISTORY_SIZE_LIMIT = 100 * 1024 * 1024;

export function belongsInHistory(size: number, media: MediaInfo): boolean {
  return !media.isMedia && size < HISTORY_SIZE_LIMIT;
}

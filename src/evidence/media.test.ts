import { describe, expect, it } from 'vitest';
import { belongsInHistory, detectMedia, normalizeMediaType } from './media.js';
import { KnowledgeError } from '../errors.js';

const b = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));
const utf16le = (s: string) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(s, 'utf16le')]);
const utf16be = (s: string) => Buffer.from([0xfe, 0xff, ...Buffer.from(s, 'utf16le').swap16()]);

describe('[GIT-9] detectMedia', () => {
  it.each<[string, string, Buffer, string | undefined, string, boolean]>([
    // Text that older checks took for MP3: a UTF-16 byte-order mark (FF FE: frame sync), a text starting "ID3".
    ['UTF-16 LE text', 'notes16.txt', utf16le('Meeting notes\r\n'), undefined, 'text/plain', false],
    ['UTF-16 LE text, no extension', 'notes16', utf16le('Meeting notes\r\n'), undefined, 'application/octet-stream', false],
    ['UTF-16 BE text', 'notes.txt', utf16be('Notes\n'), undefined, 'text/plain', false],
    ['UTF-8 text with a BOM', 'notes', b([0xef, 0xbb, 0xbf], 'hello'), undefined, 'application/octet-stream', false],
    ['text starting "ID3"', 'id3.txt', b('ID3 tags: the header is 10 bytes.\n'), 'text/plain', 'text/plain', false],
    ['text starting "ID3", no type', 'id3', b('ID3 tags: the header is 10 bytes.\n'), undefined, 'application/octet-stream', false],
    // What is media still is.
    ['an ID3v2.3 tag', 'song', b('ID3', [3, 0, 0, 0, 0, 0x10, 0x7f], 'rest'), undefined, 'audio/mpeg', true],
    ['an MPEG frame, nothing else known', 'clip', b([0xff, 0xfb, 0x90, 0x64], 'xxxx'), undefined, 'audio/mpeg', true],
    ['an MPEG frame declared as some bytes (application/octet-stream)', 'voice-memo', b([0xff, 0xfb, 0x90, 0x64], 'xxxx'), 'application/octet-stream', 'audio/mpeg', true],
    ['an MPEG frame with an unknown extension', 'memo.dat', b([0xff, 0xfb, 0x90, 0x64], 'xxxx'), undefined, 'audio/mpeg', true],
    ['some bytes declared as such', 'blob', b('plain bytes'), 'application/octet-stream', 'application/octet-stream', false],
    ['an MPEG-looking start of a file called .txt', 'odd.txt', b([0xff, 0xfb, 0x90, 0x64], 'xxxx'), undefined, 'text/plain', false],
    ['an MPEG-looking start with a reserved layer', 'clip', b([0xff, 0xf9, 0x90, 0x64]), undefined, 'application/octet-stream', false],
    ['a PNG declared as text', 'pic.txt', b('\x89PNG\r\n\x1a\n', 'rest'), 'text/plain', 'image/png', true],
    ['a text file named .mp3', 'talk.mp3', b('just words\n'), undefined, 'audio/mpeg', true],
    ['a declared video type', 'clip.dat', b('data'), 'video/mp4', 'video/mp4', true],
    // Extensions that are names of Object.prototype find nothing.
    ['.constructor', 'notes.constructor', b('hello\n'), undefined, 'application/octet-stream', false],
    ['.__proto__', 'notes.__proto__', b('hello\n'), undefined, 'application/octet-stream', false],
    ['.toString', 'notes.toString', b('hello\n'), undefined, 'application/octet-stream', false],
    ['.hasOwnProperty', 'x.hasOwnProperty', b('hello\n'), undefined, 'application/octet-stream', false],
  ])('%s', (_what, name, head, declared, mediaType, isMedia) => {
    expect(detectMedia(name, head, declared)).toEqual({ mediaType, isMedia });
    expect(belongsInHistory(head.length, { mediaType, isMedia })).toBe(!isMedia);
  });
});

describe('normalizeMediaType', () => {
  it('lowercases a declared type and leaves an absent one absent', () => {
    expect(normalizeMediaType('Video/MP4')).toBe('video/mp4');
    expect(normalizeMediaType('text/plain')).toBe('text/plain');
    expect(normalizeMediaType(undefined)).toBeUndefined();
    expect(normalizeMediaType('')).toBeUndefined();
  });
  it.each(['not a type at all', 'text/', '/plain', 'text/plain; charset=utf-8', 42])('refuses %j with E_VALIDATION', (t) => {
    expect(() => normalizeMediaType(t)).toThrow(KnowledgeError);
    expect(() => normalizeMediaType(t)).toThrow(/is not of the form type\/subtype/);
  });
});

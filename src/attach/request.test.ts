import { describe, expect, it } from 'vitest';
import { isKnowledgeError } from '../errors.js';
import { checkStartRequest, planChunk } from './request.js';
import { ATTACH_LIMITS, type AttachStartRequest } from './types.js';

const SHA = 'ab'.repeat(32);
const base: AttachStartRequest = { partition: 'private', actor: 'operator', filename: 'report.pdf', size: 100, sha256: SHA };

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return isKnowledgeError(err) ? err.code : 'not a KnowledgeError';
  }
}

describe('[ATT-1] planChunk: chunks are appended in order, within the declared size', () => {
  const up = { size: 100, received: 40 };
  const cases: Array<[string, number, number, string]> = [
    ['the next bytes are appended', 40, 10, 'append'],
    ['the last bytes up to the declared size are appended', 40, 60, 'append'],
    ['a chunk starting before the next offset may be a retry (bytes compared by the caller)', 30, 10, 'retry'],
    ['a chunk starting at 0 again may be a retry', 0, 40, 'retry'],
    ['a gap is out of order', 41, 5, 'E_VALIDATION'],
    ['a chunk reaching past the declared size is refused', 40, 61, 'E_VALIDATION'],
    ['a retry reaching past the declared size is refused too', 30, 71, 'E_VALIDATION'],
    ['an empty chunk is refused', 40, 0, 'E_VALIDATION'],
    ['a negative offset is refused', -1, 5, 'E_VALIDATION'],
    ['a fractional offset is refused', 40.5, 5, 'E_VALIDATION'],
  ];
  for (const [name, offset, length, want] of cases) {
    it(name, () => {
      const p = planChunk(up, offset, length);
      expect(p.kind === 'reject' ? p.code : p.kind).toBe(want);
    });
  }

  it('a chunk larger than the limit is E_TOO_LARGE, whatever the declared size', () => {
    const p = planChunk({ size: ATTACH_LIMITS.chunkBytes * 4, received: 0 }, 0, ATTACH_LIMITS.chunkBytes + 1);
    expect(p).toMatchObject({ kind: 'reject', code: 'E_TOO_LARGE' });
    expect(planChunk({ size: ATTACH_LIMITS.chunkBytes * 4, received: 0 }, 0, ATTACH_LIMITS.chunkBytes).kind).toBe('append');
  });

  it('an upload with nothing received accepts only offset 0', () => {
    expect(planChunk({ size: 10, received: 0 }, 0, 10).kind).toBe('append');
    expect(planChunk({ size: 10, received: 0 }, 1, 9)).toMatchObject({ kind: 'reject', code: 'E_VALIDATION' });
  });
});

describe('[ATT-1] checkStartRequest parses a start request once, at the boundary', () => {
  it('normalises the digest and media type and keeps a stable identity of the arguments', () => {
    const a = checkStartRequest({ ...base, sha256: SHA.toUpperCase(), mediaType: 'Application/PDF', requestId: '6f1b7a52-5e39-4c1d-9d0a-6f4e2b0d9c11' });
    expect(a).toMatchObject({ sha256: SHA, mediaType: 'application/pdf', attribution: '', partition: 'private', requestId: '6f1b7a52-5e39-4c1d-9d0a-6f4e2b0d9c11' });
    const b = checkStartRequest({ ...base, mediaType: 'application/pdf' });
    expect(b.hash).toBe(a.hash); // same arguments, whatever the request id or letter case
    expect(b.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  const differs: Array<[string, Partial<AttachStartRequest>]> = [
    ['size', { size: 101 }],
    ['digest', { sha256: 'cd'.repeat(32) }],
    ['file name', { filename: 'other.pdf' }],
    ['media type', { mediaType: 'text/plain' }],
    ['attribution', { attribution: 'someone' }],
    ['partition', { partition: 'conversation:s1' }],
    ['actor', { actor: 'agent' }],
  ];
  for (const [what, change] of differs) {
    it(`another ${what} is another request (E_CONFLICT under a reused request id)`, () => {
      expect(checkStartRequest({ ...base, ...change }).hash).not.toBe(checkStartRequest(base).hash);
    });
  }

  const bad: Array<[string, Partial<AttachStartRequest>, string]> = [
    ['a digest that is not 64 hex characters', { sha256: 'abc' }, 'E_VALIDATION'],
    ['a negative size', { size: -1 }, 'E_VALIDATION'],
    ['a fractional size', { size: 1.5 }, 'E_VALIDATION'],
    ['a size over the limit', { size: ATTACH_LIMITS.attachmentBytes + 1 }, 'E_TOO_LARGE'],
    ['a file name with a directory', { filename: '../etc/passwd' }, 'E_VALIDATION'],
    ['a file name with a backslash', { filename: 'a\\b' }, 'E_VALIDATION'],
    ['a file name with a newline', { filename: 'a\nb' }, 'E_VALIDATION'],
    ['an empty file name', { filename: '' }, 'E_VALIDATION'],
    ['a file name of ..', { filename: '..' }, 'E_VALIDATION'],
    ['a media type that is not type/subtype', { mediaType: 'pdf' }, 'E_VALIDATION'],
    ['a request id that is not a UUID', { requestId: 'nope' }, 'E_VALIDATION'],
    ['an unknown partition', { partition: 'public' }, 'E_VALIDATION'],
    ['an unknown actor', { actor: 'robot' as never }, 'E_VALIDATION'],
    ['an attribution over the limit', { attribution: 'x'.repeat(ATTACH_LIMITS.attributionBytes + 1) }, 'E_VALIDATION'],
    // No Unicode text: UTF-8 would store U+FFFD in its place.
    ['a file name holding a lone surrogate', { filename: 'a\udfff.pdf' }, 'E_VALIDATION'],
    ['an attribution holding a lone surrogate', { attribution: 'me \ud800' }, 'E_VALIDATION'],
  ];
  for (const [name, change, code] of bad) {
    it(`refuses ${name} with ${code}`, () => {
      expect(codeOf(() => checkStartRequest({ ...base, ...change }))).toBe(code);
    });
  }
});

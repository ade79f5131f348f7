/** Query parameters at the HTTP boundary: unknown, repeated and oversized input is refused with a code. */
import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../errors.js';
import { MAX_URL_LENGTH, checkUrlLength, readParams, required } from './params.js';

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof KnowledgeError ? err.code : String(err);
  }
}

describe('readParams', () => {
  it('returns the allowed parameters, decoded, and drops empty ones', () => {
    expect(readParams('http://x/api/search?q=caf%C3%A9+cr%C3%A8me&kind=&tag=a%26b', ['q', 'kind', 'tag'])).toEqual({ q: 'café crème', tag: 'a&b' });
  });

  it('refuses an unknown parameter (a typo must not silently widen a query)', () => {
    expect(codeOf(() => readParams('http://x/?lifecyle=active', ['lifecycle']))).toBe('E_VALIDATION');
  });

  it('refuses a repeated parameter', () => {
    expect(codeOf(() => readParams('http://x/?q=a&q=b', ['q']))).toBe('E_VALIDATION');
  });

  it('tolerates malformed percent-encoding as literal text (no exception escapes)', () => {
    expect(readParams('http://x/?q=%E0%A4%A5%A', ['q']).q).toBe('\u0925%A');
    expect(readParams('http://x/?q=a%zz%', ['q']).q).toBe('a%zz%');
  });

  it('refuses a parameter whose percent-decoded bytes are not UTF-8 (the CLI refuses such an argument), whichever it is', () => {
    for (const url of ['http://x/?q=%FF', 'http://x/?q=%E0%A4%A', 'http://x/?q=caf%E9', 'http://x/?q=ok&tag=%C3', 'http://x/?q=%ED%A0%80', 'http://x/?%FF=1']) {
      expect(codeOf(() => readParams(url, ['q', 'tag'])), url).toBe('E_VALIDATION');
    }
    // U+FFFD sent as its own UTF-8 bytes is text like any other.
    expect(readParams('http://x/?q=%EF%BF%BD', ['q']).q).toBe('\uFFFD');
  });

  it('required() names the missing parameter', () => {
    expect(codeOf(() => required({}, 'from'))).toBe('E_VALIDATION');
    expect(required({ from: 'a' }, 'from')).toBe('a');
  });
});

describe('checkUrlLength', () => {
  it('accepts targets up to the limit and refuses longer ones with E_TOO_LARGE', () => {
    const path = '/api/search?q=';
    expect(codeOf(() => checkUrlLength(`http://x${path}${'a'.repeat(MAX_URL_LENGTH - path.length)}`))).toBeNull();
    expect(codeOf(() => checkUrlLength(`http://x${path}${'a'.repeat(MAX_URL_LENGTH - path.length + 1)}`))).toBe('E_TOO_LARGE');
  });
});

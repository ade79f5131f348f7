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
    expect(readParams('http://x/?q=%E0%A4%A', ['q']).q).toBeTypeOf('string');
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

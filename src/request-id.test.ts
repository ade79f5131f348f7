import { afterEach, describe, expect, it, vi } from 'vitest';
import { newId } from './request-id.js';

describe('newId', () => {
  afterEach(() => vi.restoreAllMocks());
  it('is prefix, time in base 36 and 10 hex digits', () => {
    expect(newId('pub')).toMatch(/^pub-[0-9a-z]+-[0-9a-f]{10}$/);
  });
  it('a clock set before 1970 counts as 1970 (no second dash)', () => {
    vi.spyOn(Date, 'now').mockReturnValue(-3_600_000);
    expect(newId('scan')).toMatch(/^scan-0-[0-9a-f]{10}$/);
  });
});

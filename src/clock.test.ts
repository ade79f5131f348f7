import { afterEach, describe, expect, it, vi } from 'vitest';
import { nowIso } from './clock.js';
import { KnowledgeError } from './errors.js';

/** 10000-01-01T00:00:00Z in milliseconds. */
const YEAR_10000 = Date.UTC(10000, 0, 1);

describe('nowIso', () => {
  afterEach(() => vi.restoreAllMocks());
  it('gives the clock as ISO 8601 in UTC up to the last millisecond of 9999', () => {
    vi.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 0, 2, 3, 4, 5, 6));
    expect(nowIso()).toBe('2026-01-02T03:04:05.006Z');
    vi.spyOn(Date, 'now').mockReturnValue(YEAR_10000 - 1);
    expect(nowIso()).toBe('9999-12-31T23:59:59.999Z');
  });
  it('refuses the first millisecond of the year 10000 and after with E_UNAVAILABLE naming the clock', () => {
    for (const ms of [YEAR_10000, YEAR_10000 + 1, 8.64e15]) {
      vi.spyOn(Date, 'now').mockReturnValue(ms);
      let err: unknown;
      try {
        nowIso();
      } catch (e) {
        err = e;
      }
      expect(err, String(ms)).toBeInstanceOf(KnowledgeError);
      expect((err as KnowledgeError).code).toBe('E_UNAVAILABLE');
      expect((err as KnowledgeError).message).toContain(`the system clock reads ${new Date(ms).toISOString()}, past the year 9999`);
    }
  });
});

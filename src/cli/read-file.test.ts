import { describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readRegularFile } from './main.js';

describe('readRegularFile: the limit holds for what is read, not only for what stat said', () => {
  it('reads a file whole, in chunks past 1 MiB, and refuses one a byte over the limit', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kn-readfile-'));
    try {
      const big = join(dir, 'big.bin');
      const bytes = Buffer.alloc(3 * 1024 * 1024 + 7, 0x61);
      writeFileSync(big, bytes);
      expect(readRegularFile(big, bytes.length).equals(bytes)).toBe(true);
      expect(() => readRegularFile(big, bytes.length - 1)).toThrow(expect.objectContaining({ code: 'E_TOO_LARGE' }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!existsSync('/proc/self/mountinfo'))('a file larger than its stat size (as one that grew after the stat) is read whole, or refused past the limit (needs /proc; skipped otherwise)', () => {
    // /proc files stat as 0 bytes and read as more: what a file growing between the stat and the read looks like.
    const p = '/proc/self/mountinfo';
    const whole = readFileSync(p);
    expect(whole.length).toBeGreaterThan(16);
    expect(readRegularFile(p, 1 << 20).length).toBeGreaterThan(16);
    expect(() => readRegularFile(p, 16)).toThrow(expect.objectContaining({ code: 'E_TOO_LARGE', message: expect.stringMatching(/is more than 16 bytes/) }));
  });
});

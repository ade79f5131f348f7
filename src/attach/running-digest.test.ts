import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { Store } from '../store/store.js';
import { dropDigest, feedDigest, takeDigest } from './running-digest.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const fakeStore = () => ({}) as Store;

describe('[ATT-2] the running digest covers an upload only when one open store saw every byte in order', () => {
  it('gives the digest of bytes fed from offset 0 without gaps, once', () => {
    const s = fakeStore();
    feedDigest(s, 'a', 0, Buffer.from('hello '));
    feedDigest(s, 'a', 6, Buffer.from('world'));
    expect(takeDigest(s, 'a', 11)).toBe(sha('hello world'));
    expect(takeDigest(s, 'a', 11)).toBeNull(); // consumed
  });

  it('knows nothing of a resumed upload (first bytes fed at an offset > 0) or of a gap', () => {
    const s = fakeStore();
    feedDigest(s, 'a', 5, Buffer.from('world'));
    expect(takeDigest(s, 'a', 10)).toBeNull();
    feedDigest(s, 'b', 0, Buffer.from('abc'));
    feedDigest(s, 'b', 4, Buffer.from('e'));
    expect(takeDigest(s, 'b', 5)).toBeNull();
  });

  it('does not cover a size it has not seen in full', () => {
    const s = fakeStore();
    feedDigest(s, 'a', 0, Buffer.from('abc'));
    expect(takeDigest(s, 'a', 4)).toBeNull();
  });

  it('starts over when offset 0 comes again (an upload reset) and is dropped on request', () => {
    const s = fakeStore();
    feedDigest(s, 'a', 0, Buffer.from('wrong'));
    feedDigest(s, 'a', 0, Buffer.from('right'));
    expect(takeDigest(s, 'a', 5)).toBe(sha('right'));
    feedDigest(s, 'a', 0, Buffer.from('x'));
    dropDigest(s, 'a');
    expect(takeDigest(s, 'a', 1)).toBeNull();
  });

  it('belongs to one open store: another open of the same store starts without it', () => {
    const a = fakeStore();
    const b = fakeStore();
    feedDigest(a, 'x', 0, Buffer.from('abc'));
    expect(takeDigest(b, 'x', 3)).toBeNull();
    expect(takeDigest(a, 'x', 3)).toBe(sha('abc'));
  });
});

import { describe, expect, it } from 'vitest';
import { citableText, citationProblem, CHECKED_SOURCE_MAX_BYTES } from './citation.js';

const text = citableText(Buffer.from('first line\r\nsecond line says more\rthird\nlast\n'))!;

describe('[REC-1] a citation holds against its source: lines within it, the quote its exact words', () => {
  it('reads UTF-8 text with any line endings; not binary, not invalid UTF-8, not over the size checked', () => {
    expect(text).toBe('first line\nsecond line says more\nthird\nlast\n');
    expect(citableText(Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0x01]))).toBeNull();
    expect(citableText(Buffer.from([0x61, 0xff, 0x62]))).toBeNull();
    expect(citableText(Buffer.alloc(CHECKED_SOURCE_MAX_BYTES + 1, 0x61))).toBeNull();
  });

  it('accepts a quote anywhere, or within its lines, also across lines and whatever the quote\'s line endings', () => {
    expect(citationProblem({ source: 's' }, text)).toBeNull();
    expect(citationProblem({ source: 's', quote: 'says more' }, text)).toBeNull();
    expect(citationProblem({ source: 's', lines: [2, 2], quote: 'says more' }, text)).toBeNull();
    expect(citationProblem({ source: 's', lines: [1, 3], quote: 'line\r\nsecond' }, text)).toBeNull();
    expect(citationProblem({ source: 's', lines: [1, 4] }, text)).toBeNull();
    expect(citationProblem({ source: 's', lines: [4, 4], quote: 'last' }, text)).toBeNull();
  });

  it('refuses lines past the end, a quote not in the source, and a quote outside its lines', () => {
    expect(citationProblem({ source: 's', lines: [3, 5] }, text)).toBe('cites lines 3-5 of source s, which has 4 lines');
    expect(citationProblem({ source: 's', quote: 'says less' }, text)).toMatch(/^quotes words that are not in source s: /);
    expect(citationProblem({ source: 's', lines: [3, 4], quote: 'says more' }, text)).toMatch(/^quotes words that are not in source s \(lines 3-4\)/);
    expect(citationProblem({ source: 's', quote: 'First line' }, text)).not.toBeNull(); // exact: case counts
    expect(citationProblem({ source: 's', lines: [1, 1] }, citableText(Buffer.from('one line, no end'))!)).toBeNull();
    expect(citationProblem({ source: 's', lines: [1, 1] }, citableText(Buffer.from(''))!)).toBe('cites lines 1-1 of source s, which has 0 lines');
  });
});

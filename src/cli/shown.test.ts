import { describe, expect, it } from 'vitest';
import { internalErrorLines, shown, shownText, warningLine } from './shown.js';

describe('shown: a one-line field as a terminal may show it', () => {
  it('shows control characters (C0 with line breaks and tabs, DEL, C1) as \\xNN and a backslash as \\\\', () => {
    expect(shown('a\u001b[2Jb\n\t\r\u0000\u007f\u0085\u009bc')).toBe('a\\x1b[2Jb\\x0a\\x09\\x0d\\x00\\x7f\\x85\\x9bc');
    expect(shown('lit\\x0a')).toBe('lit\\\\x0a');
  });

  it('shows the bidi embeddings, overrides and isolates as \\uXXXX; other text is unchanged', () => {
    expect(shown('a\u202agnp.exe\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069')).toBe('a\\u202agnp.exe\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069');
    expect(shown('Grüße \u05e9\u05dc\u05d5\u05dd 😀 \u200e')).toBe('Grüße \u05e9\u05dc\u05d5\u05dd 😀 \u200e');
  });
});

describe('shownText: text printed as several lines on purpose', () => {
  it('keeps line breaks, tabs and CRLF; shows every other control character, a lone carriage return and the bidi controls escaped', () => {
    expect(shownText('one\r\n\ttwo\rthree\n\u001b]0;t\u0007 \u009b1m \u202e')).toBe('one\r\n\ttwo\\x0dthree\n\\x1b]0;t\\x07 \\x9b1m \\u202e');
  });

  it('leaves backslashes as written', () => {
    expect(shownText('C:\\dir \\x1b')).toBe('C:\\dir \\x1b');
  });
});

describe('warningLine and internalErrorLines: what serve, demo and every command print on stderr', () => {
  it('a warning is one line, escaped: a line break cannot fake another line, an escape sequence is shown', () => {
    expect(warningLine('could not commit a/b.md:\n  fatal: \u001b[31mno\rway')).toBe('warning: could not commit a/b.md: fatal: \\x1b[31mno\\x0dway\n');
  });
  it("an internal error keeps its stack's lines, each escaped", () => {
    const err = new Error('bad \u001b]0;title\u0007');
    err.stack = 'Error: bad \u001b]0;title\u0007\n    at x (y.js:1:2)';
    expect(internalErrorLines(err)).toBe('E_INTERNAL: Error: bad \\x1b]0;title\\x07\n    at x (y.js:1:2)\n');
    expect(internalErrorLines('plain \u009b')).toBe('E_INTERNAL: plain \\x9b\n');
  });
});

describe('shown and shownText escape exactly their characters', () => {
  const bidi = (c: number) => (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
  const control = (c: number) => c <= 0x1f || (c >= 0x7f && c <= 0x9f);
  const as = (c: number) => (c <= 0xff ? `\\x${c.toString(16).padStart(2, '0')}` : `\\u${c.toString(16)}`);

  it('every code point of the Basic Multilingual Plane: escaped when it is one of them, otherwise unchanged', () => {
    const wrong: string[] = [];
    for (let c = 0; c <= 0xffff; c++) {
      if (c >= 0xd800 && c <= 0xdfff) continue;
      const ch = String.fromCharCode(c);
      const one = c === 0x5c ? '\\\\' : control(c) || bidi(c) ? as(c) : ch;
      const text = (control(c) && c !== 0x09 && c !== 0x0a) || bidi(c) ? as(c) : ch;
      if (shown(ch) !== one) wrong.push(`shown U+${c.toString(16)}: ${shown(ch)}`);
      if (shownText(ch) !== text) wrong.push(`shownText U+${c.toString(16)}: ${shownText(ch)}`);
    }
    expect(wrong).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import m003 from '../store/migrations/003-read.js';
import { FTS_TOKENIZER, givesToken } from './tokens.js';

describe('[READ-1] which words give the FTS5 tokenizer a token', () => {
  it('records_fts is made with the tokenizer the probe asks', () => {
    expect(m003).toContain(`tokenize = '${FTS_TOKENIZER}'`);
  });

  it('every code point on its own: givesToken agrees with the bundled SQLite\'s records_fts tokenizer (measured)', () => {
    const db = new Database(':memory:');
    db.exec(`CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '${FTS_TOKENIZER}'); CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');`);
    const put = db.prepare('INSERT INTO t(rowid, x) VALUES (?, ?)');
    const all: number[] = [];
    for (let cp = 1; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp >= 0xe000) all.push(cp);
    db.transaction(() => {
      for (const cp of all) put.run(cp, String.fromCodePoint(cp));
    })();
    const tokenized = new Set(db.prepare('SELECT DISTINCT doc FROM v').pluck().all() as number[]);
    db.close();
    // Both kinds exist, each with members JavaScript's \p{L}\p{N}\p{Co} would misjudge.
    expect(tokenized.has(0x1f9e0) && !/\p{L}|\p{N}/u.test('\u{1F9E0}')).toBe(true); // 🧠, newer than Unicode 6.1
    expect(!tokenized.has(0x19b0) && /\p{L}/u.test('\u19B0')).toBe(true);
    const wrong = all.filter((cp) => givesToken(String.fromCodePoint(cp)) !== tokenized.has(cp));
    expect(wrong.slice(0, 20).map((cp) => `U+${cp.toString(16).toUpperCase()}`)).toEqual([]);
  });

  it('a word gives a token when any of its characters does', () => {
    expect(givesToken('***')).toBe(false);
    expect(givesToken('—')).toBe(false);
    expect(givesToken('\u19B0')).toBe(false);
    expect(givesToken('🧠')).toBe(true);
    expect(givesToken('👍🏽')).toBe(true);
    expect(givesToken('(x)')).toBe(true);
    expect(givesToken('\u19B0x')).toBe(true);
  });
});

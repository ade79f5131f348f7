import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { KnowledgeError } from '../errors.js';
import {
  MAX_KEY_LENGTH,
  MAX_QUERY_LENGTH,
  UNFOLDED_CASE,
  caseVariants,
  columnPhrase,
  phraseVariants,
  facetTerms,
  facetToken,
  foldKey,
  ftsString,
  isFullCommitId,
  matchExpression,
  nextOffset,
  parseInstant,
  parseListQuery,
  parseLookupKey,
  parseSearchQuery,
  queryWords,
} from './query.js';

function code(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof KnowledgeError ? err.code : `thrown ${String(err)}`;
  }
}

describe('[READ-1] user text becomes FTS5 strings, never syntax', () => {
  it.each([
    ['water boils', 'all', '{title aliases body} : ("water" AND "boils")'],
    ['water boils', 'any', '{title aliases body} : ("water" OR "boils")'],
    ['water boils', 'phrase', '{title aliases body} : ("water boils")'],
    ['title:x OR *', 'all', '{title aliases body} : ("title:x" AND "OR")'],
    ['say "hi"', 'all', '{title aliases body} : ("say" AND """hi""")'],
    ['NEAR(a b)', 'all', '{title aliases body} : ("NEAR(a" AND "b)")'],
    ['^start -not +plus', 'any', '{title aliases body} : ("^start" OR "-not" OR "+plus")'],
    ['*** ---', 'all', null],
  ] as const)('%s (%s) -> %s', (q, mode, expected) => {
    expect(matchExpression(q, mode)).toBe(expected);
  });

  it('facet tokens are exact, opaque and never collide across values', () => {
    expect(facetToken('t', 'c++')).toBe('t632b2b');
    expect(facetToken('t', 'C++')).not.toBe(facetToken('t', 'c++'));
    expect(facetToken('p', 'conversation:A')).toMatch(/^p[0-9a-f]+$/);
    expect(facetTerms({ readable: [] })).toBeNull();
    expect(facetTerms({ readable: 'all' })).toEqual([]);
    expect(facetTerms({ readable: ['private', 'conversation:A'], tag: 'x' })).toEqual([
      `facets : ("${facetToken('p', 'private')}" OR "${facetToken('p', 'conversation:A')}")`,
      `facets : "${facetToken('t', 'x')}"`,
    ]);
  });

  it('doubles embedded quotes', () => {
    expect(ftsString('a"b')).toBe('"a""b"');
  });

  it('splits on whitespace and control characters and drops punctuation-only words', () => {
    expect(queryWords('  café\tcrème\n* ( ) 42  ')).toEqual(['café', 'crème', '42']);
  });

  it('anchors title phrases only when asked', () => {
    expect(columnPhrase('title', 'The Build', true)).toBe('title : ^"The Build"');
    expect(columnPhrase('aliases', 'x "y"')).toBe('aliases : "x ""y"""');
    expect(columnPhrase('title', '???')).toBeNull();
  });

  it('no generated expression is an FTS5 syntax error, for any text (property)', () => {
    const db = new Database(':memory:');
    db.exec("CREATE VIRTUAL TABLE t USING fts5(title, aliases, body, facets, tokenize = 'unicode61 remove_diacritics 2')");
    db.prepare('INSERT INTO t(title, aliases, body, facets) VALUES (?, ?, ?, ?)').run('alpha OR beta', 'NEAR', 'title:x "quoted" * ^ -', facetToken('p', 'private'));
    const stmt = db.prepare('SELECT count(*) AS n FROM t WHERE t MATCH ?');
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), fc.constantFrom('all', 'any', 'phrase'), (q, mode) => {
        const m = matchExpression(q, mode as 'all' | 'any' | 'phrase');
        if (m !== null) {
          stmt.get(m);
          stmt.get([m, ...facetTerms({ readable: ['private', 'conversation:x'], tag: q || 't', kind: 'page' })!].join(' AND '));
        }
        for (const col of ['title', 'aliases', 'body'] as const) {
          const p = columnPhrase(col, q, col === 'title');
          if (p !== null) stmt.get(p);
        }
      }),
      { numRuns: 500 },
    );
    db.close();
  });

  it('an injection attempt matches the words literally, not as operators', () => {
    const db = new Database(':memory:');
    db.exec("CREATE VIRTUAL TABLE t USING fts5(title, aliases, body, facets, tokenize = 'unicode61 remove_diacritics 2')");
    db.prepare('INSERT INTO t(rowid, title, aliases, body, facets) VALUES (1, ?, ?, ?, ?)').run('secret plans', '', 'nothing', facetToken('p', 'private'));
    db.prepare('INSERT INTO t(rowid, title, aliases, body, facets) VALUES (2, ?, ?, ?, ?)').run('or', '', 'title x', '');
    const ids = (q: string) => (db.prepare('SELECT rowid FROM t WHERE t MATCH ?').all(matchExpression(q, 'all')) as Array<{ rowid: number }>).map((r) => r.rowid);
    // Raw, `title:x OR *` would be a column filter plus OR; quoted it needs the words "title", "x" and "or".
    expect(ids('title:x OR *')).toEqual([2]);
    expect(ids('secret OR nothing')).toEqual([]);
    // Facet tokens are not searchable text.
    expect(ids(facetToken('p', 'private'))).toEqual([]);
    db.close();
  });
});

describe('case the tokenizer does not fold', () => {
  const TOKENIZER = "tokenize = 'unicode61 remove_diacritics 2'";

  it('UNFOLDED_CASE holds exactly the cased letters unicode61 does not fold, and their other case (measured on the bundled SQLite)', () => {
    const db = new Database(':memory:');
    db.exec(`CREATE VIRTUAL TABLE t USING fts5(x, ${TOKENIZER})`);
    const put = db.prepare('INSERT INTO t(rowid, x) VALUES (1, ?)');
    const found = db.prepare('SELECT 1 FROM t WHERE t MATCH ?');
    const unfolded = new Set<number>();
    const cased: number[] = [];
    for (let cp = 0x41; cp <= 0x1ffff; cp++) {
      if (cp >= 0xd800 && cp < 0xe000) continue;
      const c = String.fromCodePoint(cp);
      const lower = c.toLowerCase();
      if (lower === c || [...lower].length !== 1) continue;
      cased.push(cp, lower.codePointAt(0)!);
      db.exec('DELETE FROM t');
      put.run(`x${c}x`);
      if (found.get(ftsString(`x${lower}x`)) === undefined) unfolded.add(cp).add(lower.codePointAt(0)!);
    }
    db.close();
    expect(unfolded.size).toBeGreaterThan(0);
    const wrong = [...new Set(cased)].filter((cp) => UNFOLDED_CASE.test(String.fromCodePoint(cp)) !== unfolded.has(cp));
    expect(wrong.map((cp) => `U+${cp.toString(16).toUpperCase()}`)).toEqual([]);
  });

  it('other text is asked as written; such text also lower, upper and in title case', () => {
    expect(caseVariants('Café Crème')).toEqual(['Café Crème']);
    expect(caseVariants('ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ')).toEqual(['ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ', 'ꮳꮃꭹ ꭶꮼꮒꭿꮝꮧ', 'Ꮳꮃꭹ Ꭶꮼꮒꭿꮝꮧ']);
    expect(columnPhrase('title', 'ქართული', true)).toBe('(title : ^"ქართული" OR title : ^"ᲥᲐᲠᲗᲣᲚᲘ" OR title : ^"Ქართული")');
    // A phrase: every combination of its words' cases (a Latin word has one), at most MAX_PHRASE_VARIANTS.
    expect(phraseVariants(['ab', 'ᏣᎳ'])).toEqual(['ab ᏣᎳ', 'ab ꮳꮃ', 'ab Ꮳꮃ']);
    expect(phraseVariants(Array(3).fill('ᏣᎳ'))).toHaveLength(27);
    expect(phraseVariants(Array(4).fill('ᏣᎳ'))).toEqual(caseVariants(Array(4).fill('ᏣᎳ').join(' ')));
    expect(matchExpression('ქართული ena', 'all')).toBe('{title aliases body} : (("ქართული" OR "ᲥᲐᲠᲗᲣᲚᲘ" OR "Ქართული") AND "ena")');
  });

  it('a search finds such words in any case; no expression is an FTS5 syntax error (property)', () => {
    const db = new Database(':memory:');
    db.exec(`CREATE VIRTUAL TABLE t USING fts5(title, aliases, body, ${TOKENIZER})`);
    db.prepare('INSERT INTO t(rowid, title, aliases, body) VALUES (1, ?, ?, ?)').run('ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ', '', '𞤀𞤣𞤤𞤢𞤥 text');
    const ids = (expr: string | null) => (db.prepare('SELECT rowid FROM t WHERE t MATCH ?').all(expr) as Array<{ rowid: number }>).map((r) => r.rowid);
    expect(ids(matchExpression('ꮳꮃꭹ', 'all'))).toEqual([1]);
    expect(ids(matchExpression('ꮳꮃꭹ ꭶꮼꮒꭿꮝꮧ', 'phrase'))).toEqual([1]);
    expect(ids(matchExpression('𞤢𞤣𞤤𞤢𞤥 TEXT', 'all'))).toEqual([1]);
    expect(ids(columnPhrase('title', 'ꮳꮃꭹ ꭶꮼꮒꭿꮝꮧ', true))).toEqual([1]);
    const letters = [...'ᏣᎳᎩꮳꮃꭹქართულიᲥᲐᲠ𞤀𞤣a "*^()-:'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...letters), { maxLength: 30 }), fc.constantFrom('all', 'any', 'phrase'), (chars, mode) => {
        const q = chars.join('');
        const m = matchExpression(q, mode as 'all' | 'any' | 'phrase');
        if (m !== null) ids(m);
        const p = columnPhrase('title', q, true);
        if (p !== null) ids(p);
      }),
      { numRuns: 300 },
    );
    db.close();
  });
});

describe('lookup keys fold case and normalisation', () => {
  it('compares NFC and lowercase', () => {
    expect(foldKey('CAFE\u0301')).toBe(foldKey('café'));
    expect(foldKey('Straße')).toBe('straße');
    expect(foldKey('Cafe')).not.toBe(foldKey('Café'));
  });

  it('rejects empty and over-long keys', () => {
    expect(code(() => parseLookupKey(''))).toBe('E_VALIDATION');
    expect(code(() => parseLookupKey(42))).toBe('E_VALIDATION');
    expect(code(() => parseLookupKey('x'.repeat(501)))).toBe('E_VALIDATION');
    expect(parseLookupKey('Some title')).toBe('Some title');
  });
});

describe('search input is validated at the boundary', () => {
  it('defaults: mode all, limit 20, offset 0', () => {
    expect(parseSearchQuery({ query: 'x y' })).toMatchObject({ mode: 'all', limit: 20, offset: 0, match: '{title aliases body} : ("x" AND "y")' });
  });

  it.each([
    [{ query: '' }],
    [{ query: '   ' }],
    [{ query: 'x'.repeat(MAX_QUERY_LENGTH + 1) }],
    [{ query: 'x', mode: 'regex' }],
    [{ query: 'x', limit: 0 }],
    [{ query: 'x', limit: 51 }],
    [{ query: 'x', limit: 1.5 }],
    [{ query: 'x', offset: -1 }],
    [{ query: 'x', kind: 'note' }],
    [{ query: 'x', lifecycle: 'deleted' }],
    [{ query: 'x', tag: '' }],
    [{ query: 'x', updatedAfter: 'yesterday' }],
    [{ query: 'x', updatedBefore: '2024-02-30' }],
    [{ query: Array.from({ length: 65 }, (_, i) => `w${i}`).join(' ') }],
    [null],
  ])('E_VALIDATION for %j', (q) => {
    expect(code(() => parseSearchQuery(q))).toBe('E_VALIDATION');
  });

  it('accepts exactly 500 characters, limits 1 and 50, digit strings from query parameters', () => {
    expect(code(() => parseSearchQuery({ query: 'a'.repeat(MAX_QUERY_LENGTH) }))).toBeNull();
    // Characters are code points, as for titles: 500 emoji (1,000 UTF-16 units) are 500 characters.
    expect(code(() => parseSearchQuery({ query: '😀'.repeat(MAX_QUERY_LENGTH) }))).toBeNull();
    expect(code(() => parseSearchQuery({ query: '😀'.repeat(MAX_QUERY_LENGTH + 1) }))).toBe('E_VALIDATION');
    expect(code(() => parseLookupKey('😀'.repeat(MAX_KEY_LENGTH)))).toBeNull();
    expect(code(() => parseLookupKey('é'.repeat(MAX_KEY_LENGTH + 1)))).toBe('E_VALIDATION');
    expect(parseSearchQuery({ query: 'x', limit: 1 }).limit).toBe(1);
    expect(parseSearchQuery({ query: 'x', limit: '50', offset: '40' })).toMatchObject({ limit: 50, offset: 40 });
  });

  it('dates are midnight UTC, timestamps stay as given', () => {
    expect(parseInstant('d', '2024-01-31')).toBe('2024-01-31T00:00:00Z');
    expect(parseInstant('d', '2024-01-31T12:00:00.5Z')).toBe('2024-01-31T12:00:00.5Z');
  });

  it('list: limit 1..500 default 100, partition ids parsed', () => {
    expect(parseListQuery({})).toEqual({ limit: 100, offset: 0 });
    expect(parseListQuery({ partition: 'conversation:abc', limit: 500 })).toMatchObject({ partition: 'conversation:abc', limit: 500 });
    expect(code(() => parseListQuery({ limit: 501 }))).toBe('E_VALIDATION');
    expect(code(() => parseListQuery({ partition: 'conversations/abc' }))).toBe('E_VALIDATION');
    expect(code(() => parseListQuery({ partition: 'conversation:../x' }))).toBe('E_VALIDATION');
  });
});

describe('paging and commit ids', () => {
  it('nextOffset is null on the last page', () => {
    expect(nextOffset(0, 20, 45)).toBe(20);
    expect(nextOffset(40, 5, 45)).toBeNull();
    expect(nextOffset(0, 0, 0)).toBeNull();
  });

  it('only full lowercase hex ids are commits', () => {
    expect(isFullCommitId('a'.repeat(40))).toBe(true);
    expect(isFullCommitId('b'.repeat(64))).toBe(true);
    for (const bad of ['HEAD', 'a'.repeat(39), 'A'.repeat(40), `${'a'.repeat(40)}^`, '--output=/tmp/x', `${'a'.repeat(20)}..${'a'.repeat(20)}`]) {
      expect(isFullCommitId(bad)).toBe(false);
    }
  });
});

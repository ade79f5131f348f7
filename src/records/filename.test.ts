import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isSafeRelativePath, MAX_SLUG_BYTES, recordPath, slugForTitle } from './filename.js';
import { sha256Hex } from './record.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('slugForTitle', () => {
  it.each([
    ['Hello World', 'hello-world'],
    ['  Hello,   World!  ', 'hello-world'],
    ['../../etc/passwd', 'etc-passwd'],
    ['/etc/passwd', 'etc-passwd'],
    ['C:\\Windows\\system32', 'c-windows-system32'],
    ['a/b\\c:d*e?f"g<h>i|j', 'a-b-c-d-e-f-g-h-i-j'],
    ['..', 'record'],
    ['.', 'record'],
    ['', 'record'],
    ['   \t\n ', 'record'],
    ['🎉🎉', 'record'],
    ['Party 🎉 time', 'party-time'],
    ['👩‍👩‍👧 family', 'family'],
    ['CON', 'con-record'],
    ['con', 'con-record'],
    ['Nul', 'nul-record'],
    ['aux.', 'aux-record'],
    ['COM1', 'com1-record'],
    ['lpt9', 'lpt9-record'],
    ['com¹', 'com¹-record'],
    ['com10', 'com10'],
    ['console', 'console'],
    ['Ünïcödé Straße', 'ünïcödé-straße'],
    ['ΑΘΗΝΑ', 'αθηνα'],
    ['İstanbul', 'i̇stanbul'],
    ['日本語のタイトル', '日本語のタイトル'],
    ['नमस्ते दुनिया', 'नमस्ते-दुनिया'],
    ['مرحبا بالعالم', 'مرحبا-بالعالم'],
    ['a\u0000b\u001fc\u007fd', 'a-b-c-d'],
    ['zero\u200bwidth', 'zero-width'],
    ['rtl\u202eoverride', 'rtl-override'],
    ['\u0301leading mark', 'leading-mark'],
    ['v1.2.3', 'v1-2-3'],
    ['snake_case-and-dash', 'snake-case-and-dash'],
  ])('%j -> %j', (title, slug) => {
    expect(slugForTitle(title)).toBe(slug);
  });

  it('NFD and NFC input give the same slug', () => {
    const nfc = 'Café Crème Brûlée Ångström'.normalize('NFC');
    const nfd = nfc.normalize('NFD');
    expect(nfd).not.toBe(nfc);
    expect(slugForTitle(nfd)).toBe(slugForTitle(nfc));
    expect(slugForTitle(nfd)).toBe('café-crème-brûlée-ångström');
    expect(slugForTitle('한국어'.normalize('NFD'))).toBe('한국어');
  });

  it('keeps combining marks that have no precomposed form', () => {
    expect(slugForTitle('q\u0307 x')).toBe('q\u0307-x');
  });

  it('limits very long titles to 80 UTF-8 bytes on a character boundary', () => {
    expect(slugForTitle('a'.repeat(500))).toBe('a'.repeat(80));
    const cjk = slugForTitle('語'.repeat(100)); // 3 bytes each
    expect(cjk).toBe('語'.repeat(26));
    const emojiMix = slugForTitle('é'.repeat(100)); // 2 bytes each
    expect(emojiMix).toBe('é'.repeat(40));
    // never ends with a dash after the cut
    expect(slugForTitle(`${'a'.repeat(79)} b`)).toBe('a'.repeat(79));
    // does not split a letter from its combining marks
    const s = slugForTitle(`${'a'.repeat(79)}q\u0307\u0323`);
    expect(s).toBe('a'.repeat(79));
  });

  it('cuts a single oversized grapheme on a code point boundary', () => {
    const zalgo = `a${'\u0301\u0302\u0303\u0304'.repeat(20)}`;
    const s = slugForTitle(zalgo);
    expect(bytes(s)).toBeLessThanOrEqual(MAX_SLUG_BYTES);
    expect(s.startsWith('á') || s.startsWith('a')).toBe(true);
    expect(slugForTitle(s)).toBe(s);
  });

  const titleArb = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: 'grapheme', maxLength: 120 }),
    fc.string({ unit: 'binary', maxLength: 120 }),
    fc.string({ unit: fc.constantFrom('a', 'A', 'é', 'e\u0301', 'İ', 'ß', 'ẞ', 'Σ', 'ς', '.', '/', '\\', ' ', '-', '\u0000', 'con', 'COM1', '🎉', '\u200d', '語', '\u0345', 'ǅ', 'ﬀ', 'K'), maxLength: 60 }),
  );

  it('property: output is a safe, bounded, NFC, idempotent file name segment', () => {
    fc.assert(
      fc.property(titleArb, (title) => {
        const slug = slugForTitle(title);
        expect(slug.length).toBeGreaterThan(0);
        expect(bytes(slug)).toBeLessThanOrEqual(MAX_SLUG_BYTES + '-record'.length);
        expect(isSafeRelativePath(slug)).toBe(true);
        expect(isSafeRelativePath(`${slug}.md`)).toBe(true);
        expect(slug).not.toMatch(/[/\\:*?"<>|\s.]/u);
        expect(slug).not.toMatch(/^-|-$|--/);
        expect(slug).toBe(slug.normalize('NFC'));
        expect(slug).toBe(slug.toLowerCase());
        expect(slugForTitle(slug)).toBe(slug);
      }),
      { numRuns: 2000 },
    );
  });

  it('property: canonically equivalent titles give the same slug', () => {
    fc.assert(
      fc.property(titleArb, (title) => {
        expect(slugForTitle(title.normalize('NFD'))).toBe(slugForTitle(title.normalize('NFC')));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('isSafeRelativePath', () => {
  it.each([
    ['private/pages/a.md', true],
    ['conversations/abc/claims/x.md', true],
    ['a', true],
    ['日本/é.md', true],
    ['', false],
    ['/etc/passwd', false],
    ['../x', false],
    ['a/../x', false],
    ['a/./x', false],
    ['.', false],
    ['..', false],
    ['a//b', false],
    ['a/', false],
    ['a\\b', false],
    ['C:/x', false],
    ['c:x', false],
    ['a\u0000b', false],
    ['a\nb', false],
    ['a\u007fb', false],
    ['a\u0085b', false],
    ['e\u0301.md', false],
    [`${'a'.repeat(255)}`, true],
    [`${'a'.repeat(256)}`, false],
    [`${'é'.repeat(128)}`, false],
    [Array.from({ length: 5 }, () => 'a'.repeat(200)).join('/'), true],
    [Array.from({ length: 6 }, () => 'a'.repeat(200)).join('/'), false],
    ['.hidden/x', true],
    ['a..b/x', true],
  ])('%j -> %s', (p, ok) => {
    expect(isSafeRelativePath(p)).toBe(ok);
  });

  it('a name the vault already has may be in another normal form (NFD, as macOS writes it); still nothing unsafe', () => {
    expect(isSafeRelativePath('private/e\u0301te\u0301.md', { existing: true })).toBe(true);
    expect(isSafeRelativePath('private/e\u0301te\u0301.md')).toBe(false);
    for (const bad of ['../e\u0301.md', '/e\u0301.md', 'a//e\u0301', 'e\u0301\n.md']) expect(isSafeRelativePath(bad, { existing: true }), bad).toBe(false);
  });
});

describe('recordPath', () => {
  const id = 'rec-42';
  const h8 = sha256Hex(id).slice(0, 8);
  const shard = (slug: string) => sha256Hex(slug).slice(0, 2);
  const sh = shard('hello');

  it('uses <partition>/<kind>s/<shard>/<slug>.md when free, the shard from the slug alone', () => {
    expect(recordPath({ partitionDir: 'private', kind: 'page', title: 'Hello World', id, taken: () => false })).toBe(
      `private/pages/${shard('hello-world')}/hello-world.md`,
    );
    expect(recordPath({ partitionDir: 'conversations/abc', kind: 'claim', title: '../../etc/passwd', id, taken: () => false })).toBe(
      `conversations/abc/claims/${shard('etc-passwd')}/etc-passwd.md`,
    );
    expect(recordPath({ partitionDir: 'private', kind: 'relationship', title: 'CON', id, taken: () => false })).toBe(
      `private/relationships/${shard('con-record')}/con-record.md`,
    );
  });

  it('follows a deterministic collision sequence', () => {
    const seen: string[] = [];
    const takenSet = new Set([
      `private/pages/${sh}/hello.md`,
      `private/pages/${sh}/hello-${h8}.md`,
      `private/pages/${sh}/hello-${h8}-2.md`,
      `private/pages/${sh}/hello-${h8}-3.md`,
    ]);
    const p = recordPath({
      partitionDir: 'private',
      kind: 'page',
      title: 'Hello',
      id,
      taken: (c) => {
        seen.push(c);
        return takenSet.has(c);
      },
    });
    expect(p).toBe(`private/pages/${sh}/hello-${h8}-4.md`);
    expect(seen).toEqual([...takenSet, p]);
    // same inputs -> same answer
    expect(recordPath({ partitionDir: 'private', kind: 'page', title: 'Hello', id, taken: (c) => takenSet.has(c) })).toBe(p);
    // a different id gets a different hash suffix
    const o8 = sha256Hex('other').slice(0, 8);
    const other = recordPath({ partitionDir: 'private', kind: 'page', title: 'Hello', id: 'other', taken: (c) => c === `private/pages/${sh}/hello.md` });
    expect(other).toBe(`private/pages/${sh}/hello-${o8}.md`);
    // the same slug is in the same shard whatever the id or the title's spelling
    expect(recordPath({ partitionDir: 'private', kind: 'page', title: 'HELLO!', id: 'x', taken: () => false })).toBe(`private/pages/${sh}/hello.md`);
  });

  it('rejects unsafe partition directories', () => {
    for (const partitionDir of ['', '/abs', '../up', 'a//b', 'a\\b']) {
      expect(() => recordPath({ partitionDir, kind: 'page', title: 'x', id, taken: () => false })).toThrow(
        expect.objectContaining({ code: 'E_INTERNAL' }),
      );
    }
  });

  it('property: result is safe, in the slug\'s shard of the kind folder and ends in .md', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.integer({ min: 0, max: 5 }), (title, collisions) => {
        let n = 0;
        const p = recordPath({ partitionDir: 'conversations/s1', kind: 'claim', title, id, taken: () => n++ < collisions });
        expect(isSafeRelativePath(p)).toBe(true);
        expect(p.startsWith(`conversations/s1/claims/${shard(slugForTitle(title))}/`)).toBe(true);
        expect(p.endsWith('.md')).toBe(true);
        expect(p.split('/')).toHaveLength(5);
      }),
      { numRuns: 300 },
    );
  });
});

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import YAML from 'yaml';
import { parseRecordText } from '../records/record.js';
import { fastParseRecord } from './frontmatter.js';

/** The fast path must answer exactly like the full parser, or not at all. */
function agrees(text: string): boolean {
  const fast = fastParseRecord(text);
  if (fast === null) return false;
  const full = parseRecordText(text);
  expect(full.ok, `full parser rejected what the fast path accepted:\n${text}`).toBe(true);
  if (!full.ok) return true;
  expect(fast.data).toStrictEqual(full.file.data);
  expect(fast.body).toBe(full.file.body);
  return true;
}

const STORE_WRITTEN = `---
format: knowledge-record-v1
id: rec-mx68kvij-93c2d2fe38
revision: 1
scope: private
recorded_at: "2026-12-02T14:43:55.120Z"
updated_at: "2026-12-02T14:43:55.120Z"
lifecycle: active
kind: claim
claim_kind: fact
title: "Water: boils"
tags: [ a, b ]
aliases:
  - x
evidence:
  - source: src-7b62626cd1ded1b2403af6d8
    lines: [ 1, 2 ]
    quote: "it boils"
---
body
`;

describe('fast frontmatter path [SCAN-4]', () => {
  it('reads a record as Knowledge writes it, equal to the full YAML parser', () => {
    expect(agrees(STORE_WRITTEN)).toBe(true);
    expect(fastParseRecord(STORE_WRITTEN)!.data.evidence).toEqual([{ source: 'src-7b62626cd1ded1b2403af6d8', lines: [1, 2], quote: 'it boils' }]);
  });

  it('reads hand-written plain scalars, timestamps and an empty body', () => {
    const text = '---\nformat: knowledge-record-v1\nid: n1\nrevision: 12\nkind: page\ntitle: Bob\'s notes, part 2\nrecorded_at: 2026-01-01T00:00:00Z\nempty: []\nflag: true\nnothing: null\n---';
    expect(agrees(text)).toBe(true);
    expect(fastParseRecord(text)!.data).toMatchObject({ revision: 12, title: "Bob's notes, part 2", recorded_at: '2026-01-01T00:00:00Z', empty: [], flag: true, nothing: null });
  });

  const fallbacks: Array<[string, string]> = [
    ['CRLF line ends', '---\r\nkind: page\r\n---\r\n'],
    ['a comment', '---\nkind: page # a page\n---\n'],
    ['an anchor', '---\nkind: &k page\n---\n'],
    ['an escaped string', '---\ntitle: "a\\tb"\n---\n'],
    ['a float', '---\nx: 1.5\n---\n'],
    ['a leading-zero number', '---\nx: 007\n---\n'],
    ['a date-like scalar', '---\nx: 2026-01-01\n---\n'],
    ['a duplicate key', '---\na: 1\na: 2\n---\n'],
    ['a nested mapping', '---\nx:\n  y: 1\n---\n'],
    ['a multi-line scalar', '---\ntitle: a\n  b\n---\n'],
    ['an empty value', '---\nx:\n---\n'],
    ['a key named null', '---\nnull: 1\n---\n'],
    ['__proto__', '---\n__proto__: 1\n---\n'],
    ['empty frontmatter', '---\n---\nbody\n'],
    ['a block scalar', '---\nx: |\n  text\n---\n'],
    ['a tab', '---\nx:\ty\n---\n'],
    ['brackets in a plain scalar', '---\ntitle: a [b]\n---\n'],
    ['a closing line with trailing text', '---\nx: 1\n--- no\n---\n'],
    // YAML limits an implicit key to 1024 characters: the full parser refuses these.
    ['a key of 1025 characters', `---\n${'k'.repeat(1025)}: v\n---\n`],
    ['a list item\'s key of 1025 characters', `---\nx:\n  - ${'k'.repeat(1025)}: v\n---\n`],
    ['a list item\'s second key of 1025 characters', `---\nx:\n  - a: 1\n    ${'k'.repeat(1025)}: v\n---\n`],
  ];
  it('reads a key of 1024 characters, as the full parser does', () => {
    const text = `---\n${'k'.repeat(1024)}: v\nx:\n  - ${'a'.repeat(1024)}: 1\n    ${'b'.repeat(1024)}: 2\n---\n`;
    const full = parseRecordText(text);
    expect(full.ok).toBe(true);
    expect(fastParseRecord(text)!.data).toEqual(full.ok ? full.file.data : null);
  });

  for (const [name, text] of fallbacks) {
    it(`leaves ${name} to the full parser`, () => {
      expect(fastParseRecord(text)).toBeNull();
    });
  }

  it('never disagrees with the full parser (property)', () => {
    const alphabet = 'aZ09 :#-.,[]{}"\'\\&*!|>%@`~?é+_eExXoO/()\u00a0\t';
    const chars = fc.string({ unit: fc.constantFrom(...alphabet.split('')), maxLength: 14 });
    const nice = fc.string({ unit: fc.constantFrom(...'abcXYZ019 -_./é'.split('')), minLength: 1, maxLength: 12 });
    const scalarText = fc.oneof(
      { arbitrary: nice, weight: 8 },
      { arbitrary: nice.map((s) => `"${s}"`), weight: 2 },
      { arbitrary: chars, weight: 1 },
      { arbitrary: chars.map((s) => `"${s}"`), weight: 1 },
      { arbitrary: chars.map((s) => `'${s}'`), weight: 1 },
      { arbitrary: fc.constantFrom('null', 'Null', 'NULL', 'true', 'False', 'yes', 'on', '~', '0', '00', '12', '1e3', '0x1F', '0o7', '.5', '-1', '+1', '.inf', '.nan', '2026-01-01T00:00:00Z', 'a: b', 'a:b', 'x #y', 'x#y', 'http://x'), weight: 2 },
    );
    const flowList = fc.array(scalarText, { maxLength: 3 }).map((xs) => (xs.length === 0 ? '[]' : `[ ${xs.join(', ')} ]`));
    const key = fc.constantFrom('title', 'tags', 'a-b', '_x', 'null', 'true', 'Yes', 'on', 'k1', 'x_y');
    const line = fc.oneof(
      fc.tuple(key, fc.oneof(scalarText, flowList)).map(([k, v]) => `${k}: ${v}`),
      fc.tuple(key, fc.array(scalarText, { minLength: 1, maxLength: 3 })).map(([k, xs]) => `${k}:\n${xs.map((x) => `  - ${x}`).join('\n')}`),
      fc.tuple(key, fc.array(fc.tuple(key, scalarText), { minLength: 1, maxLength: 3 })).map(
        ([k, kvs]) => `${k}:\n  - ${kvs.map(([kk, v]) => `${kk}: ${v}`).join('\n    ')}`,
      ),
    );
    const doc = fc.tuple(fc.array(line, { minLength: 1, maxLength: 5 }), fc.constantFrom('', 'body\n', '---\nmore\n')).map(
      ([lines, body]) => `---\n${lines.join('\n')}\n---\n${body}`,
    );
    let accepted = 0;
    fc.assert(fc.property(doc, (text) => {
      if (agrees(text)) accepted++;
    }), { numRuns: 3000 });
    // The property must exercise the fast path, not only its fallbacks.
    expect(accepted).toBeGreaterThan(150);
  });

  it('agrees on integers it reads', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (n) => {
      const text = `---\nrevision: ${n}\n---\n`;
      const fast = fastParseRecord(text);
      if (fast) expect(fast.data.revision).toBe(YAML.parse(`revision: ${n}`, { version: '1.2', schema: 'core' }).revision);
    }));
  });
});

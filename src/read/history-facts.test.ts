/**
 * versionFacts reads each committed version's id and revision with the scan's
 * fast frontmatter parser where it answers, and the full parser elsewhere:
 * the answers must be exactly those of the full parse alone (the code before),
 * and the full parser must not run for files in the fast subset.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';

const calls = vi.hoisted(() => ({ full: 0 }));
vi.mock('../records/record.js', async (importOriginal) => {
  const orig = await importOriginal<typeof import('../records/record.js')>();
  return { ...orig, parseRecordText: (text: string) => { calls.full++; return orig.parseRecordText(text); } };
});

const { parseRecordText } = await import('../records/record.js');
const { versionFacts } = await import('./history-parse.js');

/** versionFacts as it was: every version through the full parser. */
function fullFacts(bytes: Buffer): { id: string | null; revision: number | null } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { id: null, revision: null };
  }
  const parsed = parseRecordText(text);
  if (!parsed.ok) return { id: null, revision: null };
  const { id, revision } = parsed.file.data;
  return {
    id: typeof id === 'string' ? id : null,
    revision: typeof revision === 'number' && Number.isSafeInteger(revision) && revision > 0 ? revision : null,
  };
}

const STORE_WRITTEN = `---
format: knowledge-record-v1
id: rec-mx68kvij-93c2d2fe38
revision: 7
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
---
more
`;

/** [text, whether the fast path answers for it, expected facts]. */
const CASES: Array<[string, boolean, { id: string | null; revision: number | null }]> = [
  [STORE_WRITTEN, true, { id: 'rec-mx68kvij-93c2d2fe38', revision: 7 }],
  ['---\nid: "rec-1"\nrevision: 2\n---\n', true, { id: 'rec-1', revision: 2 }],
  ["---\nid: 'rec-1'\nrevision: 2\n---\n", true, { id: 'rec-1', revision: 2 }],
  ['---\nid: rec-1\nrevision: "3"\n---\n', true, { id: 'rec-1', revision: null }],
  ["---\nid: rec-1\nrevision: '3'\n---\n", true, { id: 'rec-1', revision: null }],
  ['---\nid: rec-1\nrevision: 0\n---\n', true, { id: 'rec-1', revision: null }],
  ['---\nid: rec-1\nrevision: 9007199254740993\n---\n', false, { id: 'rec-1', revision: null }],
  ['---\nid: rec-1\nrevision: 3.0\n---\n', false, { id: 'rec-1', revision: 3 }],
  ['---\nid: rec-1\nrevision: 1e3\n---\n', false, { id: 'rec-1', revision: 1000 }],
  ['---\nid: rec-1\nrevision: 0x1F\n---\n', false, { id: 'rec-1', revision: 31 }],
  ['---\nid: rec-1\nrevision: 007\n---\n', false, { id: 'rec-1', revision: 7 }],
  ['---\nid: rec-1\nrevision: -1\n---\n', false, { id: 'rec-1', revision: null }],
  ['---\nid: rec-1\nrevision: !!int "5"\n---\n', false, { id: 'rec-1', revision: 5 }],
  ['---\nid: null\nrevision: 2\n---\n', true, { id: null, revision: 2 }],
  ['---\nid: 123\nrevision: 2\n---\n', true, { id: null, revision: 2 }],
  ['---\nid: [ rec-1 ]\nrevision: 2\n---\n', true, { id: null, revision: 2 }],
  ['---\nId: rec-1\nrevision: 2\n---\n', true, { id: null, revision: 2 }],
  // YAML anchors and aliases: the full parser resolves them.
  ['---\nbase: &b rec-9\nid: *b\nrevision: 4\n---\n', false, { id: 'rec-9', revision: 4 }],
  ['---\nid: &i rec-1\nrevision: &r 4\nold: *r\n---\n', false, { id: 'rec-1', revision: 4 }],
  // A BOM is refused by the full parser: no facts.
  ['\ufeff---\nid: rec-1\nrevision: 2\n---\n', false, { id: null, revision: null }],
  // CRLF files are records; the fast path leaves them to the full parser.
  ['---\r\nid: rec-1\r\nrevision: 2\r\n---\r\nbody\r\n', false, { id: 'rec-1', revision: 2 }],
  ['---\nid: rec-1 # a comment\nrevision: 2 # another\n---\n', false, { id: 'rec-1', revision: 2 }],
  ['---\nid: "rec\\u002d1"\nrevision: 2\n---\n', false, { id: 'rec-1', revision: 2 }],
  ['---\nid: "\\ud800"\nrevision: 2\n---\n', false, { id: null, revision: null }],
  ['---\nid: |\n  rec-1\nrevision: 2\n---\n', false, { id: 'rec-1\n', revision: 2 }],
  ['---\nid: >-\n  rec-1\nrevision: 2\n---\n', false, { id: 'rec-1', revision: 2 }],
  ['---\n{ id: rec-1, revision: 2 }\n---\n', false, { id: 'rec-1', revision: 2 }],
  ['---\nid:   rec-1\nrevision:    2\n---\n', false, { id: 'rec-1', revision: 2 }],
  ['---\nid: rec-1\nrevision: 2\ntitle: a: b\n---\n', false, { id: null, revision: null }],
  ['---\nid: rec-1\nid: rec-2\nrevision: 2\n---\n', false, { id: null, revision: null }],
  ['---\nid: rec-1\nrevision: 2\n---  \nbody\n', false, { id: null, revision: null }],
  ['---\nid: rec-1\nrevision: 2\n--- \n---\n', false, { id: null, revision: null }],
  ['---\nid: rec-1\n\trevision: 2\n---\n', false, { id: null, revision: null }],
  ['---\n---\n', false, { id: null, revision: null }],
  ['---\nid: rec-1\n', false, { id: null, revision: null }],
  ['id: rec-1\n', false, { id: null, revision: null }],
  ['---\n- id\n---\n', false, { id: null, revision: null }],
  ['---\n%YAML 1.2\n---\n', false, { id: null, revision: null }],
  ['', false, { id: null, revision: null }],
];

describe('[READ-2] version facts: fast where exact, full parse elsewhere', () => {
  beforeEach(() => {
    calls.full = 0;
  });

  it.each(CASES.map(([text, fast, want], i) => ({ i, text, fast, want })))('case $i', ({ text, fast, want }) => {
    const bytes = Buffer.from(text, 'utf8');
    const got = versionFacts(bytes);
    const fullCalls = calls.full;
    expect(got).toEqual(want);
    expect(got).toEqual(fullFacts(bytes));
    // The full parser runs exactly where the fast path does not answer.
    expect(fullCalls).toBe(fast ? 0 : 1);
  });

  it('bytes that are not UTF-8 have no facts, and are not parsed', () => {
    expect(versionFacts(Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0xfe]))).toEqual({ id: null, revision: null });
    expect(calls.full).toBe(0);
  });

  it('agrees with the full parse on generated frontmatter', () => {
    const scalar = fc.oneof(
      { arbitrary: fc.constantFrom('rec-1', 'rec-2', '"rec-1"', '1', '2', '"2"'), weight: 6 },
      fc.constantFrom('rec-1', '"rec-1"', "'rec-1'", 'rec-2', '1', '2', '12', '0', '007', '3.0', '1e3', '0x1F', '-1', '"3"', "'3'",
        'null', '~', 'true', 'yes', '[ rec-1 ]', '[]', '&a rec-1', '*a', '!!str 3', 'rec-1 # c', '"\\u0041"', 'a: b', "'it''s'"),
      fc.stringMatching(/^[a-z0-9 :#'"-]{0,8}$/),
    );
    const key = fc.constantFrom('id', 'revision', 'title', 'Id', 'id2');
    const line = fc.oneof(
      { arbitrary: fc.tuple(key, scalar).map(([k, v]) => `${k}: ${v}`), weight: 6 },
      fc.tuple(key, scalar).map(([k, v]) => `${k}: ${v}`),
      fc.tuple(key, fc.array(scalar, { minLength: 1, maxLength: 2 })).map(([k, xs]) => `${k}:\n${xs.map((x) => `  - ${x}`).join('\n')}`),
      fc.constantFrom('# comment', 'x: &a rec-3', 'y: *a'),
    );
    const doc = fc.tuple(fc.array(line, { minLength: 1, maxLength: 4 }), fc.constantFrom('\n', '\n', '\n', '\r\n'), fc.constantFrom('', 'body\n', '---\nmore\n'), fc.integer({ min: 0, max: 4 }).map((n) => n === 0)).map(
      ([lines, eol, body, bom]) => `${bom ? '\ufeff' : ''}---${eol}${lines.join(eol)}${eol}---${eol}${body}`,
    );
    let fast = 0;
    fc.assert(fc.property(doc, (text) => {
      const bytes = Buffer.from(text, 'utf8');
      calls.full = 0;
      const got = versionFacts(bytes);
      if (calls.full === 0) fast++;
      expect(got).toEqual(fullFacts(bytes));
    }), { numRuns: 3000 });
    // Both paths must be exercised.
    expect(fast).toBeGreaterThan(100);
    expect(fast).toBeLessThan(3000);
  });
});

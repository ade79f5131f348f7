import { describe, expect, it } from 'vitest';
import { MAX_YAML_DEPTH, collectionDepth, parseRecordText, sha256Hex, validateDraft } from '../records/record.js';
import { sourceIdFor } from '../evidence/source.js';
import { isKnowledgeError } from '../errors.js';
import { decodeBase64, evidenceFromItems, recordTexts, rememberParts, structuredRecordText } from './records-input.js';
import { MCP_LIMITS } from './schemas.js';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return isKnowledgeError(err) ? err.code : 'not a KnowledgeError';
  }
  return undefined;
}

function frontmatter(text: string): Record<string, unknown> {
  const r = parseRecordText(text);
  if (!r.ok) throw new Error(r.reason);
  validateDraft(r.file);
  return r.file.data;
}

describe('structured records become record files a caller would write (Appendix A)', () => {
  it('writes the fields as YAML 1.2 frontmatter that the record parser reads back unchanged, body kept exactly', () => {
    const text = structuredRecordText({
      kind: 'claim', title: 'yes: "quoted" # not a comment', claim_kind: 'decision', tags: ['no', '2024-01-01'], aliases: ['null'],
      body: '# Why\n\nBecause.\n', fields: { 'x-owner': { team: 'core', n: 3 } }, evidence: [{ source: 'src-abc', lines: [2, 4], quote: 'Because' }],
    }, new Map(), 'record #1');
    const fm = frontmatter(text);
    expect(fm).toEqual({
      kind: 'claim', title: 'yes: "quoted" # not a comment', claim_kind: 'decision', tags: ['no', '2024-01-01'], aliases: ['null'],
      'x-owner': { team: 'core', n: 3 }, evidence: [{ source: 'src-abc', lines: [2, 4], quote: 'Because' }],
    });
    expect(text.endsWith('---\n# Why\n\nBecause.\n')).toBe(true);
  });

  it('is deterministic: the same arguments give the same bytes (a retried request id keeps its hash) [PUB-5]', () => {
    const rec = { kind: 'page' as const, title: 'T', tags: ['a'], body: 'b' };
    expect(structuredRecordText(rec, new Map(), 'r')).toBe(structuredRecordText({ ...rec }, new Map(), 'r'));
  });

  it('resolves a citation by evidence file name to the content-addressed source id', () => {
    const { sourceByName } = evidenceFromItems([{ name: 'notes.txt', text: 'hello\n' }]);
    const text = structuredRecordText({ kind: 'claim', title: 'Hi', claim_kind: 'fact', evidence: [{ file: 'notes.txt' }] }, sourceByName, 'r');
    expect(frontmatter(text).evidence).toEqual([{ source: sourceIdFor(sha256Hex('hello\n')) }]);
  });

  it('refuses a citation naming no evidence item, or naming both source and file (E_VALIDATION)', () => {
    expect(codeOf(() => structuredRecordText({ kind: 'claim', title: 'x', claim_kind: 'fact', evidence: [{ file: 'missing.txt' }] }, new Map(), 'r'))).toBe('E_VALIDATION');
    expect(codeOf(() => structuredRecordText({ kind: 'claim', title: 'x', claim_kind: 'fact', evidence: [{ file: 'a', source: 'src-1' }] }, new Map([['a', 'src-2']]), 'r'))).toBe('E_VALIDATION');
  });

  it('refuses standard or store-owned keys smuggled in through fields', () => {
    for (const key of ['scope', 'revision', 'format', 'id', 'updated_at']) {
      expect(codeOf(() => structuredRecordText({ kind: 'page', title: 'x', fields: { [key]: 'v' } }, new Map(), 'r')), key).toBe('E_VALIDATION');
    }
  });

  it('refuses a field named __proto__ (as JSON gives it) instead of dropping it without a word', () => {
    const rec = JSON.parse('{"kind":"page","title":"x","fields":{"__proto__":{"a":1}}}') as Parameters<typeof structuredRecordText>[0];
    expect(codeOf(() => structuredRecordText(rec, new Map(), 'r'))).toBe('E_VALIDATION');
  });

  it('refuses fields nested past the depth any record reader accepts, however deep, as E_VALIDATION [REC-3]', () => {
    const nested = (levels: number, leaf: unknown = 1): unknown => {
      let v = leaf;
      for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { a: v };
      return v;
    };
    // The frontmatter mapping is level 1: a field may nest 199 more, and the file is read back unchanged.
    const deepest = nested(MAX_YAML_DEPTH - 1);
    expect(frontmatter(structuredRecordText({ kind: 'page', title: 'x', fields: { deep: deepest } }, new Map(), 'r')).deep).toEqual(deepest);
    for (const levels of [MAX_YAML_DEPTH, 100_000]) {
      let err: unknown;
      try {
        structuredRecordText({ kind: 'page', title: 'x', fields: { deep: nested(levels) } }, new Map(), 'record #2');
      } catch (e) {
        err = e;
      }
      expect(isKnowledgeError(err) && err.code, `${levels} levels`).toBe('E_VALIDATION');
      expect((err as Error).message).toMatch(/^record #2: fields\.deep nests arrays and objects more than 199 levels deep/);
    }
    // Scalars are no level, an empty collection is one; past the limit the count stops at limit + 1.
    expect(collectionDepth({ a: [], b: 'x' })).toBe(2);
    expect(collectionDepth('x')).toBe(0);
    expect(collectionDepth(nested(5), 3)).toBe(4);
  });

  it('passes Markdown records through byte for byte', () => {
    const md = '---\nkind: page\ntitle: As written\n---\nbody\n';
    expect(recordTexts([{ markdown: md }, { kind: 'page', title: 'B' }], new Map())[0]).toBe(md);
  });
});

describe('inline evidence', () => {
  it('decodes text as UTF-8 and base64 strictly', () => {
    const { evidence } = evidenceFromItems([{ name: 'a.txt', text: 'é' }, { name: 'b.bin', base64: Buffer.from([0, 255, 1]).toString('base64'), media_type: 'application/octet-stream', attribution: 'me' }]);
    expect(evidence[0]!.bytes).toEqual(Buffer.from('é', 'utf8'));
    expect(evidence[1]).toEqual({ name: 'b.bin', bytes: Buffer.from([0, 255, 1]), mediaType: 'application/octet-stream', attribution: 'me' });
  });

  it('refuses base64 with bad characters, whitespace or padding instead of silently dropping bytes', () => {
    for (const bad of ['ab$d', 'YWJj ZA==', 'YWJjZA=', 'Y']) expect(codeOf(() => decodeBase64(bad, 'x')), bad).toBe('E_VALIDATION');
    expect(decodeBase64('', 'x')).toEqual(Buffer.alloc(0));
    // The largest the tools accept (a 4 MiB chunk, 8 MiB of evidence), and past them: no stack overflow on the way.
    for (const size of [4 * 1024 * 1024, 8 * 1024 * 1024, 8 * 1024 * 1024 + 2]) {
      const bytes = Buffer.alloc(size, 7);
      expect(decodeBase64(bytes.toString('base64'), 'x').equals(bytes), String(size)).toBe(true);
      expect(codeOf(() => decodeBase64(`${bytes.toString('base64')} `, 'x')), String(size)).toBe('E_VALIDATION');
    }
  });

  it('refuses two items of one name, directories in names, and items with both or neither of text/base64', () => {
    expect(codeOf(() => evidenceFromItems([{ name: 'a', text: '1' }, { name: 'a', text: '2' }]))).toBe('E_VALIDATION');
    expect(codeOf(() => evidenceFromItems([{ name: '../a', text: '1' }]))).toBe('E_VALIDATION');
    expect(codeOf(() => evidenceFromItems([{ name: 'a', text: '1', base64: 'MQ==' }]))).toBe('E_VALIDATION');
    expect(codeOf(() => evidenceFromItems([{ name: 'a' }]))).toBe('E_VALIDATION');
  });

  it('refuses text holding a lone surrogate (UTF-8 would keep U+FFFD in its place), naming the item and field', () => {
    expect(() => evidenceFromItems([{ name: 'a.txt', text: 'src \udfff text' }])).toThrow(/^evidence #1 \("a\.txt"\): text holds a lone UTF-16 surrogate \(\\udfff\)/);
    expect(codeOf(() => evidenceFromItems([{ name: 'a.txt', text: 'src \udfff text' }]))).toBe('E_VALIDATION');
    expect(evidenceFromItems([{ name: 'a.txt', text: '\ud83d\ude00' }]).evidence[0]!.bytes).toEqual(Buffer.from('😀', 'utf8'));
  });

  it('is E_TOO_LARGE past the inline limit of one call', () => {
    const half = 'x'.repeat(MCP_LIMITS.inlineEvidenceBytes / 2);
    expect(codeOf(() => evidenceFromItems([{ name: 'a', text: half }, { name: 'b', text: half }]))).toBeUndefined();
    expect(codeOf(() => evidenceFromItems([{ name: 'a', text: half }, { name: 'b', text: half + 'y' }]))).toBe('E_TOO_LARGE');
  });
});

describe('knowledge_remember', () => {
  it('refuses a lone surrogate in source_text, source_name or attribution, naming the argument', () => {
    for (const [field, args] of [
      ['source_text', { source_text: 'a\udfff' }], ['source_name', { source_text: 't', source_name: 'n\ud800' }], ['attribution', { source_text: 't', attribution: '\udc00' }],
    ] as const) {
      expect(() => rememberParts({ claim: 'c', ...args }), field).toThrow(new RegExp(`^${field} holds a lone UTF-16 surrogate`));
      expect(codeOf(() => rememberParts({ claim: 'c', ...args })), field).toBe('E_VALIDATION');
    }
  });

  it('makes one fact claim citing its source text (with the quote), the source kept as source.txt', () => {
    const { records, evidence } = rememberParts({ claim: 'The build uses Node 20', source_text: 'We pinned Node 20.', quote: 'pinned Node 20', tags: ['ci'] });
    expect(evidence).toEqual([{ name: 'source.txt', bytes: Buffer.from('We pinned Node 20.') }]);
    expect(frontmatter(records[0]!)).toEqual({
      kind: 'claim', claim_kind: 'fact', title: 'The build uses Node 20', tags: ['ci'],
      evidence: [{ source: sourceIdFor(sha256Hex('We pinned Node 20.')), quote: 'pinned Node 20' }],
    });
  });
});

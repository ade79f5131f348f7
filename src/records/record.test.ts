import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import YAML from 'yaml';
import { KnowledgeError } from '../errors.js';
import {
  completeDraft,
  draftExpectedRevision,
  isUtcTimestamp,
  isValidId,
  parseRecordBytes,
  parseRecordText,
  requiresEvidence,
  serializeRecord,
  sha256Hex,
  validateStored,
  withDefaultCitations,
  type ParsedFile,
} from './record.js';
import { RECORD_FORMAT, STORE_OWNED_KEYS } from './types.js';

const NOW = '2024-05-01T10:00:00.000Z';
const LATER = '2024-05-02T11:30:00.000Z';
const FILL = { id: 'rec-1', revision: 1, scope: 'private', now: NOW };

function parse(text: string): ParsedFile {
  const r = parseRecordText(text);
  if (!r.ok) throw new Error(`expected ok parse: ${r.reason}`);
  return r.file;
}

function expectValidation(fn: () => unknown, field: string): KnowledgeError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KnowledgeError);
    const e = err as KnowledgeError;
    expect(e.code).toBe('E_VALIDATION');
    expect(e.message).toContain(`${field}:`);
    return e;
  }
  throw new Error('expected E_VALIDATION');
}

describe('parseRecordText envelopes', () => {
  it.each([
    ['no frontmatter', '# Title\n\nbody\n', /must begin with a "---" line/],
    ['empty text', '', /must begin/],
    ['leading blank line', '\n---\nkind: page\n---\n', /must begin/],
    ['BOM', '\uFEFF---\nkind: page\n---\n', /byte order mark/],
    ['unclosed', '---\nkind: page\ntitle: x\n', /unclosed/],
    ['unclosed, only opener', '---\n', /unclosed/],
    ['closing line with trailing text', '---\nkind: page\n--- \nbody', /unclosed/],
    ['YAML syntax error', '---\nkind: [page\ntitle: x\n---\n', /invalid YAML frontmatter \(line \d+\)/],
    ['bad indentation', '---\nkind: page\n  title: x\n---\n', /invalid YAML frontmatter/],
    ['nested past the parser\'s stack', `---\nkind: page\nx: ${'['.repeat(5000)}${']'.repeat(5000)}\n---\n`, /invalid YAML frontmatter \(line 3\): collections are nested too deeply to read$/],
    ['scalar frontmatter', '---\njust a string\n---\n', /must be a YAML mapping/],
    ['list frontmatter', '---\n- a\n- b\n---\n', /must be a YAML mapping/],
    ['empty frontmatter', '---\n---\nbody\n', /must be a YAML mapping/],
    ['duplicate keys', '---\nkind: page\ntitle: a\ntitle: b\n---\n', /unique/],
    ['nested duplicate keys', '---\nkind: page\nx:\n  a: 1\n  a: 2\n---\n', /unique/],
    ['duplicate keys in a map inside a list', '---\nkind: page\nx:\n  - a: 1\n    a: 2\n---\n', /unique/],
    // An alias as a key names the key it aliases: here the store-owned updated_at, a second time (after toJS, the
    // later value would win over the one the store writes).
    ['an alias as a key', '---\nkind: page\ntitle: t\nx: &k updated_at\n*k : "1999-01-01T00:00:00Z"\n---\n', /line 5\): a YAML alias \(\*name\) cannot be a key/],
    ['a collection as a key', '---\nkind: page\ntitle: t\n? [a]\n: 1\n---\n', /line 4\): a collection cannot be a key/],
    // One key once read: the boolean true and the string "true", the number 1 and the string "1".
    ['true and "true"', '---\nkind: page\ntrue: 1\n"true": 2\n---\n', /line 4\): Map keys must be unique: "true" twice/],
    ['1 and "1"', '---\nkind: page\n1: a\n"1": b\n---\n', /unique/],
    // UTF-8 cannot hold a lone surrogate: SQLite would get bytes that are no text, the file U+FFFD in its place.
    ['a lone surrogate escaped in a title', '---\nkind: page\ntitle: "a\\ud800b"\n---\n', /^invalid YAML frontmatter: "a\\ud800b" holds a lone UTF-16 surrogate \(\\ud800\)/],
    ['a lone surrogate escaped in a nested key', '---\nkind: page\nx:\n  - "\\udfff": 1\n---\n', /lone UTF-16 surrogate \(\\udfff\)/],
    ['a lone surrogate in the text', '---\nkind: page\ntitle: t\n---\nbody \ud800 here\n', /^record text holds a lone UTF-16 surrogate \(\\ud800\)/],
    ['tab indentation', '---\nkind: page\nx:\n\t- a\n---\n', /invalid YAML/],
    // Written back, these would end the frontmatter early: the stored file would not be a record.
    ['a "---" of its own inside (trailing space)', '---\n--- \nkind: page\ntitle: x\n---\nbody\n', /without a "---" marker or % directives/],
    ['a "---" with a comment inside', '---\n--- # c\nkind: page\ntitle: x\n---\n', /without a "---" marker/],
    ['a %YAML directive', '---\n%YAML 1.2\n--- \nkind: page\ntitle: x\n---\n', /% directives/],
    ['a %TAG directive', '---\n%TAG !e! tag:example.com:\n--- \nkind: page\ntitle: x\n---\n', /% directives/],
  ])('%s -> ok:false', (_name, text, reason) => {
    const r = parseRecordText(text);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.reason).toMatch(reason);
      expect(r.reason).not.toContain('\n');
    }
  });

  it('finds a duplicate among 100k keys (a 1 MiB record), in one pass over them', () => {
    // The parser's own check compared each key with every earlier one: minutes for this record, past the
    // unit tests' 20 s limit; one pass takes about a second.
    const keys = Array.from({ length: 100_000 }, (_, i) => `k${i}: 1\n`).join('');
    const r = parseRecordText(`---\nkind: page\ntitle: t\n${keys}k5: 2\n---\n`);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(/line 100004\): Map keys must be unique: "k5" twice/);
  });

  it('reports the YAML error line counted from the top of the file', () => {
    const r = parseRecordText('---\nkind: page\ntitle: a\ntitle: b\n---\n');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain('line 4');
  });

  it('accepts LF and CRLF, keeps the body exactly', () => {
    const body = '\n# Heading\r\n\n---\nnot frontmatter\n';
    for (const nl of ['\n', '\r\n']) {
      const text = `---${nl}kind: page${nl}title: Hello${nl}---${nl}${body}`;
      const f = parse(text);
      expect(f.data).toEqual({ kind: 'page', title: 'Hello' });
      expect(f.body).toBe(body);
    }
  });

  it('accepts a closing line at end of file without newline (empty body)', () => {
    const f = parse('---\nkind: page\n---');
    expect(f.body).toBe('');
    expect(f.data.kind).toBe('page');
  });

  it('keeps dates and date-like values as strings (YAML 1.2 core)', () => {
    const f = parse('---\nd: 2024-01-01\nt: 2024-01-01T00:00:00Z\nn: 012\nb: yes\nx: ~\n---\n');
    expect(f.data).toEqual({ d: '2024-01-01', t: '2024-01-01T00:00:00Z', n: 12, b: 'yes', x: null });
  });

  it('parseRecordBytes rejects invalid UTF-8 and BOM', () => {
    expect(parseRecordBytes(Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a])).ok).toBe(false);
    expect(parseRecordBytes(Buffer.from('\uFEFF---\nkind: page\n---\n', 'utf8')).ok).toBe(false);
    expect(parseRecordBytes(Buffer.from('---\nkind: page\n---\n', 'utf8')).ok).toBe(true);
  });

  it('does not expand alias bombs', () => {
    const lines = ['---', 'a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 12; i++) {
      const prev = i === 0 ? 'a' : `l${i - 1}`;
      lines.push(`l${i}: &l${i} [*${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}, *${prev}]`);
    }
    lines.push('---', '');
    const r = parseRecordText(lines.join('\n'));
    expect(r.ok).toBe(false);
  });
});

describe('predicates', () => {
  it.each([
    ['a', true],
    ['A1', true],
    ['0', true],
    ['rec_1.v2:x-y', true],
    ['x'.repeat(128), true],
    ['x'.repeat(129), false],
    ['', false],
    ['-a', false],
    ['.a', false],
    ['a b', false],
    ['a/b', false],
    ['é', false],
  ])('isValidId(%j) = %s', (id, ok) => {
    expect(isValidId(id)).toBe(ok);
  });
  it('isValidId rejects non-strings', () => {
    expect(isValidId(12)).toBe(false);
    expect(isValidId(null)).toBe(false);
  });

  it.each([
    ['2024-01-31T12:00:00Z', true],
    ['2024-01-31T12:00:00.123Z', true],
    ['2024-02-29T00:00:00Z', true],
    ['2023-02-29T00:00:00Z', false],
    ['2024-13-01T00:00:00Z', false],
    ['2024-04-31T00:00:00Z', false],
    ['2024-01-31T24:00:00Z', false],
    ['2024-01-31T12:60:00Z', false],
    ['2024-01-31T12:00:00', false],
    ['2024-01-31T12:00:00+00:00', false],
    ['2024-01-31 12:00:00Z', false],
    ['2024-01-31', false],
    ['0099-01-01T00:00:00Z', true],
  ])('isUtcTimestamp(%j) = %s', (ts, ok) => {
    expect(isUtcTimestamp(ts)).toBe(ok);
  });
  it('isUtcTimestamp accepts Date#toISOString output', () => {
    expect(isUtcTimestamp(new Date().toISOString())).toBe(true);
  });

  it('requiresEvidence', () => {
    expect(requiresEvidence('page')).toBe(false);
    expect(requiresEvidence('claim')).toBe(true);
    expect(requiresEvidence('relationship')).toBe(true);
  });

  it('sha256Hex', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex(Buffer.from('abc'))).toBe(sha256Hex('abc'));
  });
});

describe('completeDraft', () => {
  it('fills store-owned fields first, in a stable order, and defaults lifecycle', () => {
    const { meta, text } = completeDraft(parse('---\nkind: page\ntitle: Hello\n---\nBody\n'), FILL);
    expect(text).toBe(
      [
        '---',
        `format: ${RECORD_FORMAT}`,
        'id: rec-1',
        'revision: 1',
        'scope: private',
        `recorded_at: "${NOW}"`,
        `updated_at: "${NOW}"`,
        'lifecycle: active',
        'kind: page',
        'title: Hello',
        '---',
        'Body',
        '',
      ].join('\n'),
    );
    expect(meta).toEqual({
      format: RECORD_FORMAT,
      id: 'rec-1',
      revision: 1,
      kind: 'page',
      title: 'Hello',
      recorded_at: NOW,
      updated_at: NOW,
      scope: 'private',
      lifecycle: 'active',
      aliases: [],
      tags: [],
      dependencies: [],
      evidence: [],
    });
    const again = parse(text);
    expect(validateStored(again)).toEqual({ ok: true, meta });
  });

  it('uses the caller id when present, keeps its position', () => {
    const { meta, text } = completeDraft(parse('---\nkind: page\nid: my-id\ntitle: T\n---\n'), FILL);
    expect(meta.id).toBe('my-id');
    expect(text.split('\n').slice(1, 8)).toEqual([
      `format: ${RECORD_FORMAT}`,
      'revision: 1',
      'scope: private',
      `recorded_at: "${NOW}"`,
      `updated_at: "${NOW}"`,
      'lifecycle: active',
      'kind: page',
    ]);
    expect(text).toContain('kind: page\nid: my-id\ntitle: T\n');
  });

  it('keeps timestamps strings and quotes ids that other YAML parsers could misread', () => {
    for (const id of ['123', 'yes', 'on', '2024-01-01', '1e3', 'a:b']) {
      const { text, meta } = completeDraft(parse('---\nkind: page\ntitle: T\n---\n'), { ...FILL, id });
      expect(meta.id).toBe(id);
      const f = parse(text);
      expect(f.data.id).toBe(id);
      expect(typeof f.data.recorded_at).toBe('string');
      // YAML 1.1 readers must also see a string
      expect(YAML.parse(text.split('---\n')[1]!, { version: '1.1' }).id).toBe(id);
      expect(typeof YAML.parse(text.split('---\n')[1]!, { version: '1.1' }).updated_at).toBe('string');
    }
  });

  it('does not mutate the input file', () => {
    const text = '---\nkind: page\ntitle: T\n---\n';
    const f = parse(text);
    completeDraft(f, FILL);
    expect(serializeRecord(f)).toBe(text);
    expect(f.data).toEqual({ kind: 'page', title: 'T' });
  });

  it('a revision rewrite changes only store-owned fields', () => {
    const original = [
      '---',
      '# a leading comment',
      'kind: claim',
      'title: "The sky is blue"',
      'claim_kind: fact',
      'custom: {a: 1, b: [x, y]}   # flow map kept',
      'notes: |',
      '  line one',
      '    indented',
      '  line three',
      'evidence:',
      '  - source: src-1',
      '    lines: [3, 5]',
      '    quote: "the sky"',
      '---',
      'Body text.',
      '',
    ].join('\n');
    const first = completeDraft(parse(original), FILL);
    const second = completeDraft(parse(first.text), {
      id: 'ignored',
      revision: 2,
      scope: 'private',
      now: LATER,
      recordedAt: first.meta.recorded_at,
    });
    expect(second.meta.id).toBe('rec-1');
    expect(second.meta.revision).toBe(2);
    expect(second.meta.recorded_at).toBe(NOW);
    expect(second.meta.updated_at).toBe(LATER);
    const a = first.text.split('\n');
    const b = second.text.split('\n');
    expect(b.length).toBe(a.length);
    const changed = a.flatMap((line, i) => (line === b[i] ? [] : [[line, b[i]]]));
    expect(changed).toEqual([
      ['revision: 1', 'revision: 2'],
      [`updated_at: "${NOW}"`, `updated_at: "${LATER}"`],
    ]);
    // comments and styles in the caller's part survive
    expect(second.text).toContain('# a leading comment');
    expect(second.text).toContain('custom: { a: 1, b: [ x, y ] } # flow map kept');
    expect(second.text).toContain('notes: |\n  line one\n    indented\n  line three\n');
  });

  it('overwrites caller-supplied store-owned values but keeps their comments and position', () => {
    const f = parse(
      '---\nkind: page\nrevision: "7" # expected\nscope: elsewhere\nrecorded_at: 2000-01-01T00:00:00Z\nupdated_at: x\nformat: knowledge-record-v1\ntitle: T\n---\n',
    );
    expect(() => draftExpectedRevision(f)).toThrow(/revision:/);
    const { text, meta } = completeDraft(f, { ...FILL, revision: 8 });
    expect(meta.revision).toBe(8);
    expect(meta.scope).toBe('private');
    expect(meta.recorded_at).toBe(NOW);
    expect(text).toContain('revision: 8 # expected\n');
    expect(text.indexOf('revision: 8')).toBeGreaterThan(text.indexOf('kind: page'));
  });

  it('keeps a caller lifecycle', () => {
    const { meta, text } = completeDraft(parse('---\nkind: page\ntitle: T\nlifecycle: withdrawn\n---\n'), FILL);
    expect(meta.lifecycle).toBe('withdrawn');
    expect(text.match(/lifecycle/g)?.length).toBe(1);
  });

  it('builds claim and relationship metas', () => {
    const claim = completeDraft(
      parse('---\nkind: claim\ntitle: C\nclaim_kind: decision\ntags: [a, b]\naliases: [Cee]\ndependencies: [rec-0]\nevidence:\n  - source: s1\n  - {source: s2, lines: [1, 1], quote: q}\n---\n'),
      FILL,
    ).meta;
    expect(claim.claim_kind).toBe('decision');
    expect(claim.tags).toEqual(['a', 'b']);
    expect(claim.aliases).toEqual(['Cee']);
    expect(claim.dependencies).toEqual(['rec-0']);
    expect(claim.evidence).toEqual([{ source: 's1' }, { source: 's2', lines: [1, 1], quote: 'q' }]);
    const rel = completeDraft(parse('---\nkind: relationship\ntitle: R\nrelationship_type: supports\nfrom: a\nto: b\n---\n'), FILL).meta;
    expect(rel).toMatchObject({ relationship_type: 'supports', from: 'a', to: 'b' });
    expect(rel.claim_kind).toBeUndefined();
  });

  it('does not require evidence for claims (the caller adds it)', () => {
    expect(() => completeDraft(parse('---\nkind: claim\ntitle: C\nclaim_kind: fact\n---\n'), FILL)).not.toThrow();
  });

  it.each([
    ['missing kind', 'title: T', 'kind'],
    ['bad kind', 'kind: note\ntitle: T', 'kind'],
    ['missing title', 'kind: page', 'title'],
    ['numeric title', 'kind: page\ntitle: 2024', 'title'],
    ['empty title', 'kind: page\ntitle: ""', 'title'],
    ['whitespace title', 'kind: page\ntitle: "   "', 'title'],
    ['multi-line title', 'kind: page\ntitle: "a\\nb"', 'title'],
    ['control char title', 'kind: page\ntitle: "a\\u0007b"', 'title'],
    ['long title', `kind: page\ntitle: ${'x'.repeat(301)}`, 'title'],
    ['claim without claim_kind', 'kind: claim\ntitle: T', 'claim_kind'],
    ['claim with empty claim_kind', 'kind: claim\ntitle: T\nclaim_kind: ""', 'claim_kind'],
    ['relationship without type', 'kind: relationship\ntitle: T\nfrom: a\nto: b', 'relationship_type'],
    ['relationship without from', 'kind: relationship\ntitle: T\nrelationship_type: r\nto: b', 'from'],
    ['relationship with bad to', 'kind: relationship\ntitle: T\nrelationship_type: r\nfrom: a\nto: "b c"', 'to'],
    ['tags not a list', 'kind: page\ntitle: T\ntags: a', 'tags'],
    ['empty tag', 'kind: page\ntitle: T\ntags: [a, ""]', 'tags[1]'],
    ['numeric alias', 'kind: page\ntitle: T\naliases: [1]', 'aliases[0]'],
    ['bad dependency', 'kind: page\ntitle: T\ndependencies: ["../x"]', 'dependencies[0]'],
    ['evidence not a list', 'kind: page\ntitle: T\nevidence: src', 'evidence'],
    ['evidence item not a map', 'kind: page\ntitle: T\nevidence: [src]', 'evidence[0]'],
    ['citation without source', 'kind: page\ntitle: T\nevidence: [{quote: q}]', 'evidence[0].source'],
    ['citation lines reversed', 'kind: page\ntitle: T\nevidence: [{source: s, lines: [5, 3]}]', 'evidence[0].lines'],
    ['citation lines zero', 'kind: page\ntitle: T\nevidence: [{source: s, lines: [0, 3]}]', 'evidence[0].lines'],
    ['citation lines float', 'kind: page\ntitle: T\nevidence: [{source: s, lines: [1.5, 3]}]', 'evidence[0].lines'],
    ['citation lines one number', 'kind: page\ntitle: T\nevidence: [{source: s, lines: [1]}]', 'evidence[0].lines'],
    ['citation quote not string', 'kind: page\ntitle: T\nevidence: [{source: s, quote: 3}]', 'evidence[0].quote'],
    ['bad lifecycle', 'kind: page\ntitle: T\nlifecycle: deleted', 'lifecycle'],
    ['bad caller id', 'kind: page\ntitle: T\nid: "a b"', 'id'],
    ['numeric caller id', 'kind: page\ntitle: T\nid: 123', 'id'],
    ['wrong format', 'kind: page\ntitle: T\nformat: other-v2', 'format'],
  ])('%s -> E_VALIDATION naming %s', (_name, yaml, field) => {
    const f = parse(`---\n${yaml}\n---\n`);
    const err = expectValidation(() => completeDraft(f, FILL), field);
    const errors = err.details?.errors as { field: string }[];
    expect(errors.map((e) => e.field)).toContain(field);
  });

  it('reports every bad field at once', () => {
    const err = expectValidation(() => completeDraft(parse('---\ntags: 3\n---\n'), FILL), 'kind');
    expect(err.message).toContain('title:');
    expect(err.message).toContain('tags:');
  });

  it('rejects invalid fill values as E_INTERNAL', () => {
    const f = parse('---\nkind: page\ntitle: T\n---\n');
    for (const bad of [
      { ...FILL, id: 'a b' },
      { ...FILL, revision: 0 },
      { ...FILL, scope: '' },
      { ...FILL, now: 'yesterday' },
      { ...FILL, recordedAt: '2024-01-01' },
    ]) {
      expect(() => completeDraft(f, bad)).toThrow(expect.objectContaining({ code: 'E_INTERNAL' }));
    }
  });
});

describe('draftExpectedRevision', () => {
  it.each([
    ['kind: page', undefined],
    ['revision: 3', 3],
    ['revision: ~', undefined],
  ])('%s -> %s', (yaml, expected) => {
    expect(draftExpectedRevision(parse(`---\n${yaml}\n---\n`))).toBe(expected);
  });
  it.each(['revision: 0', 'revision: "3"', 'revision: 1.5', 'revision: -1'])('%s -> E_VALIDATION', (yaml) => {
    expectValidation(() => draftExpectedRevision(parse(`---\n${yaml}\n---\n`)), 'revision');
  });
  it.each([['.inf', 'Infinity'], ['-.inf', '-Infinity'], ['.nan', 'NaN']])('revision: %s is named as %s, not "null"', (value, named) => {
    expect(() => draftExpectedRevision(parse(`---\nrevision: ${value}\n---\n`))).toThrow(`got number ${named}`);
  });
});

describe('validateStored', () => {
  const good = [
    `format: ${RECORD_FORMAT}`,
    'id: r1',
    'revision: 3',
    'kind: page',
    'title: T',
    `recorded_at: "${NOW}"`,
    `updated_at: "${LATER}"`,
    'scope: private',
    'lifecycle: active',
  ];
  it('accepts a complete record', () => {
    const r = validateStored(parse(`---\n${good.join('\n')}\n---\n`));
    expect(r.ok).toBe(true);
  });
  it('accepts plain (unquoted) timestamps', () => {
    const lines = good.map((l) => l.replace(/"/g, ''));
    expect(validateStored(parse(`---\n${lines.join('\n')}\n---\n`)).ok).toBe(true);
  });
  it.each(['format', 'id', 'revision', 'kind', 'title', 'recorded_at', 'updated_at', 'scope', 'lifecycle'])(
    'missing %s -> names the field',
    (key) => {
      const lines = good.filter((l) => !l.startsWith(`${key}:`));
      const r = validateStored(parse(`---\n${lines.join('\n')}\n---\n`));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.reason).toContain(`${key}: is required`);
    },
  );
  it.each([
    ['revision: 0', 'revision'],
    ['revision: "3"', 'revision'],
    ['recorded_at: 2024-01-01', 'recorded_at'],
    ['updated_at: "2024-01-01T00:00:00+01:00"', 'updated_at'],
    ['format: knowledge-record-v2', 'format'],
    ['scope: ""', 'scope'],
  ])('%s -> names %s', (line, field) => {
    const key = line.split(':')[0]!;
    const lines = good.map((l) => (l.startsWith(`${key}:`) ? line : l));
    const r = validateStored(parse(`---\n${lines.join('\n')}\n---\n`));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain(`${field}:`);
  });
  it('STORE_OWNED_KEYS are all required in stored records', () => {
    for (const key of STORE_OWNED_KEYS) expect(good.some((l) => l.startsWith(`${key}:`))).toBe(true);
  });
});

describe('withDefaultCitations', () => {
  it('cites every source when there are no explicit citations', () => {
    const f = withDefaultCitations(parse('---\nkind: claim\ntitle: T\nclaim_kind: fact\n---\n'), ['s1', 's2']);
    expect(f.data.evidence).toEqual([{ source: 's1' }, { source: 's2' }]);
    expect(completeDraft(f, FILL).meta.evidence).toEqual([{ source: 's1' }, { source: 's2' }]);
  });
  it('replaces an empty list', () => {
    const f = withDefaultCitations(parse('---\nkind: claim\nevidence: []\n---\n'), ['s1']);
    expect(f.data.evidence).toEqual([{ source: 's1' }]);
  });
  it('keeps explicit citations', () => {
    const orig = parse('---\nkind: claim\nevidence: [{source: s0}]\n---\n');
    expect(withDefaultCitations(orig, ['s1'])).toBe(orig);
  });
  it('an empty list with an anchor that is aliased elsewhere is E_VALIDATION, not an internal error', () => {
    const f = parse('---\nkind: claim\nevidence: &e []\nsee_also: *e\n---\n');
    expect(() => withDefaultCitations(f, ['s1'])).toThrow(expect.objectContaining({ code: 'E_VALIDATION' }));
  });
});

// ---------------------------------------------------------------------------
// Round-trip properties

const RESERVED = new Set<string>([...STORE_OWNED_KEYS, 'lifecycle', 'kind', 'title', 'claim_kind', 'relationship_type', 'from', 'to', 'aliases', 'tags', 'dependencies', 'evidence', '__proto__']);

const keyArb = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => !RESERVED.has(k));
const scalarArb = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' leading', 'trailing ', 'multi\nline\n', 'multi\nline no newline', '  \n\tindent\n', '2024-01-01', 'yes', 'null', '0x1F', '1e3', '---', '...', '# not a comment', 'a: b', '- x'),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
);
const { value: valueArb } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalarArb,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(keyArb, tie('value'), { maxKeys: 4, noNullPrototype: true }),
  ),
}));
const extrasArb = fc.dictionary(keyArb, valueArb, { minKeys: 1, maxKeys: 6, noNullPrototype: true });

function draftText(extras: Record<string, unknown>, kind: 'page' | 'claim' = 'page'): string {
  const base: Record<string, unknown> = { kind, title: 'Round trip' };
  if (kind === 'claim') base.claim_kind = 'fact';
  const doc = new YAML.Document({ ...extras, ...base }, { version: '1.2', schema: 'core' });
  return `---\n${doc.toString()}---\nbody\n`;
}

describe('round-trip properties', () => {
  it('parse -> complete -> parse preserves unknown keys and values exactly', () => {
    fc.assert(
      fc.property(extrasArb, fc.constantFrom<'page' | 'claim'>('page', 'claim'), (extras, kind) => {
        const text = draftText(extras, kind);
        const draft = parse(text);
        expect(draft.data).toMatchObject(extras); // sanity: generator survives YAML
        const { text: out } = completeDraft(draft, FILL);
        const reparsed = parse(out);
        // toEqual, not toStrictEqual: its type check compares a key named "constructor" by identity.
        for (const [k, v] of Object.entries(extras)) expect(reparsed.data[k]).toEqual(v);
        expect(reparsed.body).toBe('body\n');
        // key order of the caller's keys is preserved
        const keys = Object.keys(reparsed.data).filter((k) => !['format', 'id', 'revision', 'scope', 'recorded_at', 'updated_at', 'lifecycle'].includes(k));
        expect(keys).toEqual(Object.keys(draft.data));
        // a second completion is a fixpoint apart from updated_at/revision
        const again = completeDraft(reparsed, { ...FILL, recordedAt: NOW });
        expect(again.text).toBe(out);
      }),
      { numRuns: 300 },
    );
  });

  it('preserves comments, styles and nested structures in hand-written YAML', () => {
    const text = [
      '---',
      '# top comment',
      '',
      'kind: page # the kind',
      "title: 'Quoted: title'",
      'nested:',
      '  # inner comment',
      '  deep:',
      '    list:',
      '      - 1',
      '      - "two"',
      '      - {three: 3}',
      '  folded: >-',
      '    folded text',
      '    continues here',
      'literal: |+',
      '  keep trailing',
      '',
      'anchor: &x {a: 1}',
      'ref: *x',
      'long: ' + 'word '.repeat(40).trim(),
      '# trailing comment',
      '---',
      'Body',
    ].join('\n');
    const before = parse(text);
    const { text: out } = completeDraft(before, FILL);
    for (const fragment of ['# top comment', 'kind: page # the kind', "title: 'Quoted: title'", '# inner comment', 'folded: >-', 'literal: |+', '&x', '*x', '# trailing comment', 'word '.repeat(40).trim()]) {
      expect(out).toContain(fragment);
    }
    const after = parse(out);
    for (const key of ['nested', 'literal', 'anchor', 'ref', 'long', 'title']) {
      expect(after.data[key]).toStrictEqual(before.data[key]);
    }
    expect(after.body).toBe('Body');
  });

  it('serializeRecord(parse(text)) is stable after one normalization', () => {
    fc.assert(
      fc.property(extrasArb, (extras) => {
        const once = serializeRecord(parse(draftText(extras)));
        expect(serializeRecord(parse(once))).toBe(once);
      }),
      { numRuns: 200 },
    );
  });
});

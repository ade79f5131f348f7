import { describe, expect, it } from 'vitest';
import { checkFile, checkStaged } from './check.js';
import { MAX_YAML_DEPTH, sha256Hex } from '../records/record.js';

const yaml = (text: string) => checkFile('private/notes/a.yaml', 'private', Buffer.from(text), '0'.repeat(64));

describe('checkStaged', () => {
  it('takes the hash staged with the bytes (the reader took it from them), and hashes rows staged without one', () => {
    const text = Buffer.from('---\nformat: knowledge-record-v1\nid: rec-a\nrevision: 1\nscope: private\nrecorded_at: "2026-01-01T00:00:00.000Z"\nupdated_at: "2026-01-01T00:00:00.000Z"\nlifecycle: active\nkind: page\ntitle: A\n---\nBody\n');
    const staged = checkStaged('private/pages/a.md', text, 'f'.repeat(64));
    expect(staged).toMatchObject({ kind: 'record', row: { id: 'rec-a', sha256: 'f'.repeat(64) } });
    expect(checkStaged('private/pages/a.md', text, null)).toMatchObject({ kind: 'record', row: { id: 'rec-a', sha256: sha256Hex(text) } });
  });
});

describe('checkFile on YAML files [SCAN-2]', () => {
  it('accepts valid YAML and names the problem of invalid YAML in words', () => {
    expect(yaml('a: 1\nb: [x, y]\n')).toEqual({ kind: 'yaml' });
    expect(yaml('a: [1\n')).toMatchObject({ kind: 'invalid', finding: { code: 'broken-yaml' } });
    // Nested past the parser's stack: a diagnostic in words, not V8's "Maximum call stack size exceeded".
    expect(yaml(`a: ${'['.repeat(5000)}${']'.repeat(5000)}\n`)).toEqual({
      kind: 'invalid',
      finding: { code: 'broken-yaml', reason: 'invalid YAML: collections are nested too deeply to read' },
    });
    // Block mappings nested as deep: the parser throws instead of reporting; still a diagnostic, never a failed scan.
    expect(yaml(Array.from({ length: 2000 }, (_, i) => `${' '.repeat(i)}k:\n`).join('') + 'x: 1\n')).toEqual({
      kind: 'invalid',
      finding: { code: 'broken-yaml', reason: 'invalid YAML: collections are nested too deeply to read' },
    });
    expect(checkFile('private/notes/a.yaml', 'private', Buffer.from([0x61, 0x3a, 0xff]), '0'.repeat(64))).toMatchObject({ kind: 'invalid', finding: { code: 'broken-yaml' } });
  });

  it('finds duplicate keys as YAML does: by type and value, an alias resolved; the boolean true and the string "true" differ', () => {
    expect(yaml('true: 1\n"true": 2\n1: a\n"1": b\n')).toEqual({ kind: 'yaml' });
    expect(yaml('a: 1\nb: 2\na: 3\n')).toEqual({ kind: 'invalid', finding: { code: 'broken-yaml', reason: 'invalid YAML: Map keys must be unique: "a" twice' } });
    expect(yaml('x: &k a\n*k : 2\na: 3\n')).toEqual({ kind: 'invalid', finding: { code: 'broken-yaml', reason: 'invalid YAML: Map keys must be unique: "a" twice' } });
    expect(yaml('- {a: 1, a: 2}\n')).toMatchObject({ kind: 'invalid', finding: { code: 'broken-yaml' } });
  });

  it(`refuses collections nested more than ${MAX_YAML_DEPTH} deep by a limit of its own, not the stack's: the same verdict on any thread`, () => {
    const tooDeep = { kind: 'invalid', finding: { code: 'broken-yaml', reason: 'invalid YAML: collections are nested too deeply to read' } };
    const flow = (n: number) => `a: ${'['.repeat(n - 1)}${']'.repeat(n - 1)}\n`; // the top mapping is a level too
    const block = (n: number) => Array.from({ length: n - 1 }, (_, i) => `${' '.repeat(i)}k:\n`).join('') + `${' '.repeat(n - 1)}x: 1\n`;
    const seqs = (n: number) => `${'- '.repeat(n)}x\n`;
    for (const make of [flow, block, seqs]) {
      expect(yaml(make(MAX_YAML_DEPTH))).toEqual({ kind: 'yaml' });
      expect(yaml(make(MAX_YAML_DEPTH + 1))).toEqual(tooDeep);
    }
    // Deep enough to read on a worker thread's 4 MiB stack but not on the main thread's: refused on both.
    expect(yaml(flow(1000))).toEqual(tooDeep);
    // Many levels in total, none deep: read.
    expect(yaml(Array.from({ length: 5000 }, (_, i) => `k${i}: [[a], {b: [c]}]\n`).join(''))).toEqual({ kind: 'yaml' });
  });
});

describe('checkFile on Markdown that is not a record [REC-3, SCAN-2]', () => {
  const md = (text: string) => checkFile('private/notes/n.md', 'private', Buffer.from(text), '0'.repeat(64));

  it('says in one line that a note without "format" is not a record, naming the fields a record needs', () => {
    const v = md('---\ntitle: Groceries\ntags: [home]\n---\nmilk, eggs\n');
    expect(v).toEqual({
      kind: 'invalid',
      finding: {
        code: 'invalid-record',
        reason: 'not a Knowledge record: its frontmatter has no "format: knowledge-record-v1"; checkpointed as it is, not indexed'
          + ' (a record also needs valid id, revision, scope, recorded_at, updated_at, kind, lifecycle)',
      },
    });
    // A field that is there but wrong is named too, once.
    expect(md('---\ntitle: T\nkind: note\n---\nx\n')).toMatchObject({ finding: { code: 'invalid-record', reason: expect.stringMatching(/a record also needs valid id, revision, scope, recorded_at, updated_at, kind, lifecycle\)$/) } });
  });

  it('lists every issue in full once the file declares the format', () => {
    const v = md('---\nformat: knowledge-record-v1\ntitle: Groceries\n---\nmilk\n');
    expect(v).toMatchObject({ kind: 'invalid', finding: { code: 'invalid-record' } });
    const reason = (v as { finding: { reason: string } }).finding.reason;
    expect(reason).toContain('id: is required');
    expect(reason).toContain('kind: is required (page | claim | relationship)');
    expect(reason).not.toContain('not a Knowledge record');
    // A wrong format is an error in a record, not a note.
    expect(md('---\nformat: knowledge-record-v2\nid: rec-a\n---\nx\n')).toMatchObject({ finding: { reason: expect.stringContaining('format: ') } });
  });
});

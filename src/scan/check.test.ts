import { describe, expect, it } from 'vitest';
import { checkFile } from './check.js';

const yaml = (text: string) => checkFile('private/notes/a.yaml', 'private', Buffer.from(text), '0'.repeat(64));

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
});

import { describe, expect, it } from 'vitest';
import { assertCommittablePath, blobId, buildFastImportStream, clipCodePoints, commitMessage, epochSeconds, quotePath } from './commit-stream.js';
import { makeBatch } from './test-sandbox.js';

describe('quotePath', () => {
  it.each([
    ['notes/a.md', '"notes/a.md"'],
    ['with space/é.md', '"with space/é.md"'],
    ['"quoted".md', '"\\"quoted\\".md"'],
    ['back\\slash', '"back\\\\slash"'],
    ['new\nline', '"new\\nline"'],
    ['tab\there', '"tab\\there"'],
    ['bell\x07', '"bell\\007"'],
  ])('quotes %j as %s', (path, want) => {
    expect(quotePath(path).toString('utf8')).toBe(want);
  });
});

describe('commitMessage', () => {
  it('carries actor, batch and kind trailers after a blank line [GIT-11]', () => {
    expect(commitMessage(makeBatch())).toBe('Publish note\n\nKnowledge-Actor: agent\nKnowledge-Batch: v-1/1\nKnowledge-Publication: pub-1\n');
    expect(commitMessage(makeBatch({ kind: 'scan', refId: 's-9', actor: 'external' }))).toContain('Knowledge-Scan: s-9\n');
    expect(commitMessage(makeBatch({ kind: 'attachment', refId: 'att-2' }))).toContain('Knowledge-Attachment: att-2\n');
  });
  it('folds a multi-line subject into one line', () => {
    expect(commitMessage(makeBatch({ subject: 'a\nb' })).split('\n')[0]).toBe('a b');
  });
});

describe('buildFastImportStream', () => {
  it('is deterministic and uses the batch date, not the clock [GIT-6]', () => {
    const b = makeBatch({ changes: [{ path: 'x.md', bytes: Buffer.from([0xff, 0x00, 0x0a]) }, { path: 'gone.md', bytes: null }] });
    const s1 = buildFastImportStream(b, { ref: 'refs/knowledge/checkpoint', from: 'a'.repeat(40), executable: new Set(), fileMode: true });
    const s2 = buildFastImportStream(b, { ref: 'refs/knowledge/checkpoint', from: 'a'.repeat(40), executable: new Set(), fileMode: true });
    expect(s1.equals(s2)).toBe(true);
    const text = s1.toString('latin1');
    expect(text).toContain(`committer Knowledge <knowledge@localhost> ${epochSeconds(b.createdAt)} +0000\n`);
    expect(text).toContain(`from ${'a'.repeat(40)}\n`);
    expect(text).toContain('M 100644 inline "x.md"\ndata 3\n\xff\x00\n\n');
    expect(text).toContain('D "gone.md"\n');
    expect(text.endsWith('get-mark :1\ndone\n')).toBe(true);
  });
  it('keeps an executable mode the parent had', () => {
    const s = buildFastImportStream(makeBatch(), { ref: 'r', from: null, executable: new Set(['notes/a.md']), fileMode: true }).toString();
    expect(s).toContain('M 100755 inline "notes/a.md"');
    expect(s).not.toContain('from ');
  });
  it('refuses paths Knowledge must never commit [GIT-13]', () => {
    for (const p of ['', '/abs', 'a/../b', '.git/config', 'x/.GIT/y', 'vault.json', '.knowledge-history/r.md', 'a//b', 'a/']) {
      expect(() => assertCommittablePath(p), p).toThrow();
    }
    expect(() => assertCommittablePath('notes/vault.json')).not.toThrow();
  });
});

describe('blobId', () => {
  it('matches git hash-object for sha1', () => {
    // `printf 'hello\n' | git hash-object --stdin`
    expect(blobId(Buffer.from('hello\n'), 'sha1')).toBe('ce013625030ba8dba906f756967f9e9ca394464a');
  });
});

describe('epochSeconds: a clock set before 1970', () => {
  it('commits as 1970, never a negative date git fsck refuses (badDateOverflow)', () => {
    expect(epochSeconds('1969-12-31T23:00:00.000Z')).toBe(0);
    expect(epochSeconds('1970-01-01T00:00:01.500Z')).toBe(1);
  });
});

describe('clipCodePoints', () => {
  it('never splits a character made of two UTF-16 units', () => {
    const text = `${'a'.repeat(71)}😀 tail`;
    expect(clipCodePoints(text, 72)).toBe(`${'a'.repeat(71)}😀`);
    expect(clipCodePoints('short', 72)).toBe('short');
    expect(clipCodePoints('😀😀😀', 2)).toBe('😀😀');
  });
});

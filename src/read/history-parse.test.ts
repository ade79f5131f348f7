import { describe, expect, it } from 'vitest';
import { actorLabel, parseCatFileBatch, parseLog, utcIso, versionFacts } from './history-parse.js';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const C = 'c'.repeat(40);
const F = '\x1f';

/** A header as LOG_FORMAT prints it: id, parents, date, then the raw message with its trailers. */
function header(commit: string, parent: string, actor: string, pub: string, scan: string, subject: string): string {
  const trailers = [actor && `Knowledge-Actor: ${actor}`, pub && `Knowledge-Publication: ${pub}`, scan && `Knowledge-Scan: ${scan}`].filter(Boolean);
  const message = `${subject}\n` + (trailers.length ? `\n${trailers.join('\n')}\n` : '');
  return [commit, parent, '2024-05-01T12:00:00+02:00', message].join(F);
}

describe('[READ-2] git log output', () => {
  it('parses headers, actor trailers and the followed path across a rename', () => {
    const out =
      header(C, B, 'external', '', 'scan-1', 'Scan: 1 renamed') + '\0\nR100\0p/a.md\0p/b.md\0' +
      header(B, A, 'agent', 'pub-2', '', 'Agent published X') + '\0\nM\0p/a.md\0' +
      header(A, '', 'operator', 'pub-1', '', 'Operator published X') + '\0\nA\0p/a.md\0';
    const log = parseLog(out);
    expect(log.map((e) => [e.commit, e.parent, e.actor, e.path, e.status])).toEqual([
      [C, B, 'external', 'p/b.md', 'R100'],
      [B, A, 'agent', 'p/a.md', 'M'],
      [A, null, 'operator', 'p/a.md', 'A'],
    ]);
    expect(log[0]).toMatchObject({ scanId: 'scan-1', subject: 'Scan: 1 renamed' });
    expect(log[1]).toMatchObject({ publicationId: 'pub-2', date: '2024-05-01T10:00:00Z' });
    expect(log[2]!.scanId).toBeUndefined();
  });

  it('keeps a subject containing the field separator whole', () => {
    const log = parseLog(header(A, '', '', '', '', `odd${F}subject`) + '\0\nM\0x.md\0');
    expect(log[0]).toMatchObject({ subject: `odd${F}subject`, actor: 'unknown', path: 'x.md' });
  });

  it('a merge lists only its first parent; a commit without files has no path', () => {
    const log = parseLog(header(A, `${B} ${C}`, 'operator', '', '', 'merge') + '\0' + header(B, '', 'operator', '', '', 'x') + '\0\nM\0x.md\0');
    expect(log[0]).toMatchObject({ parent: B, path: null });
    expect(log[1]).toMatchObject({ path: 'x.md' });
  });

  it('a subject over several lines is one line, as %s prints it; trailers are read from the last paragraph only', () => {
    const message = `\nFirst line  \nsecond line\n\nKnowledge-Actor: root in the body\nmore body\n\nKnowledge-Actor: agent\nKnowledge-Actor: external\n`;
    const log = parseLog([A, '', '2024-05-01T12:00:00Z', message].join(F) + '\0\nM\0x.md\0');
    expect(log[0]).toMatchObject({ subject: 'First line second line', actor: 'agent', path: 'x.md' });
  });

  it('labels anything but agent/operator/external as unknown', () => {
    expect(actorLabel('agent')).toBe('agent');
    expect(actorLabel(' external ')).toBe('external');
    expect(actorLabel(undefined)).toBe('unknown');
    expect(actorLabel('root')).toBe('unknown');
    expect(actorLabel('')).toBe('unknown');
  });

  it('reports dates in UTC', () => {
    expect(utcIso('2024-05-01T12:00:00-05:00')).toBe('2024-05-01T17:00:00Z');
  });
});

describe('git cat-file --batch output', () => {
  it('splits objects by their sizes, including binary bytes and missing objects', () => {
    const blob1 = Buffer.from('---\nid: x\n---\n\n');
    const blob2 = Buffer.from([0, 10, 255, 10]);
    const out = Buffer.concat([
      Buffer.from(`${A} blob ${blob1.length}\n`), blob1, Buffer.from('\n'),
      Buffer.from(`${B}:gone.md missing\n`),
      Buffer.from(`${C} blob ${blob2.length}\n`), blob2, Buffer.from('\n'),
    ]);
    const objs = parseCatFileBatch(out, 3);
    expect(objs).toHaveLength(3);
    expect(objs[0]).toEqual({ found: true, bytes: blob1 });
    expect(objs[1]).toEqual({ found: false });
    expect(objs[2]).toEqual({ found: true, bytes: blob2 });
  });

  it('stops on truncated output instead of inventing content', () => {
    expect(parseCatFileBatch(Buffer.from(`${A} blob 100\nshort`), 1)).toEqual([]);
  });
});

describe('facts of one committed version', () => {
  it('reads id and revision from the frontmatter', () => {
    expect(versionFacts(Buffer.from('---\nid: rec-1\nrevision: 3\n---\nbody\n'))).toEqual({ id: 'rec-1', revision: 3 });
  });

  it('null where the version is broken (bad YAML, not UTF-8, bad revision)', () => {
    expect(versionFacts(Buffer.from('---\nid: [\n---\n'))).toEqual({ id: null, revision: null });
    expect(versionFacts(Buffer.from([0xff, 0xfe]))).toEqual({ id: null, revision: null });
    expect(versionFacts(Buffer.from('---\nid: x\nrevision: 0\n---\n'))).toEqual({ id: 'x', revision: null });
  });
});

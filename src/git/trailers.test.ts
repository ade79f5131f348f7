/**
 * Knowledge's own trailer parser (trailers.ts) against git's `%(trailers)`
 * on the same commits, in a repository with no trailer configuration, and
 * then the configuration that blinds git's placeholder.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { messageSubject, parseTrailers } from './trailers.js';
import { makeSandbox, ugit, type GitSandbox } from './test-sandbox.js';

let sb: GitSandbox;
beforeAll(() => {
  sb = makeSandbox();
});
afterAll(() => sb.cleanup());

/** Commit each message (verbatim, by fast-import) on a branch of a new repository; their ids in order. */
function commitMessages(repo: string, messages: string[]): void {
  mkdirSync(repo, { recursive: true });
  ugit(sb, repo, ['init', '-q', '-b', 'main']);
  const parts: Buffer[] = [];
  messages.forEach((m, i) => {
    const msg = Buffer.from(m, 'utf8');
    parts.push(Buffer.from(`commit refs/heads/main\ncommitter T <t@example.com> ${1700000000 + i} +0000\ndata ${msg.length}\n`), msg, Buffer.from('\n'));
  });
  ugit(sb, repo, ['fast-import', '--quiet'], Buffer.concat(parts));
}

/** Per commit, oldest first: git's own reading of its trailers and subject, and the raw message. */
function gitReading(repo: string, config: string[] = []): Array<{ git: Array<[string, string]>; subject: string; body: string }> {
  const out = ugit(sb, repo, [...config, 'log', '-z', '--reverse', '--format=%B%x01%s%x01%(trailers:only,unfold,separator=%x02,key_value_separator=%x03)', 'main']);
  return out.split('\0').filter((r) => r.includes('\x01')).map((r) => {
    const at = r.lastIndexOf('\x01');
    const sub = r.lastIndexOf('\x01', at - 1);
    const git = r.slice(at + 1).split('\x02').filter((t) => t !== '').map((t) => t.split('\x03') as [string, string]);
    return { git, subject: r.slice(sub + 1, at), body: r.slice(0, sub) };
  });
}

const LINES = [
  'Subject line', '', ' ', '\t', 'Key: value', 'Knowledge-Batch: 12', 'knowledge-batch:7', 'Key : spaced', 'Bad Key: no',
  'free text', ' continued', '\tcontinued with a tab', 'Signed-off-by: A U Thor <a@example.com>', '(cherry picked from commit abc123)',
  'Token:', 'A-b-c: x: y', '-: dash', 'Key: trailing  ', ':no token', 'Key: value\r', 'Ünïcode: välue', 'x', '--- a divider?',
];

describe('parseTrailers', () => {
  it('reads the trailers and the subject git reads from the same raw message, for generated messages (fast-check)', () => {
    const messages = fc.sample(fc.array(fc.constantFrom(...LINES), { minLength: 0, maxLength: 9 }).map((ls) => ls.join('\n')), { numRuns: 400, seed: 20261206 });
    // And the messages Knowledge writes.
    messages.push('External edits in private: 1 added\n\nKnowledge-Actor: external\nKnowledge-Scan: scan-1\nKnowledge-Batch: 3\n');
    const repo = join(sb.dir, 'prop');
    commitMessages(repo, messages);
    const read = gitReading(repo);
    expect(read).toHaveLength(messages.length);
    read.forEach(({ git, subject, body }, i) => {
      expect(body, `message ${i}`).toBe(messages[i]);
      expect(parseTrailers(body).entries, JSON.stringify(body)).toEqual(git);
      expect(messageSubject(body), JSON.stringify(body)).toBe(subject);
    });
    expect(parseTrailers(read.at(-1)!.body).values('knowledge-batch')).toEqual(['3']);
  });

  it('is not moved by the repository\'s trailer configuration, which blinds git\'s own placeholder', () => {
    const repo = join(sb.dir, 'hostile');
    commitMessages(repo, ['Publication p-1\n\nKnowledge-Actor: agent\nKnowledge-Publication: p-1\nKnowledge-Batch: 7\n']);
    for (const config of [['-c', 'trailer.separators=#'], ['-c', 'trailer.Knowledge-Batch.key=Other'], ['-c', 'trailer.knowledge-batch.key=Renamed']]) {
      const [{ git, body }] = gitReading(repo, config) as [{ git: Array<[string, string]>; subject: string; body: string }];
      // What git's placeholder makes of it under that configuration: not our trailers.
      expect(git.filter(([k]) => k === 'Knowledge-Batch'), config.join(' ')).toEqual([]);
      const t = parseTrailers(body);
      expect(t.values('Knowledge-Batch')).toEqual(['7']);
      expect(t.first('Knowledge-Actor')).toBe('agent');
    }
  });
});

/**
 * The read side end to end [READ-1][READ-2]: records published by real
 * `knowledge publish` processes (real git, real SQLite), read back through
 * the core service as the operator and as agents, and through the CLI.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyFileSync, writeFileSync, appendFileSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { makeSandbox, cli, dropScanCounts, userGit, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { KnowledgeError } from '../src/errors.js';
import type { Caller } from '../src/access.js';
import { checkingDiffs } from './history-diff-old.js';

let sb: Sandbox;
let vault: string;
let store: string;
let svc: KnowledgeService | null = null;
let n = 0;

beforeEach(() => {
  sb = makeSandbox();
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  store = join(sb.dir, 'st');
  vault = join(store, 'vault');
});
afterEach(() => {
  svc?.close();
  svc = null;
  sb.cleanup();
});

const OP: Caller = { kind: 'operator' };
const agentA: Caller = { kind: 'agent', agentId: 'bot', session: 'A' };
const agentB: Caller = { kind: 'agent', agentId: 'bot', session: 'B' };
const agentNoSession: Caller = { kind: 'agent', agentId: 'bot' };

/** A reader opened after the writes, like a Gateway or an MCP server. */
function reader(opts: { gitPath?: string } = {}): KnowledgeService {
  svc?.close();
  // Every diff a test asks for is also asked of the old code path (the whole history first): the same answer or error.
  svc = checkingDiffs(KnowledgeService.open(store, { write: false, env: sb.env, git: { pathEnv: sb.env.PATH, gitPath: opts.gitPath } }));
  return svc;
}

interface Draft { id?: string; kind?: string; title: string; body?: string; extra?: string }

function recordText(d: Draft): string {
  const lines = ['---', `kind: ${d.kind ?? 'page'}`, `title: ${JSON.stringify(d.title)}`];
  if (d.id) lines.push(`id: ${d.id}`);
  if (d.extra) lines.push(d.extra.trimEnd());
  lines.push('---', d.body ?? 'body');
  return lines.join('\n') + '\n';
}

/** Publish drafts in one publication through the real CLI; returns the receipt. */
/** A draft written to a file of the sandbox; its name. */
function writeDraft(d: Draft): string {
  const name = `r${++n}.md`;
  writeFileSync(join(sb.dir, name), recordText(d));
  return name;
}

function publish(drafts: Draft[], args: string[] = []) {
  const files = drafts.map(writeDraft);
  const r = cli(sb, ['publish', '--store', 'st', '--json', ...args, ...files]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { publicationId: string; records: Array<{ id: string; path: string; revision: number }>; git: { state: string; commit?: string } };
}

function errorCode(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof KnowledgeError ? err.code : `not a KnowledgeError: ${String(err)}`;
  }
}

async function asyncErrorCode(fn: () => Promise<unknown>): Promise<string | null> {
  try {
    await fn();
    return null;
  } catch (err) {
    return err instanceof KnowledgeError ? err.code : `not a KnowledgeError: ${String(err)}`;
  }
}

describe('[READ-1] exact lookup: id, then title, then alias', () => {
  it('finds by id, by title regardless of case and Unicode normalisation, and by alias', () => {
    publish([
      { id: 'rec-cafe', title: 'Café Crème', extra: 'aliases: [Morning Coffee]' },
      { id: 'rec-tea', title: 'Green tea' },
    ]);
    const s = reader();
    expect(s.lookup(OP, 'rec-cafe')).toMatchObject({ status: 'found', record: { id: 'rec-cafe', title: 'Café Crème', aliases: ['Morning Coffee'] } });
    // NFD input, other case: the same title.
    expect(s.lookup(OP, 'CAFE\u0301 CRE\u0300ME')).toMatchObject({ status: 'found', record: { id: 'rec-cafe' } });
    expect(s.lookup(OP, 'morning coffee')).toMatchObject({ status: 'found', record: { id: 'rec-cafe' } });
    // Diacritics are not case: "Cafe Creme" is another title.
    expect(s.lookup(OP, 'Cafe Creme')).toEqual({ status: 'missing' });
    // A word of the title is not the title.
    expect(s.lookup(OP, 'Green')).toEqual({ status: 'missing' });
  });

  it('folds case in scripts whose case SQLite\'s unicode61 does not know: Cherokee, Georgian Mtavruli, Adlam', () => {
    publish([
      { id: 'rec-chr', title: 'ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ' },
      { id: 'rec-geo', title: 'ᲥᲐᲠᲗᲣᲚᲘ ᲔᲜᲐ', extra: 'aliases: [ᎠᏂᏴᏫᏯ]' },
      { id: 'rec-adl', title: '𞤀𞤣𞤤𞤢𞤥 𞤆𞤵𞤤𞤢𞤪' },
    ]);
    const s = reader();
    expect(s.lookup(OP, 'ꮳꮃꭹ ꭶꮼꮒꭿꮝꮧ')).toMatchObject({ status: 'found', record: { id: 'rec-chr' } }); // lowercase of the title
    expect(s.lookup(OP, 'ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ')).toMatchObject({ status: 'found', record: { id: 'rec-chr' } });
    expect(s.lookup(OP, 'ქართული ენა')).toMatchObject({ status: 'found', record: { id: 'rec-geo' } }); // Mkhedruli of the Mtavruli title
    expect(s.lookup(OP, 'ꭰꮒᏼꮻꮿ')).toMatchObject({ status: 'found', record: { id: 'rec-geo' } }); // an alias, in lowercase
    expect(s.lookup(OP, '𞤢𞤣𞤤𞤢𞤥 𞤨𞤵𞤤𞤢𞤪')).toMatchObject({ status: 'found', record: { id: 'rec-adl' } }); // all lowercase of a title-case title
    expect(s.lookup(OP, '𞤀𞤁𞤂𞤀𞤃 𞤆𞤓𞤂𞤀𞤈')).toMatchObject({ status: 'found', record: { id: 'rec-adl' } }); // all uppercase
    expect(s.lookup(OP, 'ꮳꮃꭹ')).toEqual({ status: 'missing' }); // a word of the title is not the title
    // Words of two scripts, each in its usual case, asked in the other: every combination of the words' cases.
    publish([{ id: 'rec-mix', title: 'ᏣᎳᎩ ქართული', body: 'ᏣᎳᎩ ქართული' }]);
    expect(s.lookup(OP, 'ꮳꮃꭹ ქართული')).toMatchObject({ status: 'found', record: { id: 'rec-mix' } });
    expect(s.lookup(OP, 'ᏣᎳᎩ ᲥᲐᲠᲗᲣᲚᲘ')).toMatchObject({ status: 'found', record: { id: 'rec-mix' } });
    expect(s.search(OP, { query: 'ꮳꮃꭹ ᲥᲐᲠᲗᲣᲚᲘ', mode: 'phrase' }).results.map((r) => r.id)).toEqual(['rec-mix']);
  });

  it('titles and aliases with characters unicode61 knows otherwise than JavaScript: newer emoji and skin tones are words, New Tai Lue vowel signs separate', () => {
    publish([
      { id: 'rec-brain', title: 'Ideas 🧠 dump', extra: 'aliases: [brain 🧠 box]', body: 'ideas 🧠 dump here' },
      { id: 'rec-thumb', title: 'Great job 👍🏽 team' },
      { id: 'rec-ntl', title: '\u19B0', body: 'fox \u19B0 lone' },
    ]);
    const s = reader();
    expect(s.lookup(OP, 'Ideas 🧠 dump')).toMatchObject({ status: 'found', record: { id: 'rec-brain' } });
    expect(s.lookup(OP, 'ideas 🧠 DUMP')).toMatchObject({ status: 'found', record: { id: 'rec-brain' } });
    expect(s.lookup(OP, 'brain 🧠 box')).toMatchObject({ status: 'found', record: { id: 'rec-brain' } });
    expect(s.lookup(OP, 'Ideas dump')).toEqual({ status: 'missing' });
    expect(s.lookup(OP, 'great job 👍🏽 team')).toMatchObject({ status: 'found', record: { id: 'rec-thumb' } });
    expect(s.lookup(OP, '\u19B0')).toMatchObject({ status: 'found', record: { id: 'rec-ntl' } });
    expect(s.search(OP, { query: 'ideas 🧠 dump', mode: 'phrase' }).results.map((r) => r.id)).toEqual(['rec-brain']);
    expect(s.search(OP, { query: 'lone \u19B0' }).results.map((r) => r.id)).toEqual(['rec-ntl']);
  });

  it('reports two records with the same title as ambiguous, with both candidates', () => {
    publish([{ id: 'rec-m1', title: 'Meeting notes' }, { id: 'rec-m2', title: 'meeting NOTES' }, { id: 'rec-m3', title: 'Meeting notes, part 2' }]);
    const r = reader().lookup(OP, 'Meeting Notes');
    expect(r.status).toBe('ambiguous');
    if (r.status !== 'ambiguous') return;
    expect(r.candidates.map((c) => c.id).sort()).toEqual(['rec-m1', 'rec-m2']);
  });

  it('ambiguous candidates come newest first by instant, whether or not a timestamp has fractions of a second', () => {
    const r = publish([{ id: 'dup-a', title: 'Same title' }, { id: 'dup-b', title: 'Same title' }]);
    const stamp = (id: string, at: string) => {
      const file = join(vault, r.records.find((x) => x.id === id)!.path);
      writeFileSync(file, readFileSync(file, 'utf8').replace(/^updated_at: .*$/m, `updated_at: ${at}`));
    };
    stamp('dup-a', '2026-03-01T00:00:00Z');
    stamp('dup-b', '2026-03-01T00:00:00.500Z');
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const s = reader();
    const found = s.lookup(OP, 'same title');
    expect(found.status === 'ambiguous' && found.candidates.map((c) => c.id)).toEqual(['dup-b', 'dup-a']);
    expect(s.listRecords(OP).records.map((c) => c.id)).toEqual(['dup-b', 'dup-a']);
  });

  it('an id wins over a title, and a title over an alias', () => {
    publish([
      { id: 'rec-x', title: 'rec-y' },
      { id: 'rec-y', title: 'Why' },
      { id: 'rec-z', title: 'Zed', extra: 'aliases: [Why]' },
    ]);
    const s = reader();
    expect(s.lookup(OP, 'rec-y')).toMatchObject({ status: 'found', record: { id: 'rec-y' } });
    expect(s.lookup(OP, 'why')).toMatchObject({ status: 'found', record: { id: 'rec-y' } });
  });
});

describe('[SURF-3] partition scoping: an agent in session A never sees session B', () => {
  beforeEach(() => {
    publish([{ id: 'rec-priv', title: 'Shared private fact', body: 'owner private alpha' }]);
    publish([{ id: 'rec-a', title: 'Conversation A note', body: 'alpha from A', extra: 'aliases: [Secret plan]' }], ['--partition', 'conversation:A', '--actor', 'agent']);
    publish([{ id: 'rec-b', title: 'Conversation B note', body: 'alpha from B', extra: 'aliases: [Secret plan]' }], ['--partition', 'conversation:B', '--actor', 'agent']);
  });

  it('lookup: B records are missing for A, by id, title and alias', () => {
    const s = reader();
    expect(s.lookup(agentA, 'rec-b')).toEqual({ status: 'missing' });
    expect(s.lookup(agentA, 'Conversation B note')).toEqual({ status: 'missing' });
    // Both sessions have the alias: A sees only its own, so it is not ambiguous for A.
    expect(s.lookup(agentA, 'secret plan')).toMatchObject({ status: 'found', record: { id: 'rec-a' } });
    expect(s.lookup(OP, 'secret plan').status).toBe('ambiguous');
    expect(s.lookup(agentNoSession, 'rec-a')).toEqual({ status: 'missing' });
    expect(s.lookup(agentNoSession, 'rec-priv')).toMatchObject({ status: 'found' });
  });

  it('lookup: ids claimed twice in B change nothing for A, whose record has that id for a title', () => {
    const b = reader().readRecord(OP, 'rec-b').record;
    copyFileSync(join(vault, b.path), join(vault, dirname(b.path), 'copy-of-b.md'));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    publish([{ id: 'rec-a2', title: 'rec-b' }], ['--partition', 'conversation:A', '--actor', 'agent']);
    const s = reader();
    expect(s.lookup(agentA, 'rec-b')).toMatchObject({ status: 'found', record: { id: 'rec-a2' } });
    // Who sees a claimant still gets no record for the id, as before [REC-3].
    expect(s.lookup(agentB, 'rec-b')).toEqual({ status: 'missing' });
    expect(s.lookup(OP, 'rec-b')).toEqual({ status: 'missing' });
  });

  it('search and list: only private and the own conversation', () => {
    const s = reader();
    expect(s.search(agentA, { query: 'alpha' }).results.map((r) => r.id).sort()).toEqual(['rec-a', 'rec-priv']);
    expect(s.search(agentA, { query: 'alpha' }).total).toBe(2);
    expect(s.search(agentB, { query: 'alpha' }).results.map((r) => r.id).sort()).toEqual(['rec-b', 'rec-priv']);
    expect(s.search(OP, { query: 'alpha' }).total).toBe(3);
    expect(s.listRecords(agentA).records.map((r) => r.id).sort()).toEqual(['rec-a', 'rec-priv']);
    expect(s.listRecords(agentA, { partition: 'conversation:A' }).records.map((r) => r.id)).toEqual(['rec-a']);
    expect(errorCode(() => s.listRecords(agentA, { partition: 'conversation:B' }))).toBe('E_DENIED');
    expect(s.listRecords(OP, { partition: 'conversation:B' }).records.map((r) => r.id)).toEqual(['rec-b']);
  });

  it('read, history and diff: B records are E_NOT_FOUND for A', async () => {
    const s = reader();
    expect(errorCode(() => s.readRecord(agentA, 'rec-b'))).toBe('E_NOT_FOUND');
    expect(s.readRecord(agentA, 'rec-a').record.id).toBe('rec-a');
    expect(await asyncErrorCode(() => s.recordHistory(agentA, 'rec-b'))).toBe('E_NOT_FOUND');
    const hb = await s.recordHistory(agentB, 'rec-b');
    expect(hb.versions).toHaveLength(1);
    const c = hb.versions[0]!.commit;
    expect(await asyncErrorCode(() => s.recordDiff(agentA, 'rec-b', c, c))).toBe('E_NOT_FOUND');
    // The commit exists, but it is not a version of A's record.
    expect(await asyncErrorCode(() => s.recordDiff(agentA, 'rec-a', c, c))).toBe('E_VALIDATION');
  });

  it('a record\'s file name tells an agent nothing of a conversation whose id differs only in case', () => {
    const theirs = reader().readRecord(OP, 'rec-a').record.path;
    expect(theirs).toMatch(/^conversations\/A\//);
    // The same title in conversation "a": the same file name in its own folder, not a suffix that would
    // say "A" holds a record of that title.
    const mine = publish([{ id: 'rec-lower-a', title: 'Conversation A note', body: 'mine' }], ['--partition', 'conversation:a', '--actor', 'agent']).records[0]!.path;
    expect(mine).toBe(theirs.replace(/^conversations\/A\//, 'conversations/a/'));
    // Within one partition, names still differ by more than case (a case-insensitive clone keeps both files).
    const shard = `conversations/a/pages/${createHash('sha256').update('second-note').digest('hex').slice(0, 2)}`;
    mkdirSync(join(vault, shard), { recursive: true });
    writeFileSync(join(vault, shard, 'Second-Note.md'), recordText({ id: 'rec-hand', title: 'Hand note', body: 'by hand' }));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const second = publish([{ id: 'rec-second', title: 'Second note', body: 'second' }], ['--partition', 'conversation:a', '--actor', 'agent']).records[0]!.path;
    expect(second).toMatch(new RegExp(`^${shard}/second-note-[0-9a-f]{8}\\.md$`));
  });

  it('a scan commit that also touched B is shown to A without naming B or counting its files', async () => {
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0); // the partitions' baselines
    for (const id of ['rec-priv', 'rec-b']) {
      appendFileSync(join(vault, JSON.parse(cli(sb, ['show', '--store', 'st', '--json', id]).stdout).record.path as string), 'edited by hand\n');
    }
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const s = reader();
    const subjectOf = async (caller: Caller, id: string) => (await s.recordHistory(caller, id)).versions[0]!.subject;
    expect(await subjectOf(OP, 'rec-priv')).toBe('External edits in conversation:B, private: 2 modified');
    expect(await subjectOf(agentB, 'rec-priv')).toBe('External edits in conversation:B, private: 2 modified');
    expect(await subjectOf(agentA, 'rec-priv')).toBe('External edits in private and partitions you cannot read');
    expect(await subjectOf(agentNoSession, 'rec-priv')).toBe('External edits in private and partitions you cannot read');
    expect(await subjectOf(agentB, 'rec-b')).toBe('External edits in conversation:B, private: 2 modified');
  });

  it('backlinks from B never show on a private record read by A', () => {
    publish([{ id: 'rec-b2', title: 'B links', body: 'see [[rec-priv]]' }], ['--partition', 'conversation:B']);
    publish([{ id: 'rec-a2', title: 'A links', body: 'see [[rec-priv]]' }], ['--partition', 'conversation:A']);
    const s = reader();
    expect(s.readRecord(agentA, 'rec-priv').backlinks.map((b) => b.id)).toEqual(['rec-a2']);
    expect(s.readRecord(OP, 'rec-priv').backlinks.map((b) => b.id).sort()).toEqual(['rec-a2', 'rec-b2']);
  });

  it('a sandboxed agent is denied every read', async () => {
    const s = reader();
    const sandboxed: Caller = { kind: 'agent', agentId: 'bot', session: 'A', sandboxed: true };
    expect(errorCode(() => s.lookup(sandboxed, 'rec-a'))).toBe('E_DENIED');
    expect(errorCode(() => s.search(sandboxed, { query: 'alpha' }))).toBe('E_DENIED');
    expect(errorCode(() => s.listRecords(sandboxed))).toBe('E_DENIED');
    expect(errorCode(() => s.readRecord(sandboxed, 'rec-a'))).toBe('E_DENIED');
    expect(await asyncErrorCode(() => s.recordHistory(sandboxed, 'rec-a'))).toBe('E_DENIED');
  });
});

describe('[READ-1] keyword search', () => {
  it('needs every word by default; any and phrase modes; title ranks above body', () => {
    publish([
      { id: 'rec-1', title: 'Node version', body: 'The build uses Node 20 on CI.' },
      { id: 'rec-2', title: 'Build cache', body: 'Node modules are cached.' },
      { id: 'rec-3', title: 'Unrelated', body: 'Nothing to see.' },
    ]);
    const s = reader();
    expect(s.search(OP, { query: 'node build' }).results.map((r) => r.id).sort()).toEqual(['rec-1', 'rec-2']);
    expect(s.search(OP, { query: 'node version' }).results.map((r) => r.id)).toEqual(['rec-1']);
    expect(s.search(OP, { query: 'version nothing', mode: 'any' }).results.map((r) => r.id).sort()).toEqual(['rec-1', 'rec-3']);
    expect(s.search(OP, { query: 'uses node', mode: 'phrase' }).results.map((r) => r.id)).toEqual(['rec-1']);
    expect(s.search(OP, { query: 'node uses', mode: 'phrase' }).total).toBe(0);
    const cache = s.search(OP, { query: 'cache' });
    expect(cache.results[0]).toMatchObject({ id: 'rec-2' });
    expect(cache.results[0]!.score).toBeGreaterThan(0);
    expect(s.search(OP, { query: 'cached' }).results[0]!.snippet).toContain('**cached**');
  });

  it('says where the matched words are in the snippet: the text\'s own ** is not a marker', () => {
    publish([{ id: 'rec-pow', title: 'Powers', body: 'Compute 2 ** 10 first, then look for the needle in **bold** text.' }]);
    const hit = reader().search(OP, { query: 'needle' }).results[0]!;
    expect(hit.snippet).toBe('Compute 2 ** 10 first, then look for the **needle** in **bold** text.');
    expect(hit.marks.map(([a, b]) => hit.snippet.slice(a, b))).toEqual(['needle']);
    const two = reader().search(OP, { query: 'compute bold' }).results[0]!;
    expect(two.marks.map(([a, b]) => two.snippet.slice(a, b))).toEqual(['Compute', 'bold']);
    for (const [a, b] of two.marks) expect([two.snippet.slice(a - 2, a), two.snippet.slice(b, b + 2)]).toEqual(['**', '**']);
  });

  it('gives each hit the snippet of its own text', () => {
    publish([
      { id: 'rec-a', title: 'Alpha lantern', body: 'first body mentions lantern once.' },
      { id: 'rec-b', title: 'Beta', body: 'second body: a lantern here too.' },
    ]);
    const hits = reader().search(OP, { query: 'lantern' }).results;
    const byId = Object.fromEntries(hits.map((h) => [h.id, h.snippet]));
    expect(byId['rec-a']).toBe('first body mentions **lantern** once.');
    expect(byId['rec-b']).toBe('second body: a **lantern** here too.');
  });

  it('injection attempts are searched as words: no FTS5 syntax errors, no widened matches', () => {
    publish([
      { id: 'rec-t', title: 'Title x', body: 'or so' },
      { id: 'rec-o', title: 'Other', body: 'anything at all' },
    ]);
    const s = reader();
    const ids = (query: string) => s.search(OP, { query }).results.map((h) => h.id);
    // None of these is an FTS5 syntax error (they would be, passed raw to MATCH).
    for (const q of ['"', '"unbalanced', 'a) OR (b', 'NEAR(title x, 2)', "'; DROP TABLE records; --", '^x', 'x*']) {
      expect(() => s.search(OP, { query: q }), q).not.toThrow();
    }
    // `title:x OR *` as words: "title x" and "or" — only the record that has them (raw: a column filter OR everything).
    expect(ids('title:x OR *')).toEqual(['rec-t']);
    // A raw OR would match both records; quoted, "or" is a word every match must contain.
    expect(ids('anything OR title')).toEqual([]);
    // A raw NOT would match rec-t; as words, nothing has "and", "not" and "y".
    expect(ids('x AND NOT y')).toEqual([]);
    // Column filters are words too: {title}: x needs "title" and "x".
    expect(ids('{body}: x')).toEqual([]);
    expect(ids('{title}: x')).toEqual(['rec-t']);
    // A prefix star is punctuation, not a wildcard: "oth*" is the word "oth".
    expect(ids('oth*')).toEqual([]);
    expect(ids('*')).toEqual([]);
    expect(ids('NEAR(title x, 2)')).toEqual([]);
    expect(s.listRecords(OP).total).toBe(2);
  });

  it('rejects over-long queries and bad filters with E_VALIDATION', () => {
    publish([{ title: 'Anything' }]);
    const s = reader();
    expect(errorCode(() => s.search(OP, { query: 'x'.repeat(501) }))).toBe('E_VALIDATION');
    expect(errorCode(() => s.search(OP, { query: 'x', limit: 51 }))).toBe('E_VALIDATION');
    expect(errorCode(() => s.search(OP, { query: 'x', kind: 'note' as never }))).toBe('E_VALIDATION');
    expect(errorCode(() => s.search(OP, { query: 'x', updatedAfter: 'last week' }))).toBe('E_VALIDATION');
    expect(errorCode(() => s.listRecords(OP, { limit: 0 }))).toBe('E_VALIDATION');
  });

  it('filters by kind, tag, lifecycle and updated date', () => {
    writeFileSync(join(sb.dir, 'ev.txt'), 'source text\n');
    publish([
      { id: 'rec-p', title: 'Deploy page', body: 'deploy steps', extra: 'tags: [ops, deploy]' },
      { id: 'rec-c', kind: 'claim', title: 'Deploy claim', body: 'deploy fact', extra: 'claim_kind: fact\ntags: [ops]\nlifecycle: superseded' },
    ], ['--evidence', 'ev.txt']);
    const s = reader();
    const ids = (q: Parameters<KnowledgeService['search']>[1]) => s.search(OP, q).results.map((r) => r.id).sort();
    expect(ids({ query: 'deploy' })).toEqual(['rec-c', 'rec-p']);
    expect(ids({ query: 'deploy', kind: 'claim' })).toEqual(['rec-c']);
    expect(ids({ query: 'deploy', tag: 'deploy' })).toEqual(['rec-p']);
    expect(ids({ query: 'deploy', tag: 'dep' })).toEqual([]);
    expect(ids({ query: 'deploy', lifecycle: 'superseded' })).toEqual(['rec-c']);
    expect(ids({ query: 'deploy', updatedAfter: '2000-01-01' })).toEqual(['rec-c', 'rec-p']);
    expect(ids({ query: 'deploy', updatedBefore: '2000-01-01' })).toEqual([]);
    expect(ids({ query: 'deploy', updatedAfter: '2999-01-01T00:00:00Z' })).toEqual([]);
    expect(s.listRecords(OP, { tag: 'ops', kind: 'page' }).records.map((r) => r.id)).toEqual(['rec-p']);
  });

  it('[READ-1] a date filter at a record\'s exact updated_at: before excludes it (strictly earlier), after includes it', () => {
    const first = publish([{ id: 'rec-early', title: 'Early boundary', body: 'boundary word' }]).records[0]!;
    const second = publish([{ id: 'rec-late', title: 'Late boundary', body: 'boundary word' }]).records[0]!;
    const updatedAt = (path: string) => /\nupdated_at: "?([^"\n]+)"?\n/.exec(readFileSync(join(vault, path), 'utf8'))![1]!;
    const early = updatedAt(first.path);
    const late = updatedAt(second.path);
    expect(Date.parse(late)).toBeGreaterThan(Date.parse(early));
    const s = reader();
    const ids = (q: Parameters<KnowledgeService['search']>[1]) => s.search(OP, q).results.map((r) => r.id).sort();
    expect(ids({ query: 'boundary' })).toEqual(['rec-early', 'rec-late']);
    // Before the later one's own instant: the earlier record only.
    expect(ids({ query: 'boundary', updatedBefore: late })).toEqual(['rec-early']);
    expect(s.search(OP, { query: 'boundary', updatedBefore: late }).total).toBe(1);
    // Before the earlier one's own instant: nothing.
    expect(ids({ query: 'boundary', updatedBefore: early })).toEqual([]);
    // After (from) an instant includes the record updated at it.
    expect(ids({ query: 'boundary', updatedAfter: late })).toEqual(['rec-late']);
    expect(ids({ query: 'boundary', updatedAfter: early })).toEqual(['rec-early', 'rec-late']);
    expect(ids({ query: 'boundary', updatedAfter: early, updatedBefore: late })).toEqual(['rec-early']);
  });

  it('pages with nextOffset until every match was returned exactly once', () => {
    publish(Array.from({ length: 25 }, (_, i) => ({ id: `rec-${String(i).padStart(2, '0')}`, title: `Paged ${i}`, body: `common word ${i}` })));
    const s = reader();
    const seen: string[] = [];
    let offset: number | null = 0;
    const offsets: number[] = [];
    while (offset !== null) {
      offsets.push(offset);
      const page = s.search(OP, { query: 'common', limit: 10, offset });
      expect(page.total).toBe(25);
      seen.push(...page.results.map((r) => r.id));
      offset = page.nextOffset;
    }
    expect(offsets).toEqual([0, 10, 20]);
    expect(new Set(seen).size).toBe(25);
    expect(s.search(OP, { query: 'common', offset: 25 })).toEqual({ results: [], total: 25, nextOffset: null });

    const listed: string[] = [];
    let lo: number | null = 0;
    while (lo !== null) {
      const page = s.listRecords(OP, { limit: 7, offset: lo });
      listed.push(...page.records.map((r) => r.id));
      lo = page.nextOffset;
    }
    expect(listed).toHaveLength(25);
    expect(new Set(listed).size).toBe(25);
    // Stable order: equal updated_at (one publication) falls back to id.
    expect(listed).toEqual([...listed].sort());
  });

  it('the inventory lists records that have no searchable words', () => {
    publish([{ id: 'rec-punct', title: '???', body: '...' }]);
    const s = reader();
    expect(s.listRecords(OP).records.map((r) => r.id)).toEqual(['rec-punct']);
    expect(s.search(OP, { query: '???' }).total).toBe(0);
    expect(s.lookup(OP, '???')).toMatchObject({ status: 'found', record: { id: 'rec-punct' } });
  });

  it('lists by type: the claim_kind of a claim or the relationship_type of a relationship, alone and with a tag', () => {
    writeFileSync(join(sb.dir, 'src.txt'), 'source\n');
    publish([
      { id: 'rec-dec', kind: 'claim', title: 'A decision', extra: 'claim_kind: decision\ntags: [t1]' },
      { id: 'rec-fact', kind: 'claim', title: 'A fact', extra: 'claim_kind: fact\ntags: [t1]' },
      { id: 'rec-dec2', kind: 'claim', title: 'Another decision', extra: 'claim_kind: decision' },
      { id: 'rec-page', title: 'A page called decision', extra: 'tags: [t1]' },
    ], ['--evidence', 'src.txt']);
    publish([{ id: 'rec-rel', kind: 'relationship', title: 'Supports', extra: 'relationship_type: decision\nfrom: rec-fact\nto: rec-dec' }], ['--evidence', 'src.txt']);
    const s = reader();
    expect(s.listRecords(OP, { type: 'decision' }).records.map((r) => r.id).sort()).toEqual(['rec-dec', 'rec-dec2', 'rec-rel']);
    expect(s.listRecords(OP, { type: 'decision', kind: 'claim' }).total).toBe(2);
    expect(s.listRecords(OP, { type: 'decision', tag: 't1' }).records.map((r) => r.id)).toEqual(['rec-dec']);
    expect(s.listRecords(OP, { type: 'fact', tag: 't1' }).records.map((r) => r.id)).toEqual(['rec-fact']);
    expect(s.listRecords(OP, { type: 'nothing' }).total).toBe(0);
  });
});

describe('[READ-1] reading one record', () => {
  it('returns frontmatter, body, file text, evidence with its descriptor, links and backlinks', () => {
    writeFileSync(join(sb.dir, 'notes.txt'), 'measured at sea level\n');
    publish([{ id: 'rec-base', title: 'Base page', body: 'base' }]);
    const claim = publish([{
      id: 'rec-claim', kind: 'claim', title: 'Water boils at 100 C',
      extra: 'claim_kind: fact\ndependencies: [rec-base]\nx-custom: kept', body: 'See [[rec-base|the base]] and [[rec-missing]].',
    }], ['--evidence', 'notes.txt']);
    publish([{ id: 'rec-rel', kind: 'relationship', title: 'Claim supports base', extra: 'relationship_type: supports\nfrom: rec-claim\nto: rec-base' }], ['--evidence', 'notes.txt']);
    const s = reader();
    const v = s.readRecord(OP, 'rec-claim');
    expect(v.record).toMatchObject({ id: 'rec-claim', kind: 'claim', revision: 1, onDisk: 'same', body: 'See [[rec-base|the base]] and [[rec-missing]].\n' });
    expect(v.record.meta).toMatchObject({ claim_kind: 'fact', dependencies: ['rec-base'] });
    expect(v.record.text).toContain('x-custom: kept');
    expect(v.evidence).toHaveLength(1);
    expect(v.evidence[0]).toMatchObject({ known: true, size: 22, inHistory: true, mediaType: expect.stringContaining('text/plain'), citation: { source: v.evidence[0]!.sourceId } });
    expect(v.links).toEqual(['rec-base', 'rec-missing']);
    expect(v.backlinks.map((b) => b.id)).toEqual(['rec-rel']);
    const base = s.readRecord(OP, 'rec-base');
    expect(base.backlinks.map((b) => b.id).sort()).toEqual(['rec-claim', 'rec-rel']);
    expect(base.backlinksTotal).toBe(2);
    // A wiki link written with spaces inside the brackets is a link both ways.
    publish([{ id: 'rec-spaced', title: 'Spaced link', body: 'See [[ rec-base ]] too.' }]);
    expect(s.readRecord(OP, 'rec-spaced').links).toEqual(['rec-base']);
    expect(s.readRecord(OP, 'rec-base').backlinks.map((b) => b.id).sort()).toEqual(['rec-claim', 'rec-rel', 'rec-spaced']);

    // Edited outside Knowledge: the index still describes the published version; the text is what is on disk.
    appendFileSync(join(vault, claim.records[0]!.path), 'edited by hand\n');
    const changed = s.readRecord(OP, 'rec-claim');
    expect(changed.record.onDisk).toBe('changed');
    expect(changed.record.text).toContain('edited by hand');
    expect(changed.record.body).not.toContain('edited by hand');
    expect(errorCode(() => s.readRecord(OP, 'rec-nope'))).toBe('E_NOT_FOUND');
  });

  it('never follows a record file replaced by a symbolic link out of the vault', () => {
    const r = publish([{ id: 'rec-link', title: 'Linked away', body: 'indexed body' }]);
    const abs = join(vault, r.records[0]!.path);
    writeFileSync(join(sb.dir, 'outside.txt'), 'secret outside the vault\n');
    rmSync(abs);
    symlinkSync(join(sb.dir, 'outside.txt'), abs);
    const v = reader().readRecord(OP, 'rec-link');
    expect(v.record.onDisk).toBe('missing');
    expect(v.record.text).toBeNull();
    expect(v.record.body).toBe('indexed body\n');
  });
});

describe('[READ-2] history from the vault\'s Git history', () => {
  function threeRevisions() {
    const r1 = publish([{ id: 'rec-h', title: 'Evolving', body: 'first body' }]);
    const r2 = publish([{ id: 'rec-h', title: 'Evolving', body: 'second body', extra: 'revision: 1' }], ['--actor', 'agent']);
    const r3 = publish([{ id: 'rec-h', title: 'Evolving', body: 'third body', extra: 'revision: 2\nlifecycle: superseded' }]);
    return [r1, r2, r3];
  }

  it('lists every committed version newest first, with actor labels, revisions and publication ids', async () => {
    const [r1, r2, r3] = threeRevisions();
    publish([{ title: 'Unrelated' }]); // another record's commit is not a version of this one
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.git.state).toBe('ready');
    expect(h.queued).toBe(0);
    expect(h.versions.map((v) => [v.commit, v.actor, v.revision, v.publicationId])).toEqual([
      [r3!.git.commit, 'operator', 3, r3!.publicationId],
      [r2!.git.commit, 'agent', 2, r2!.publicationId],
      [r1!.git.commit, 'operator', 1, r1!.publicationId],
    ]);
    expect(h.versions[0]!.parent).toBe(r2!.git.commit);
    expect(h.versions[0]!.date).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(h.versions[0]!.subject).toContain('Evolving');
  });

  it('says how many of the record\'s commits the branch no longer holds (reset, .git replaced or deleted), which the list lacks', async () => {
    const [r1, r2, r3] = threeRevisions();
    publish([{ title: 'Unrelated' }]);
    let h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions).toHaveLength(3);
    expect(h.offBranch).toBeUndefined();
    // The user resets the branch below the last two publications of the record (their files stay as they are).
    userGit(sb, vault, ['reset', '-q', '--mixed', r1!.git.commit!]);
    h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions.map((v) => v.commit)).toEqual([r1!.git.commit]);
    expect(h.offBranch).toBe(2);
    const text = cli(sb, ['history', '--store', 'st', 'rec-h']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("  2 commit(s) Knowledge made of this record's file are not on branch main (was it reset, or .git replaced?); knowledge verify names them");
    expect(JSON.parse(cli(sb, ['history', '--store', 'st', 'rec-h', '--json']).stdout).offBranch).toBe(2);
    // Back where it was: nothing is missing.
    userGit(sb, vault, ['reset', '-q', '--mixed', r3!.git.commit!]);
    expect((await reader().recordHistory(OP, 'rec-h')).offBranch).toBeUndefined();
    // .git replaced by another repository that never held them: every version's commit is missing.
    rmSync(join(vault, '.git'), { recursive: true });
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    userGit(sb, vault, ['commit', '-q', '--allow-empty', '-m', 'fresh']);
    h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions).toEqual([]);
    expect(h.offBranch).toBe(3);
    // Deleted: the repository is absent, and with it the three commits.
    rmSync(join(vault, '.git'), { recursive: true });
    h = await reader().recordHistory(OP, 'rec-h');
    expect(h.git.state).toBe('absent');
    expect(h.offBranch).toBe(3);
    expect(cli(sb, ['history', '--store', 'st', 'rec-h']).stdout).toContain('3 commit(s) Knowledge made of this record\'s file are not in the repository');
    expect(r2!.git.state).toBe('committed');
  });

  it('lists a checkpoint that changed nothing at the path because the user committed those bytes first, as the receipt names it', async () => {
    const r1 = publish([{ id: 'rec-e', title: 'Swept', body: 'first body' }]);
    // A checkpoint waits on a lock; the user's own `git commit -a` meanwhile sweeps the installed revision in.
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    const r2 = publish([{ id: 'rec-e', title: 'Swept', body: 'second body', extra: 'revision: 1' }]);
    expect(r2.git.state).toBe('pending');
    rmSync(join(vault, '.git', 'index.lock'));
    userGit(sb, vault, ['commit', '-q', '-a', '-m', 'my own commit']);
    const userCommit = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const resumed = cli(sb, ['resume', '--store', 'st', r2.publicationId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const receipt = JSON.parse(resumed.stdout) as { git: { state: string; commit: string } };
    expect(receipt.git.state).toBe('committed');
    const h = await reader().recordHistory(OP, 'rec-e');
    expect(h.versions.map((v) => [v.commit, v.actor, v.revision, v.publicationId ?? null])).toEqual([
      [receipt.git.commit, 'operator', 2, r2.publicationId],
      [userCommit, 'unknown', 2, null],
      [r1.git.commit, 'operator', 1, r1.publicationId],
    ]);
    expect(h.offBranch).toBeUndefined();
    // The receipt's commit is a version like any other: it diffs against the first.
    const d = await reader().recordDiff(OP, 'rec-e', r1.git.commit!, receipt.git.commit);
    expect(d.patch).toContain('+second body');
  });

  it('diffs revision 1 against revision 3', async () => {
    const [r1, , r3] = threeRevisions();
    const d = await reader().recordDiff(OP, 'rec-h', r1!.git.commit!, r3!.git.commit!);
    expect(d.path).toBe(r1!.records[0]!.path);
    expect(d.patch).toContain(`--- a/${d.path}`);
    expect(d.patch).toContain('-first body');
    expect(d.patch).toContain('+third body');
    expect(d.patch).toContain('-revision: 1');
    expect(d.patch).toContain('+revision: 3');
    expect(d.patch).toContain('+lifecycle: superseded');
    expect(d.patch).not.toContain('second body');
    const same = await reader().recordDiff(OP, 'rec-h', r3!.git.commit!, r3!.git.commit!);
    expect(same.patch).toBe('');
  });

  it('refuses revision expressions and commits that are not versions of the record; a short id names only one of its versions', async () => {
    const [r1, r2] = threeRevisions();
    const other = publish([{ title: 'Other' }]);
    const s = reader();
    for (const bad of ['HEAD', 'main', r1!.git.commit!.slice(0, 6), `${r1!.git.commit}^`, '--output=/tmp/x']) {
      expect(await asyncErrorCode(() => s.recordDiff(OP, 'rec-h', bad, r1!.git.commit!)), bad).toBe('E_VALIDATION');
    }
    expect(await asyncErrorCode(() => s.recordDiff(OP, 'rec-h', other.git.commit!, r1!.git.commit!))).toBe('E_VALIDATION');
    // Shortened, it is matched against the record's own versions only (never handed to git as a revision).
    expect(await asyncErrorCode(() => s.recordDiff(OP, 'rec-h', other.git.commit!.slice(0, 12), r1!.git.commit!))).toBe('E_VALIDATION');
    const full = await s.recordDiff(OP, 'rec-h', r1!.git.commit!, r2!.git.commit!);
    expect(await s.recordDiff(OP, 'rec-h', r1!.git.commit!.slice(0, 12), r2!.git.commit!.slice(0, 7))).toEqual(full);
  });

  it('labels a user\'s own commit unknown and follows a rename to the current path', async () => {
    const [, , r3] = threeRevisions();
    const oldPath = r3!.records[0]!.path;
    const newPath = oldPath.replace('evolving.md', 'renamed.md');
    userGit(sb, vault, ['mv', oldPath, newPath]);
    userGit(sb, vault, ['commit', '-q', '-m', 'Rename by hand']);
    // What a scan records for a rename: the index follows the file (done directly here).
    const db = new Database(join(store, 'state.sqlite'));
    db.prepare('UPDATE records SET path = ? WHERE id = ?').run(newPath, 'rec-h');
    db.close();
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.path).toBe(newPath);
    expect(h.versions.map((v) => [v.actor, v.revision, v.path])).toEqual([
      ['unknown', 3, newPath],
      ['operator', 3, oldPath],
      ['agent', 2, oldPath],
      ['operator', 1, oldPath],
    ]);
    const d = await reader().recordDiff(OP, 'rec-h', h.versions[3]!.commit, h.versions[0]!.commit);
    expect(d.patch).toContain(`rename to ${newPath}`);
  });

  it('a user\'s merge that changed the file is a version (often the current one): listed and diffed against the first parent', async () => {
    const [, , r3] = threeRevisions();
    const path = r3!.records[0]!.path;
    const git = (...args: string[]) => userGit(sb, vault, args);
    git('checkout', '-q', '-b', 'side');
    writeFileSync(join(vault, path), readFileSync(join(vault, path), 'utf8').replace('third body', 'third body\nadded on side'));
    git('commit', '-q', '-am', 'side edit');
    git('checkout', '-q', 'main');
    const r4 = publish([{ id: 'rec-h', title: 'Evolving', body: 'fourth body\nthird body', extra: 'revision: 3' }]);
    git('merge', '-q', '--no-edit', 'side');
    const merge = git('rev-parse', 'HEAD').trim();
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions.map((v) => [v.commit, v.actor, v.revision])).toEqual([
      [merge, 'unknown', 4],
      [r4!.git.commit, 'operator', 4],
      [git('rev-parse', 'side').trim(), 'unknown', 3],
      [r3!.git.commit, 'operator', 3],
      expect.anything(),
      expect.anything(),
    ]);
    const d = await reader().recordDiff(OP, 'rec-h', r4!.git.commit!, merge);
    expect(d.patch).toContain('+added on side');
  });

  it('a rename made on a branch and merged keeps that branch\'s own versions (a merge that renames is not where the history turns)', async () => {
    const [r1, r2, r3] = threeRevisions();
    const oldPath = r3!.records[0]!.path;
    const newPath = oldPath.replace('evolving.md', 'renamed.md');
    const git = (...args: string[]) => userGit(sb, vault, args);
    git('checkout', '-q', '-b', 'side');
    git('mv', oldPath, newPath);
    git('commit', '-q', '-m', 'side rename');
    for (const n of [1, 2]) {
      writeFileSync(join(vault, newPath), readFileSync(join(vault, newPath), 'utf8') + `side edit ${n}\n`);
      git('commit', '-q', '-am', `side edit ${n}`);
    }
    git('checkout', '-q', 'main');
    writeFileSync(join(vault, 'unrelated.txt'), 'x\n');
    git('add', 'unrelated.txt');
    git('commit', '-q', '-m', 'unrelated');
    git('merge', '-q', '--no-edit', 'side');
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const h = await reader().recordHistory(OP, 'rec-h');
    const subjects = h.versions.map((v) => v.subject);
    // Every version of the record before the rename too, the ones Git's walk through the merge skipped among them (a version
    // that names no change at the path Git walks is found from the commits the store recorded).
    expect(h.versions.slice(3).map((v) => v.commit)).toEqual([r3!.git.commit, r2!.git.commit, r1!.git.commit]);
    expect(subjects.slice(0, 3)).toEqual(['side edit 2', 'side edit 1', 'side rename']);
    expect(h.versions.at(-1)!.commit).toBe(r1!.git.commit);
  });

  it('a move and rewrite the user committed with their own git: the scan pairs it by id, and history goes on at the old path', async () => {
    const [r1, r2, r3] = threeRevisions();
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const oldPath = r3!.records[0]!.path;
    const newPath = 'private/pages/renamed.md';
    userGit(sb, vault, ['mv', oldPath, newPath]);
    const text = readFileSync(join(vault, newPath), 'utf8');
    writeFileSync(join(vault, newPath), text.slice(0, text.indexOf('---\n', 4) + 4) + Array.from({ length: 30 }, (_, i) => `brand new line ${i}\n`).join(''));
    userGit(sb, vault, ['commit', '-q', '-am', 'move and rewrite']);
    const userCommit = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const scan = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout);
    expect(scan).toMatchObject({ renamed: [{ from: oldPath, to: newPath, edited: true }], git: null });
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions.map((v) => [v.commit, v.path])).toEqual([
      [userCommit, newPath],
      [r3!.git.commit, oldPath],
      [r2!.git.commit, oldPath],
      [r1!.git.commit, oldPath],
    ]);
  });

  it('a rename whose checkpoint is still waiting (the user holds index.lock): the committed versions are listed from the old path', async () => {
    const [r1, r2, r3] = threeRevisions();
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0); // the baseline, so the next scan commits what it finds
    const oldPath = r3!.records[0]!.path;
    const newPath = oldPath.replace('evolving.md', 'moved.md');
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    renameSync(join(vault, oldPath), join(vault, newPath));
    const scan = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout);
    expect(scan).toMatchObject({ renamed: [{ from: oldPath, to: newPath }], git: { state: 'pending', code: 'locked' } });
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.path).toBe(newPath);
    expect(h.queued).toBe(1);
    expect(h.versions.map((v) => [v.commit, v.path])).toEqual([[r3!.git.commit, oldPath], [r2!.git.commit, oldPath], [r1!.git.commit, oldPath]]);
    // Once it is committed, the rename is a version too.
    rmSync(join(vault, '.git', 'index.lock'));
    expect(JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout).retried).toMatchObject([{ git: { state: 'committed' } }]);
    const after = await reader().recordHistory(OP, 'rec-h');
    expect(after.queued).toBe(0);
    expect(after.versions.map((v) => v.path)).toEqual([newPath, oldPath, oldPath, oldPath]);
  });

  it('rename detection that crosses into another file (a broken one, in a conversation) ends the history there: nothing of it is listed or diffed [SURF-3]', async () => {
    const body = 'A long shared body line that makes the two files similar enough for git rename detection.\n';
    const file = (id: string, title: string, scope: string, broken = false) =>
      `---\nformat: knowledge-record-v1\nid: ${id}\nrevision: 1\nkind: page\ntitle: ${title}\nrecorded_at: "2025-01-01T00:00:00Z"\nupdated_at: "2025-01-01T00:00:00Z"\nscope: "${scope}"\nlifecycle: active\n${broken ? '' : '---\n'}${body}`;
    const conv = join(vault, 'conversations/c1/notes');
    const priv = join(vault, 'private/notes');
    mkdirSync(conv, { recursive: true });
    mkdirSync(priv, { recursive: true });
    const scan = () => expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    writeFileSync(join(conv, 'a.md'), file('a-1', 'Alpha secret', 'conversation:c1'));
    scan();
    writeFileSync(join(conv, 'a.md'), file('a-1', 'Alpha secret', 'conversation:c1', true)); // its closing --- gone
    scan();
    rmSync(join(conv, 'a.md'));
    writeFileSync(join(priv, 'b.md'), file('b-2', 'Beta page', 'private'));
    scan();
    // Git's --follow takes the new file for a rename of the broken one.
    expect(userGit(sb, vault, ['log', '--follow', '--format=%h', '--name-only', '--', 'private/notes/b.md'])).toContain('conversations/c1/notes/a.md');
    const agent: Caller = { kind: 'agent', agentId: 'bot' }; // no session: private only
    for (const caller of [agent, OP]) {
      const h = await reader().recordHistory(caller, 'b-2');
      expect(h.versions.map((v) => v.path)).toEqual(['private/notes/b.md']);
    }
    // A record moved out of a conversation keeps that conversation's versions from a caller who cannot read it.
    writeFileSync(join(conv, 'm.md'), file('m-3', 'Moving', 'conversation:c1'));
    scan();
    rmSync(join(conv, 'm.md'));
    writeFileSync(join(priv, 'm.md'), file('m-3', 'Moving', 'private'));
    scan();
    expect((await reader().recordHistory(OP, 'm-3')).versions.map((v) => v.path)).toEqual(['private/notes/m.md', 'conversations/c1/notes/m.md']);
    expect((await reader().recordHistory(agent, 'm-3')).versions.map((v) => v.path)).toEqual(['private/notes/m.md']);
    const withC1: Caller = { kind: 'agent', agentId: 'bot', session: 'c1' };
    expect((await reader().recordHistory(withC1, 'm-3')).versions).toHaveLength(2);
  });

  it('follows a move a scan paired by record id (moved and rewritten at once, which Git cannot guess), scan after scan', async () => {
    const file = (title: string, body: string) =>
      `---\nformat: knowledge-record-v1\nid: rec-mv\nrevision: 1\nkind: page\ntitle: ${title}\nrecorded_at: "2025-01-01T00:00:00Z"\nupdated_at: "2025-01-01T00:00:00Z"\nscope: private\nlifecycle: active\n---\n${body}\n`;
    const at = (rel: string) => join(vault, rel);
    // Long bodies with nothing in common: no similarity for Git's rename detection to go on.
    const words = (seed: string) => Array.from({ length: 60 }, (_, i) => `${seed} line ${i} ${seed.repeat(3)}`).join('\n');
    mkdirSync(at('private/notes'), { recursive: true });
    mkdirSync(at('private/archive/old'), { recursive: true });
    const scan = () => JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { renamed: Array<{ from: string; to: string; edited?: true }> };
    writeFileSync(at('private/notes/meeting.md'), file('Meeting', `Agenda: one, two.\n${words('agenda')}`));
    scan();
    writeFileSync(at('private/notes/meeting.md'), file('Meeting', `Agenda: one, two, three.\n${words('agenda')}`));
    scan();
    rmSync(at('private/notes/meeting.md'));
    writeFileSync(at('private/archive/2025-meeting.md'), file('Meeting 2025', words('minutes')));
    expect(scan().renamed).toEqual([{ from: 'private/notes/meeting.md', to: 'private/archive/2025-meeting.md', edited: true }]);
    rmSync(at('private/archive/2025-meeting.md'));
    writeFileSync(at('private/archive/old/m.md'), file('Old meeting', words('archived')));
    expect(scan().renamed).toEqual([{ from: 'private/archive/2025-meeting.md', to: 'private/archive/old/m.md', edited: true }]);
    const h = await reader().recordHistory(OP, 'rec-mv');
    expect(h.versions.map((v) => v.path)).toEqual(['private/archive/old/m.md', 'private/archive/2025-meeting.md', 'private/notes/meeting.md', 'private/notes/meeting.md']);
    const d = await reader().recordDiff(OP, 'rec-mv', h.versions[3]!.commit, h.versions[0]!.commit);
    expect(d.patch).toContain('Agenda: one, two.');
  });

  /** Three revisions of rec-h, a baseline scan, then its file edited by hand and scanned: that scan's receipt. */
  function threeRevisionsEditedByHand(edit: (text: string) => string) {
    const [r1, r2, r3] = threeRevisions();
    const path = r3!.records[0]!.path;
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    writeFileSync(join(vault, path), edit(readFileSync(join(vault, path), 'utf8')));
    const scanned = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout);
    expect(scanned, JSON.stringify(scanned)).toMatchObject({ modified: [path], git: { state: 'committed' } });
    return { r1, r2, r3, path, scanned };
  }

  it('a record whose id was changed by hand in its file keeps its old id\'s history (a tombstone, as for a deleted file)', async () => {
    const { r1, r2, r3, scanned } = threeRevisionsEditedByHand((text) => text.replace('id: rec-h', 'id: rec-renumbered'));
    expect(cli(sb, ['show', '--store', 'st', 'rec-h']).stderr).toMatch(/^E_NOT_FOUND: no record rec-h: its file was deleted; its history still lists every committed version/);
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions.map((v) => v.commit)).toEqual([r3!.git.commit, r2!.git.commit, r1!.git.commit]);
    // The new id's history starts at the scan that found it.
    expect((await reader().recordHistory(OP, 'rec-renumbered')).versions.map((v) => v.commit)).toEqual([scanned.git.commit]);
    // The old id goes on from its last revision when published again [REC-4].
    writeFileSync(join(sb.dir, 'again.md'), '---\nid: rec-h\nkind: page\ntitle: Evolving again\n---\nback\n');
    const again = cli(sb, ['publish', '--store', 'st', '--json', 'again.md']);
    expect(JSON.parse(again.stdout).records[0]).toMatchObject({ id: 'rec-h', revision: 4 });
  });

  it('a record whose file was broken by hand (seen by a scan) keeps its history, to read and recover; show says where to look', async () => {
    const { r1, r2, r3, path, scanned } = threeRevisionsEditedByHand((text) => text.replace('---\n', '---\nbroken: [by hand\n'));
    const shown = cli(sb, ['show', '--store', 'st', 'rec-h']);
    expect(shown.stderr).toMatch(/^E_NOT_FOUND: no record rec-h: its file \S+ no longer reads as a record \(see the scan's diagnostics\); its history still lists every committed version/);
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions.map((v) => [v.commit, v.path])).toEqual([
      [scanned.git.commit, path],
      [r3!.git.commit, path],
      [r2!.git.commit, path],
      [r1!.git.commit, path],
    ]);
  });

  it('a broken record\'s file then deleted, or moved away, is a deleted record: its history stays and its id goes on from its revision', async () => {
    for (const [how, end] of [['deleted', (p: string) => rmSync(join(vault, p))], ['moved', (p: string) => renameSync(join(vault, p), join(vault, 'private', 'moved-away.md'))]] as const) {
      const id = `rec-bk-${how}`;
      const r1 = publish([{ id, title: `Breaks then ${how}`, body: 'one' }]);
      const path = r1.records[0]!.path;
      const r2 = publish([{ id, title: `Breaks then ${how}`, body: 'two', extra: 'revision: 1' }]);
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      writeFileSync(join(vault, path), readFileSync(join(vault, path), 'utf8').replace('---\n', '---\nbroken: [by hand\n'));
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      end(path);
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      expect(cli(sb, ['show', '--store', 'st', id]).stderr, how).toMatch(new RegExp(`^E_NOT_FOUND: no record ${id}: its file was deleted; its history still lists every committed version`));
      const h = await reader().recordHistory(OP, id);
      expect(h.versions.map((v) => v.commit), how).toEqual(expect.arrayContaining([r2.git.commit, r1.git.commit]));
      // Not free for another partition; in its own it goes on from its last revision [REC-4].
      writeFileSync(join(sb.dir, `elsewhere-${how}.md`), `---\nid: ${id}\nkind: page\ntitle: Taken\n---\nx\n`);
      expect(cli(sb, ['publish', '--store', 'st', '--partition', 'conversation:x', `elsewhere-${how}.md`]).stderr, how).toMatch(/^E_CONFLICT: /);
      writeFileSync(join(sb.dir, `again-${how}.md`), `---\nid: ${id}\nkind: page\ntitle: Back\n---\nx\n`);
      const again = cli(sb, ['publish', '--store', 'st', '--json', `again-${how}.md`]);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout).records[0], how).toMatchObject({ id, revision: 3 });
      if (how === 'moved') rmSync(join(vault, 'private', 'moved-away.md'));
    }
  });

  it('a deleted record put back by hand under another name, revised, then broken or deleted again: history goes on through every path', async () => {
    for (const how of ['broken', 'deleted'] as const) {
      const id = `rec-back-${how}`;
      const r1 = publish([{ id, title: `Put back ${how}`, body: 'one' }]);
      const first = r1.records[0]!.path;
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      const text = readFileSync(join(vault, first));
      rmSync(join(vault, first));
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      const back = `private/back-${how}.md`;
      writeFileSync(join(vault, back), text);
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      const r2 = publish([{ id, title: `Put back ${how}`, body: 'two', extra: 'revision: 1' }]);
      expect(r2.records[0]!.path).toBe(back);
      if (how === 'broken') writeFileSync(join(vault, back), readFileSync(join(vault, back), 'utf8').replace('---\n', '---\nbroken: [by hand\n'));
      else rmSync(join(vault, back));
      const last = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { git: { commit: string } };
      const shown = cli(sb, ['show', '--store', 'st', id]).stderr;
      expect(shown, how).toMatch(how === 'broken' ? new RegExp(`its file ${back} no longer reads as a record`) : /its file was deleted/);
      const h = await reader().recordHistory(OP, id);
      const listed = h.versions.map((v) => v.commit);
      expect(listed, how).toEqual(expect.arrayContaining([r2.git.commit, r1.git.commit]));
      if (how === 'broken') expect(listed[0], how).toBe(last.git.commit); // the broken file is its newest version
      expect(new Set(h.versions.map((v) => v.path)), how).toEqual(new Set([first, back]));
    }
  });

  it('a record whose file has a decomposed (NFD) name, as macOS writes them, is shown and revised where it is', () => {
    const r1 = publish([{ id: 'rec-nfd', title: 'Decomposed', body: 'one' }]);
    const nfd = 'private/e\u0301te\u0301.md';
    renameSync(join(vault, r1.records[0]!.path), join(vault, nfd));
    expect(JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout).renamed).toEqual([expect.objectContaining({ to: nfd })]);
    const shown = JSON.parse(cli(sb, ['show', '--store', 'st', '--json', 'rec-nfd']).stdout);
    expect(shown.record).toMatchObject({ path: nfd, onDisk: 'same' });
    const r2 = publish([{ id: 'rec-nfd', title: 'Decomposed', body: 'two', extra: 'revision: 1' }]);
    expect(r2.records[0]).toMatchObject({ path: nfd, revision: 2 });
    expect(readFileSync(join(vault, nfd), 'utf8')).toContain('two');
  });

  it('a record whose file was deleted (seen by a scan) keeps its history, to read, diff and recover; show says where to look', async () => {
    const [r1, , r3] = threeRevisions();
    publish([{ id: 'rec-b-gone', title: 'B gone', body: 'in B' }], ['--partition', 'conversation:B', '--actor', 'agent']);
    rmSync(join(vault, r3!.records[0]!.path));
    const gonePathB = JSON.parse(cli(sb, ['show', '--store', 'st', '--json', 'rec-b-gone']).stdout).record.path as string;
    rmSync(join(vault, gonePathB));
    const scanned = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(JSON.parse(scanned.stdout).deleted.sort()).toEqual([gonePathB, r3!.records[0]!.path].sort());
    const s = reader();
    expect(s.lookup(OP, 'rec-h')).toEqual({ status: 'missing' });
    const shown = cli(sb, ['show', '--store', 'st', 'rec-h']);
    expect(shown.code).toBe(1);
    expect(shown.stderr).toMatch(/^E_NOT_FOUND: no record rec-h: its file was deleted; its history still lists every committed version/);
    const h = await s.recordHistory(OP, 'rec-h');
    expect(h.path).toBe(r3!.records[0]!.path);
    expect(h.versions.map((v) => v.revision)).toEqual([3, 2, 1]);
    const d = await s.recordDiff(OP, 'rec-h', r1!.git.commit!, r3!.git.commit!);
    expect(d.patch).toContain('+third body');
    // Partition scoping holds for deleted records too.
    expect((await s.recordHistory(agentB, 'rec-b-gone')).versions).toHaveLength(1);
    expect(await asyncErrorCode(() => s.recordHistory(agentA, 'rec-b-gone'))).toBe('E_NOT_FOUND');
    expect(errorCode(() => s.readRecord(agentA, 'rec-b-gone'))).toBe('E_NOT_FOUND');
    expect(() => s.readRecord(agentA, 'rec-b-gone')).toThrow(/^no record rec-b-gone$/);
    // Published again under its id: the record is back, with its whole history, going on from its last revision
    // (an expectation of revision 1 from before is stale [REC-4]).
    expect(cli(sb, ['publish', '--store', 'st', writeDraft({ id: 'rec-h', title: 'Evolving', body: 'stale', extra: 'revision: 1' })]).stderr).toMatch(/^E_CONFLICT: /);
    publish([{ id: 'rec-h', title: 'Evolving', body: 'fourth body' }]);
    const back = await reader().recordHistory(OP, 'rec-h');
    expect(back.versions.map((v) => v.revision)).toEqual([4, 3, 2, 1]);
  });

  it('a deleted record restored by hand keeps its earlier versions, though Git takes the restored file for a copy of a look-alike record', async () => {
    const note = (id: string, title: string, body: string) => `---\nformat: knowledge-record-v1\nid: ${id}\nrevision: 1\nkind: page\ntitle: ${title}\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: private\nlifecycle: active\n---\n${body}\n`;
    const a = join(vault, 'private/a.md');
    mkdirSync(dirname(a), { recursive: true });
    writeFileSync(a, note('ida', 'Note A', 'alpha text'));
    writeFileSync(join(vault, 'private/b.md'), note('idb', 'Note B', 'beta text'));
    const scanned = () => JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { git: { commit: string } | null };
    const base = scanned();
    writeFileSync(a, note('ida', 'Note A', 'alpha text edited'));
    const edit = scanned();
    const kept = join(sb.dir, 'a-kept.md');
    renameSync(a, kept); // to the trash
    scanned();
    renameSync(kept, a); // and back
    const back = scanned();
    // What made the old history stop: Git's --follow reads the restored file as a copy of b.md.
    expect(userGit(sb, vault, ['log', '--follow', '--name-status', '--format=', '--', 'private/a.md'])).toMatch(/^C\d+\tprivate\/b\.md\tprivate\/a\.md/m);
    const h = await reader().recordHistory(OP, 'ida');
    expect(h.versions.map((v) => v.commit)).toEqual([back.git!.commit, edit.git!.commit, base.git!.commit]);
    expect(h.versions.every((v) => v.path === 'private/a.md')).toBe(true);
    expect((await reader().recordHistory(OP, 'idb')).versions.map((v) => v.commit)).toEqual([base.git!.commit]);
  });

  it('a deleted record published again under its id at another path, or restored by hand elsewhere, keeps every earlier version', async () => {
    const first = publish([{ id: 'rec-plan', title: 'Plan', body: 'v1' }]).records[0]!;
    const scan = () => expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const pathOf = async () => (await reader().recordHistory(OP, 'rec-plan')).versions.map((v) => `${v.revision}:${v.path}`);
    rmSync(join(vault, first.path));
    scan();
    // A new title is a new file name: Git sees an unrelated file.
    const second = publish([{ id: 'rec-plan', title: 'Plan renamed', body: 'v2' }]).records[0]!;
    expect(second.path).not.toBe(first.path);
    expect(await pathOf()).toEqual([`2:${second.path}`, `1:${first.path}`]);
    // Deleted and published again once more: the chain goes back through both earlier paths.
    rmSync(join(vault, second.path));
    scan();
    const third = publish([{ id: 'rec-plan', title: 'Plan for good', body: 'v3' }]).records[0]!;
    expect(await pathOf()).toEqual([`3:${third.path}`, `2:${second.path}`, `1:${first.path}`]);
    // Deleted, and its file put back by hand under another name (a scan adds it).
    const text = readFileSync(join(vault, third.path));
    rmSync(join(vault, third.path));
    scan();
    mkdirSync(join(vault, 'private/restored'), { recursive: true });
    writeFileSync(join(vault, 'private/restored/plan.md'), text);
    scan();
    expect(await pathOf()).toEqual(['3:private/restored/plan.md', `3:${third.path}`, `2:${second.path}`, `1:${first.path}`]);
  });

  it('a hand-made file in another partition claiming a deleted record\'s id is not indexed: the id keeps its owner and history', async () => {
    const first = publish([{ id: 'rec-owned', title: 'Owned', body: 'v1' }]).records[0]!;
    const text = readFileSync(join(vault, first.path));
    rmSync(join(vault, first.path));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    mkdirSync(join(vault, 'conversations/c-other'), { recursive: true });
    writeFileSync(join(vault, 'conversations/c-other/owned.md'), text);
    const r = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const diags = (JSON.parse(r.stdout) as { diagnostics: Array<{ path: string; code: string; reason: string }> }).diagnostics;
    expect(diags.filter((d) => d.code === 'duplicate-id')).toEqual([
      { path: 'conversations/c-other/owned.md', code: 'duplicate-id', reason: expect.stringMatching(/^record id rec-owned belongs to a deleted record of another partition/) },
    ]);
    const s = reader();
    expect(() => s.readRecord(OP, 'rec-owned')).toThrow(/deleted/);
    expect((await s.recordHistory(OP, 'rec-owned')).versions.map((v) => `${v.revision}:${v.path}`)).toEqual([`1:${first.path}`]);
    // Put back in its own partition, it is the record again, with its history.
    writeFileSync(join(vault, first.path), text);
    rmSync(join(vault, 'conversations/c-other/owned.md'));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(s.readRecord(OP, 'rec-owned').record.path).toBe(first.path);
    // Live again, it may move to another partition in one scan like any record.
    mkdirSync(join(vault, 'conversations/c-moved'), { recursive: true });
    renameSync(join(vault, first.path), join(vault, 'conversations/c-moved/owned.md'));
    const moved = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { diagnostics: Array<{ code: string }> };
    expect(moved.diagnostics.filter((d) => d.code === 'duplicate-id')).toEqual([]);
    expect(s.readRecord(OP, 'rec-owned').record.path).toBe('conversations/c-moved/owned.md');
  });

  /**
   * A record published, its file deleted and scanned, then a copy of it put at `squatter` (another partition) and
   * scanned: that copy is left out, its id being a deleted record's.
   */
  function leftOutCopy(id: string, title: string, squatter: string) {
    const first = publish([{ id, title, body: 'v1' }]).records[0]!;
    const text = readFileSync(join(vault, first.path));
    rmSync(join(vault, first.path));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    mkdirSync(join(vault, dirname(squatter)), { recursive: true });
    writeFileSync(join(vault, squatter), text);
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    return { first, text, squatter };
  }

  it('a file refused a deleted record\'s id is an ordinary claim once the record is back: the state does not depend on which came first', () => {
    const { first, text, squatter } = leftOutCopy('rec-owned', 'Owned', 'conversations/c-other/owned.md');
    // Published again in its own partition, the record would be claimed twice: refused, naming the other file.
    writeFileSync(join(sb.dir, 'again.md'), recordText({ id: 'rec-owned', title: 'Owned', body: 'v2' }));
    const again = cli(sb, ['publish', '--store', 'st', 'again.md']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(new RegExp(`^E_CONFLICT: record #1: id rec-owned is also claimed by ${squatter}`));
    // Put back by hand in its own partition while the other file is there: two files claim the id, as when the other
    // file comes second — not a stale "belongs to a deleted record" that would leave the other file out for good.
    writeFileSync(join(vault, first.path), text);
    const r = cli(sb, ['scan', '--store', 'st', '--partition', 'private', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(() => reader().readRecord(OP, 'rec-owned')).toThrow(`no record rec-owned: its id is claimed by more than one file (${squatter}, ${first.path}); see the scan diagnostics [REC-3]`);
    const other = JSON.parse(cli(sb, ['scan', '--store', 'st', '--partition', 'conversation:c-other', '--json']).stdout) as { diagnostics: Array<{ path: string; code: string; reason: string }> };
    expect(other.diagnostics.filter((d) => d.code === 'duplicate-id')).toEqual([
      { path: squatter, code: 'duplicate-id', reason: `record id rec-owned is also claimed by ${first.path}; lookup returns no record for it` },
    ]);
    // The other file removed: the record alone again.
    rmSync(join(vault, squatter));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(reader().readRecord(OP, 'rec-owned').record.path).toBe(first.path);
  });

  it('a file left out before the store kept such files\' rows (migration 017) is read again by the next scan, and so is an ordinary claim once the record is back', () => {
    const { first, text, squatter } = leftOutCopy('rec-old', 'Old', 'conversations/c-old/old.md');
    // As a store left it before migration 017: the diagnostic, no row (and nothing of the migrations after it).
    const d = new Database(join(sb.dir, 'st', 'state.sqlite'));
    d.exec('DROP TABLE scan_blocked_claims');
    d.exec('ALTER TABLE sources DROP COLUMN descriptor'); // 018
    d.exec('DROP TABLE record_revision_floors'); // 019
    dropScanCounts(d); // 023
    d.pragma('user_version = 16');
    d.close();
    writeFileSync(join(vault, first.path), text);
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(() => reader().readRecord(OP, 'rec-old')).toThrow(`no record rec-old: its id is claimed by more than one file (${squatter}, ${first.path}); see the scan diagnostics [REC-3]`);
  });

  it('a record whose file was broken by hand keeps its id: a new record under it is refused until the file is fixed, then it goes on from its revision', () => {
    const first = publish([{ id: 'rec-broken', title: 'Breaks', body: 'v1' }]).records[0]!;
    const good = readFileSync(join(vault, first.path), 'utf8');
    writeFileSync(join(vault, first.path), good.replace(/^title: .*$/m, 'title: [oops'));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    writeFileSync(join(sb.dir, 'again.md'), recordText({ id: 'rec-broken', title: 'Breaks', body: 'v2' }));
    const again = cli(sb, ['publish', '--store', 'st', 'again.md']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^E_CONFLICT: record #1: record rec-broken's file .* no longer reads as a record/);
    // Still broken after another edit: still its id.
    writeFileSync(join(vault, first.path), good.replace(/^title: .*$/m, 'title: [oops again'));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(cli(sb, ['publish', '--store', 'st', 'again.md']).code).toBe(1);
    // Fixed: the record again, at its revision.
    writeFileSync(join(vault, first.path), good);
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(reader().readRecord(OP, 'rec-broken').record.revision).toBe(1);
  });

  it('a record whose file still exists is never taken for deleted: edited into invalid YAML, or its id now claimed twice', async () => {
    const bad = publish([{ id: 'rec-bad', title: 'Breaks', body: 'fine' }]).records[0]!.path;
    const dup = publish([{ id: 'rec-dup', title: 'Twice', body: 'once' }]).records[0]!.path;
    cli(sb, ['scan', '--store', 'st']);
    writeFileSync(join(vault, bad), '---\nid: rec-bad\ntitle: [unclosed\n---\n');
    const copy = dup.replace('twice.md', 'twice-copy.md');
    writeFileSync(join(vault, copy), readFileSync(join(vault, dup)));
    expect(JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout).deleted).toEqual([]);
    // Deleted, then a file claiming its id twice: the duplicate's answer, not the deleted record's.
    rmSync(join(vault, dup));
    cli(sb, ['scan', '--store', 'st']);
    writeFileSync(join(vault, dup), readFileSync(join(vault, copy)));
    cli(sb, ['scan', '--store', 'st']);
    const s = reader();
    // Not "its file was deleted": the broken file still holds its id, and its history is there to recover it.
    expect(() => s.readRecord(OP, 'rec-bad')).toThrow(/^no record rec-bad: its file \S+ no longer reads as a record/);
    expect((await s.recordHistory(OP, 'rec-bad')).versions.length).toBeGreaterThan(0);
    // Claimed twice, it is no record [REC-3]; show names both files, and history lists the versions of each.
    expect(() => s.readRecord(OP, 'rec-dup')).toThrow(`no record rec-dup: its id is claimed by more than one file (${copy}, ${dup}); see the scan diagnostics [REC-3]`);
    const h = await s.recordHistory(OP, 'rec-dup');
    expect(new Set(h.versions.map((v) => v.path))).toEqual(new Set([dup, copy]));
    expect(h.versions.map((v) => v.date)).toEqual(h.versions.map((v) => v.date).sort().reverse());
    expect(new Set(h.versions.map((v) => `${v.commit} ${v.path}`)).size).toBe(h.versions.length);
    // A version of one file can be diffed against one of the other (the same bytes here: a copy).
    const ofCopy = h.versions.find((v) => v.path === copy)!;
    const ofDup = h.versions.find((v) => v.path === dup)!;
    expect(await s.recordDiff(OP, 'rec-dup', ofCopy.commit, ofDup.commit)).toMatchObject({ from: ofCopy.commit, to: ofDup.commit, path: dup, patch: '' });
  });

  it('an id claimed in two partitions: an agent reads the history of its own file only, and is told of the other only as a file it cannot read [REC-3, SURF-3]', async () => {
    const mine = publish([{ id: 'rec-two', title: 'Mine', body: 'A wrote this' }], ['--partition', 'conversation:A', '--actor', 'agent']).records[0]!.path;
    const theirs = publish([{ id: 'rec-b-only', title: 'Theirs', body: 'B' }], ['--partition', 'conversation:B', '--actor', 'agent']).records[0]!.path;
    const copy = join(dirname(theirs), 'copied.md');
    writeFileSync(join(vault, copy), readFileSync(join(vault, mine)));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const s = reader();
    expect(() => s.readRecord(agentA, 'rec-two')).toThrow(`no record rec-two: its id is claimed by more than one file (${mine}, a file you cannot read); see the scan diagnostics [REC-3]`);
    expect((await s.recordHistory(agentA, 'rec-two')).versions.map((v) => v.path)).toEqual([mine]);
    expect(new Set((await s.recordHistory(OP, 'rec-two')).versions.map((v) => v.path))).toEqual(new Set([mine, copy]));
    // An agent that can read neither file learns nothing.
    expect(() => s.readRecord(agentNoSession, 'rec-two')).toThrow(/^no record rec-two$/);
    expect(await asyncErrorCode(() => s.recordHistory(agentNoSession, 'rec-two'))).toBe('E_NOT_FOUND');
  });

  it('is empty, not an error, before the repository exists; queued versions are counted', async () => {
    // Git cannot run: the publication is accepted and its checkpoint waits [GIT-14].
    writeFileSync(join(sb.dir, 'q.md'), recordText({ id: 'rec-q', title: 'Queued' }));
    const r = cli(sb, ['publish', '--store', 'st', '--json', 'q.md'], { env: { KNOWLEDGE_GIT: join(sb.dir, 'no-such-git') } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).git.state).toBe('unavailable');
    const h = await reader().recordHistory(OP, 'rec-q');
    expect(h).toMatchObject({ versions: [], queued: 1, git: { state: 'absent' } });
  });

  it('reports a Git that cannot run as unavailable, with no versions, instead of failing', async () => {
    threeRevisions();
    const h = await reader({ gitPath: join(sb.dir, 'no-such-git') }).recordHistory(OP, 'rec-h');
    expect(h.versions).toEqual([]);
    expect(h.git.state).toBe('unavailable');
  });

  it('reports a damaged repository as pending, with no versions', async () => {
    threeRevisions();
    // HEAD now names a ref file with garbage in it.
    writeFileSync(join(vault, '.git', 'refs', 'heads', 'main'), 'garbage\n');
    const h = await reader().recordHistory(OP, 'rec-h');
    expect(h.versions).toEqual([]);
    expect(h.git.state).toBe('pending');
  });
});

describe('[SURF-1] CLI: history, show, search, lookup, list', () => {
  it('the repository\'s log and diff settings change nothing history reads: log.showRoot=false, diff.context=0, core.bigFileThreshold, a -diff attribute [GIT-12]', () => {
    const a = publish([{ id: 'rec-cfg', title: 'Config page', body: 'one' }]);
    const b = publish([{ id: 'rec-cfg', title: 'Config page', body: 'two', extra: 'revision: 1' }]);
    const before = cli(sb, ['history', '--store', 'st', 'rec-cfg', '--from', a.git.commit!, '--to', b.git.commit!]).stdout;
    expect(before).toContain('+two');
    for (const [k, v] of [['log.showRoot', 'false'], ['diff.context', '0'], ['core.bigFileThreshold', '10'], ['diff.algorithm', 'patience'], ['diff.interHunkContext', '20'], ['diff.suppressBlankEmpty', 'true'], ['diff.orderFile', '/nonexistent']]) {
      userGit(sb, vault, ['config', k!, v!]);
    }
    writeFileSync(join(vault, '.git', 'info', 'attributes'), '*.md -diff\n');
    // The root commit's version is still listed (it was the first publication's).
    const h = JSON.parse(cli(sb, ['history', '--store', 'st', 'rec-cfg', '--json']).stdout);
    expect(h.versions.map((v: { commit: string }) => v.commit)).toEqual([b.git.commit, a.git.commit]);
    expect(userGit(sb, vault, ['rev-list', '--max-parents=0', 'HEAD']).trim()).toBe(a.git.commit);
    // And the patch is the very same text.
    const after = cli(sb, ['history', '--store', 'st', 'rec-cfg', '--from', a.git.commit!, '--to', b.git.commit!]).stdout;
    expect(after).toBe(before);
    expect(after).not.toContain('Binary');
  });

  it('prints history and a diff as JSON and text, and fails with E_NOT_FOUND for unknown ids', () => {
    const a = publish([{ id: 'rec-cli', title: 'CLI page', body: 'one' }]);
    const b = publish([{ id: 'rec-cli', title: 'CLI page', body: 'two', extra: 'revision: 1' }], ['--actor', 'agent']);
    const h = cli(sb, ['history', '--store', 'st', 'rec-cli', '--json']);
    expect(h.code, h.stderr).toBe(0);
    const hist = JSON.parse(h.stdout);
    expect(hist.versions.map((v: { commit: string; actor: string }) => [v.commit, v.actor])).toEqual([[b.git.commit, 'agent'], [a.git.commit, 'operator']]);
    const text = cli(sb, ['history', '--store', 'st', 'rec-cli']);
    expect(text.stdout).toContain('agent');
    const d = cli(sb, ['history', '--store', 'st', 'rec-cli', '--from', a.git.commit!, '--to', b.git.commit!]);
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toContain('+two');
    // The short ids the text prints are enough.
    const short = (c: string) => text.stdout.match(new RegExp(`\\b(${c.slice(0, 7)}[0-9a-f]*)\\b`))![1]!;
    expect(short(a.git.commit!).length).toBeLessThan(40);
    const ds = cli(sb, ['history', '--store', 'st', 'rec-cli', '--from', short(a.git.commit!), '--to', short(b.git.commit!)]);
    expect(ds.code, ds.stderr).toBe(0);
    expect(ds.stdout).toBe(d.stdout);
    expect(cli(sb, ['history', '--store', 'st', 'rec-cli', '--from', 'abc', '--to', short(b.git.commit!)]).stderr).toMatch(/^E_VALIDATION: from and to must be commit ids/);
    expect(cli(sb, ['history', '--store', 'st', 'rec-cli', '--from', a.git.commit!]).code).toBe(2);
    const missing = cli(sb, ['history', '--store', 'st', 'rec-none']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^E_NOT_FOUND: /);
  });

  it('show, search, lookup and list print values with --json and text without', () => {
    publish([{ id: 'rec-s', title: 'Searchable page', body: 'needle in a haystack', extra: 'aliases: [Pin]' }]);
    const json = (args: string[]) => {
      const r = cli(sb, [...args, '--store', 'st', '--json']);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };
    expect(json(['show', 'rec-s']).record).toMatchObject({ id: 'rec-s', onDisk: 'same' });
    expect(json(['search', 'needle', 'haystack'])).toMatchObject({ total: 1, nextOffset: null, results: [{ id: 'rec-s' }] });
    expect(cli(sb, ['search', '--store', 'st', 'needle']).stdout).toContain('**needle**');
    expect(json(['lookup', 'pin'])).toMatchObject({ status: 'found', record: { id: 'rec-s' } });
    expect(json(['list', '--limit', '5'])).toMatchObject({ total: 1, records: [{ id: 'rec-s' }] });
    const tooLong = cli(sb, ['search', '--store', 'st', 'x'.repeat(501)]);
    expect(tooLong.code).toBe(1);
    expect(tooLong.stderr).toMatch(/^E_VALIDATION: /);
    expect(cli(sb, ['search', '--store', 'st']).code).toBe(2);
    // A bad date names the flag the user typed.
    const badDate = cli(sb, ['search', '--store', 'st', '--after', 'yesterday', 'needle']);
    expect(badDate.code).toBe(1);
    expect(badDate.stderr).toMatch(/^E_VALIDATION: --after must be a UTC timestamp/);
    expect(json(['search', '--after', '2000-01-01', 'needle'])).toMatchObject({ total: 1 });
    // A page past the last says so, not "11-10 of 1".
    expect(cli(sb, ['list', '--store', 'st', '--offset', '10']).stdout).toBe('nothing this far: 1 in all, and --offset 10 skips them all\n');
    expect(cli(sb, ['search', '--store', 'st', '--offset', '5', 'needle']).stdout).toBe('nothing this far: 1 in all, and --offset 5 skips them all\n');
    expect(cli(sb, ['list', '--store', 'st']).stdout).toMatch(/\n1-1 of 1\n$/);
  });

  it('text output shows the control characters of record text as \\xNN, so a body cannot send escape sequences to the terminal; --json is unchanged', () => {
    // Clear the screen, turn red, retitle the window (OSC ... BEL), a C1 CSI; a title that would reorder its line (RLO).
    const body = 'hello \u001b[2J\u001b[31mwidget red\u001b]0;pwned\u0007 tail \u009b1m\r\n\tindented\rover\n';
    const a = publish([{ id: 'rec-esc', title: 'Esc body \u202egnp.exe', body, extra: 'aliases: [Esc alias]' }]);
    const b = publish([{ id: 'rec-esc', title: 'Esc body \u202egnp.exe', body: `${body}more \u001b[2J red\n`, extra: 'revision: 1' }]);
    // eslint-disable-next-line no-control-regex
    const raw = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]|\r(?!\n)/;
    const text = (args: string[]) => {
      const r = cli(sb, [...args.slice(0, 1), '--store', 'st', ...args.slice(1)]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout, args.join(' ')).not.toMatch(raw);
      return r.stdout;
    };
    const search = text(['search', 'red']);
    expect(search).toContain('Esc body \\u202egnp.exe');
    expect(search).toContain('\\x1b[2J\\x1b[31mwidget **red**\\x1b]0;pwned\\x07 tail \\x9b1m');
    const show = text(['show', 'rec-esc']);
    expect(show.split('\n')[0]).toBe('Esc body \\u202egnp.exe');
    // The body keeps its lines and tabs (and CRLF); a carriage return alone would overwrite its line.
    expect(show).toContain('\nhello \\x1b[2J\\x1b[31mwidget red\\x1b]0;pwned\\x07 tail \\x9b1m\r\n\tindented\\x0dover\nmore \\x1b[2J red\n');
    expect(text(['lookup', 'rec-esc'])).toContain('Esc body \\u202egnp.exe');
    expect(text(['list'])).toContain('Esc body \\u202egnp.exe');
    expect(text(['history', 'rec-esc'])).toContain('rec-esc');
    expect(text(['history', 'rec-esc', '--from', a.git.commit!, '--to', b.git.commit!])).toContain('+more \\x1b[2J red');
    expect(text(['show', 'rec-esc'])).toBe(show);
    // --json is the value itself (JSON escapes control characters as it does).
    const json = JSON.parse(cli(sb, ['show', '--store', 'st', '--json', 'rec-esc']).stdout);
    expect(json.record.body).toBe(`${body}more \u001b[2J red\n\n`); // recordText() ends the file with a line break of its own
    expect(json.record.title).toBe('Esc body \u202egnp.exe');
  });

  it('list walks by --cursor: nextCursor in JSON, the next flag in text, E_VALIDATION for a bad one or one beside --offset', () => {
    const published = publish(['a', 'b', 'c'].map((x) => ({ id: `rec-${x}`, title: `Walk ${x}` })));
    const run = (args: string[]) => cli(sb, ['list', '--store', 'st', ...args]);
    const first = JSON.parse(run(['--limit', '2', '--json']).stdout);
    expect(first).toMatchObject({ total: 3, nextOffset: 2, records: [{ id: 'rec-a' }, { id: 'rec-b' }] });
    expect(typeof first.nextCursor).toBe('string');
    // Deleting a record already listed does not shift the walk (an offset would skip rec-c now).
    rmSync(join(sb.dir, 'st', 'vault', published.records.find((r) => r.id === 'rec-a')!.path));
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    expect(JSON.parse(run(['--limit', '2', '--offset', '2', '--json']).stdout).records).toEqual([]);
    const second = JSON.parse(run(['--limit', '2', '--cursor', first.nextCursor, '--json']).stdout);
    expect(second).toMatchObject({ total: 2, nextOffset: null, nextCursor: null, records: [{ id: 'rec-c' }] });
    const text = run(['--limit', '1', '--cursor', first.nextCursor]).stdout;
    expect(text).toMatch(/\n1 after the cursor, of 2\n$/);
    const more = run(['--limit', '1']).stdout;
    // The text names the next page both ways; its cursor goes on from there.
    const next = /\n1-1 of 2 {2}\(next: --offset 1, or --cursor (\S+)\)\n$/.exec(more);
    expect(next, more).not.toBeNull();
    expect(JSON.parse(run(['--cursor', next![1]!, '--json']).stdout).records.map((r: { id: string }) => r.id)).toEqual(['rec-c']);
    const both = run(['--cursor', first.nextCursor, '--offset', '1']);
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/^E_VALIDATION: give cursor or offset, not both/);
    const bad = run(['--cursor', 'nonsense']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^E_VALIDATION: cursor must be the nextCursor of an earlier list page/);
    expect(cli(sb, ['search', '--store', 'st', '--cursor', first.nextCursor, 'walk']).code).toBe(2);
  });
});

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { createHash } from 'node:crypto';
import { join, relative } from 'node:path';
import YAML from 'yaml';
import Database from 'better-sqlite3';
import { storeSandbox, cli, cliPath, userGit, unprivilegedCli, NO_UNPRIVILEGED, UNPRIVILEGED_NOTE, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { isKnowledgeError } from '../src/errors.js';
import type { PublishRequest } from '../src/publish/types.js';

let sb: Sandbox;
let vault: string;
beforeEach(() => ({ sb, vault } = storeSandbox()));
afterEach(() => sb.cleanup());

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

function write(name: string, text: string | Buffer): string {
  writeFileSync(join(sb.dir, name), text);
  return name;
}

function publish(args: string[]) {
  const r = cli(sb, ['publish', '--store', 'st', '--json', ...args]);
  return { ...r, receipt: r.code === 0 ? JSON.parse(r.stdout) : null };
}

describe('publish: receipt contract (Appendix A)', () => {
  it('returns one JSON receipt with records, evidence and git state; paths vault-relative', () => {
    write('c.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Water boils at 100 C\n---\nAt sea level.\n');
    write('notes.txt', 'measured at sea level\n');
    const { code, receipt, stderr } = publish(['--evidence', 'notes.txt', 'c.md', '--request-id', '6f1b7a52-5e39-4c1d-9d0a-6f4e2b0d9c11']);
    expect(code, stderr).toBe(0);
    expect(receipt).toMatchObject({
      kind: 'publication',
      requestId: '6f1b7a52-5e39-4c1d-9d0a-6f4e2b0d9c11',
      partition: 'private',
      actor: 'operator',
      git: { state: 'committed' },
    });
    expect(receipt.publicationId).toMatch(/^pub-/);
    expect(receipt.records).toHaveLength(1);
    const rec = receipt.records[0];
    expect(rec).toMatchObject({ revision: 1, path: expect.stringMatching(/^private\/claims\/[0-9a-f]{2}\/water-boils-at-100-c\.md$/) });
    expect(rec.sha256).toBe(sha(readFileSync(join(vault, rec.path))));
    expect(receipt.evidence).toEqual([
      expect.objectContaining({ sha256: sha('measured at sea level\n'), size: 22, inHistory: true }),
    ]);
    expect(receipt.git.commit).toMatch(/^[0-9a-f]{40}$/);
  });
});

describe('[REC-1] the store fills store-owned fields', () => {
  it('writes format, id, revision, scope, recorded_at, updated_at, lifecycle; keeps unknown keys [REC-2]', () => {
    write('p.md', '---\nkind: page\ntitle: My page\nx-custom:\n  nested: [1, two, {three: 3}]\n  when: 2026-01-01\n---\n# Body\n');
    const { receipt, stderr } = publish(['p.md']);
    expect(receipt, stderr).not.toBeNull();
    const text = readFileSync(join(vault, receipt.records[0].path), 'utf8');
    const fm = YAML.parse(text.split('---\n')[1]!);
    expect(fm).toMatchObject({
      format: 'knowledge-record-v1', id: receipt.records[0].id, revision: 1, kind: 'page', title: 'My page',
      scope: 'private', lifecycle: 'active',
      'x-custom': { nested: [1, 'two', { three: 3 }], when: '2026-01-01' },
    });
    expect(fm.recorded_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(fm.updated_at).toBe(fm.recorded_at);
    expect(text.endsWith('# Body\n')).toBe(true);
  });

  it('writes unknown keys\' numbers back as the author wrote them, on a first publication and a revision [REC-2]', () => {
    // Past a double's precision, hex, octal, a sign, an exponent past the double range, leading zeros, trailing zeros.
    const numbers = 'ticket: 12345678901234567890\nhex: 0x1F\noct: 0o17\nplus: +12\nhuge: 1.0e+400\nzeros: 00012\nprice: 1.50\n' +
      'list: [ 1, 2.0, -0x1, 123456789012345678901234567890 ]\nnested:\n  n: -007\n';
    write('n.md', `---\nkind: page\ntitle: Numbers\n${numbers}---\nbody\n`);
    const first = publish(['n.md']);
    expect(first.code, first.stderr).toBe(0);
    const path = join(vault, first.receipt.records[0].path);
    expect(readFileSync(path, 'utf8')).toContain(`title: Numbers\n${numbers}---\nbody\n`);
    const id = first.receipt.records[0].id;
    write('n2.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Numbers\n${numbers}---\nbody 2\n`);
    const second = publish(['n2.md']);
    expect(second.code, second.stderr).toBe(0);
    expect(readFileSync(path, 'utf8')).toContain(`title: Numbers\n${numbers}---\nbody 2\n`);
    expect(readFileSync(path, 'utf8')).toMatch(/\nrevision: 2\n/);
  });
});

describe('[REC-1][REC-2] a record written with CRLF line ends', () => {
  it('is stored with CRLF throughout (the frontmatter the store fills too), reads back, and a scan finds it unchanged', () => {
    write('crlf.md', '---\r\nkind: page\r\ntitle: Windows notes\r\nx-owner: ops\r\n---\r\nline one\r\nline two\r\n');
    const r = publish(['crlf.md']);
    expect(r.code, r.stderr).toBe(0);
    const stored = readFileSync(join(vault, r.receipt.records[0].path), 'utf8');
    expect(stored.replace(/\r\n/g, '')).not.toContain('\n'); // no bare LF: one line ending, not a mix
    expect(stored).toContain('\r\nrevision: 1\r\n');
    expect(stored.endsWith('---\r\nline one\r\nline two\r\n')).toBe(true);
    const shown = JSON.parse(cli(sb, ['show', '--store', 'st', '--json', r.receipt.records[0].id]).stdout);
    expect(shown).toMatchObject({ record: { title: 'Windows notes', onDisk: 'same' } });
    expect(JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout)).toMatchObject({ added: [], modified: [] });
    // Revised from the stored file, it stays CRLF.
    write('rev.md', stored.replace('line two', 'line three'));
    const rev = publish(['rev.md']);
    expect(rev.code, rev.stderr).toBe(0);
    expect(readFileSync(join(vault, rev.receipt.records[0].path), 'utf8').replace(/\r\n/g, '')).not.toContain('\n');
  });
});

describe('[REC-4] revisions and conflicts', () => {
  it('revising with the current revision writes revision+1 at the same path; a stale revision is E_CONFLICT and writes nothing', () => {
    write('p.md', '---\nkind: page\ntitle: Evolving\nkeep: me\n---\nv1\n');
    const first = publish(['p.md']).receipt;
    const id = first.records[0].id;
    write('p2.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Evolving\nkeep: me\n---\nv2\n`);
    const second = publish(['p2.md']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.receipt.records[0]).toMatchObject({ id, revision: 2, path: first.records[0].path });
    const before = readFileSync(join(vault, first.records[0].path));
    write('stale.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Evolving\n---\nstale\n`);
    const stale = publish(['stale.md']);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/^E_CONFLICT: .*revision 2/);
    expect(readFileSync(join(vault, first.records[0].path))).toEqual(before);
    write('norev.md', `---\nid: ${id}\nkind: page\ntitle: Evolving\n---\nno revision\n`);
    expect(publish(['norev.md']).stderr).toMatch(/^E_CONFLICT: /);
    // Exactly two publications were recorded.
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toHaveLength(2);
  });

  it('an expected revision of a record that does not exist is E_CONFLICT (a bad one E_VALIDATION), and writes nothing', () => {
    for (const [rev, re] of [['5', /^E_CONFLICT: record #1: record rec-new5 does not exist, so it has no revision 5/], ['1', /^E_CONFLICT: /], ['0', /^E_VALIDATION: record #1: .*positive integer/], ['"1"', /^E_VALIDATION: /], ['1.5', /^E_VALIDATION: /]] as const) {
      write('n.md', `---\nid: rec-new5\nrevision: ${rev}\nkind: page\ntitle: New\n---\nx\n`);
      const r = publish(['n.md']);
      expect(r.code, rev).toBe(1);
      expect(r.stderr, rev).toMatch(re);
    }
    expect(existsSync(join(vault, 'private'))).toBe(false);
    write('n.md', '---\nid: rec-new5\nkind: page\ntitle: New\n---\nx\n');
    expect(publish(['n.md']).receipt.records[0]).toMatchObject({ id: 'rec-new5', revision: 1 });
  });
});

describe('[PUB-1][REC-4] a record edited on disk since Knowledge recorded it', () => {
  it('[PUB-1][REC-4] revising it is E_CONFLICT "run knowledge scan first", and the whole request writes nothing: not its new record, no activity', () => {
    write('p.md', '---\nkind: page\ntitle: Edited by hand\n---\nv1\n');
    const first = publish(['p.md']);
    expect(first.code, first.stderr).toBe(0);
    const { id, path } = first.receipt.records[0];
    // Edited by hand, not scanned: the index still has the published bytes.
    const edited = `${readFileSync(join(vault, path), 'utf8')}A line added by hand.\n`;
    writeFileSync(join(vault, path), edited);
    const files = () => readdirSync(vault, { recursive: true }).map(String).filter((f) => !f.startsWith('.git') && !f.startsWith('.knowledge-history')).sort();
    const filesBefore = files();
    const activityBefore = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout);
    expect(activityBefore).toHaveLength(1);
    write('new.md', '---\nid: rec-brand-new\nkind: page\ntitle: Brand new\n---\nnew\n');
    write('rev.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Edited by hand\n---\nv2\n`);
    const r = publish(['new.md', 'rev.md']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr.trim()).toMatch(new RegExp(`^E_CONFLICT: record #2: ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} changed on disk since Knowledge last recorded it; run knowledge scan first$`));
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toHaveLength(1);
    expect(files()).toEqual(filesBefore);
    expect(readFileSync(join(vault, path), 'utf8')).toBe(edited);
    expect(JSON.parse(cli(sb, ['lookup', '--store', 'st', '--json', 'rec-brand-new']).stdout)).toMatchObject({ status: 'missing' });
  });
});

describe('[PUB-1] validation writes nothing', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['no frontmatter', 'just text\n', /E_VALIDATION: record #1: /],
    ['unclosed frontmatter', '---\nkind: page\ntitle: x\n', /E_VALIDATION: /],
    ['broken yaml', '---\nkind: [page\ntitle: x\n---\n', /E_VALIDATION: /],
    ['unknown kind', '---\nkind: essay\ntitle: x\n---\n', /E_VALIDATION: .*kind/],
    ['claim without evidence', '---\nkind: claim\nclaim_kind: fact\ntitle: x\n---\n', /E_VALIDATION: .*evidence/],
    ['claim without claim_kind', '---\nkind: claim\ntitle: x\nevidence: [{source: src-000000000000000000000000}]\n---\n', /E_VALIDATION: .*claim_kind/],
    ['cites unknown source', '---\nkind: page\ntitle: x\nevidence: [{source: src-000000000000000000000000}]\n---\n', /E_VALIDATION: .*unknown evidence/],
    ['relationship to nowhere', '---\nkind: relationship\nrelationship_type: supports\nfrom: a\nto: b\ntitle: x\n---\n', /E_VALIDATION: /],
    // The store writes these fields' values itself: an alias to an anchor on one would be left dangling.
    ['alias to an anchor on scope', '---\nkind: page\ntitle: x\nscope: &s private\nmirror: *s\n---\n', /E_VALIDATION: .*anchor on a field the store fills/],
    ['alias to an anchor on updated_at', '---\nkind: page\ntitle: x\nupdated_at: &u "2026-01-01T00:00:00Z"\nmirror: *u\n---\n', /E_VALIDATION: .*anchor on a field the store fills/],
  ];
  for (const [name, text, re] of cases) {
    it(`${name}: clear error with a stable code, nothing installed`, () => {
      write('bad.md', text);
      const r = publish(['bad.md']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(re);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(existsSync(join(vault, 'private'))).toBe(false);
      expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toEqual([]);
    });
  }

  it('[REC-1] a relationship whose endpoints are no records of its partition (well-formed ids, evidence cited): E_VALIDATION naming the endpoint, nothing installed', () => {
    write('ev.txt', 'why they relate\n');
    write('rel.md', '---\nkind: relationship\nrelationship_type: supports\nfrom: rec-nowhere\nto: rec-nowhere-else\ntitle: x\n---\n');
    const r = publish(['--evidence', 'ev.txt', 'rel.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: record #1: relationship endpoint "rec-nowhere" is not a record of this partition\n$/);
    expect(existsSync(join(vault, 'private'))).toBe(false);
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toEqual([]);
  });

  it('[Appendix A] activity --json: each entry is kind, id, createdAt (a UTC ISO timestamp), actor, git, detail, and the cursor of the entries after it', () => {
    write('ok.md', '---\nkind: page\ntitle: Listed\n---\nbody\n');
    expect(publish(['ok.md']).code).toBe(0);
    const entries = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as Array<Record<string, unknown>>;
    expect(entries).toHaveLength(1);
    expect(Object.keys(entries[0]!).sort()).toEqual(['actor', 'createdAt', 'cursor', 'detail', 'git', 'id', 'kind']);
    expect(entries[0]!.cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(entries[0]).toMatchObject({ kind: 'publication', actor: 'operator', git: { state: 'committed' } });
    expect(entries[0]!.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('usage errors exit 2', () => {
    expect(cli(sb, ['publish', '--store', 'st']).code).toBe(2);
    expect(cli(sb, ['publish', '--store', 'st', '--bogus', 'x.md']).code).toBe(2);
    expect(cli(sb, ['frobnicate']).code).toBe(2);
    // An option that takes one value, given twice: not the last one silently.
    for (const args of [
      ['publish', '--store', 'st', '--partition', 'private', '--partition', 'conversation:s1', 'x.md'],
      ['scan', '--store', 'st', '--partition', 'private', '--partition', 'conversation:s1'],
      ['activity', '--store', 'st', '--store', 'other'],
    ]) {
      const r = cli(sb, args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/--(partition|store) may be given once/);
    }
  });

  it('frontmatter with a "---" or % directive of its own inside is E_VALIDATION: stored, it would not read back as a record', () => {
    write('d.md', '---\n--- \nkind: page\ntitle: Double marker\n---\nBody.\n');
    const r = publish(['d.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: .*without a "---" marker or % directives/);
    expect(existsSync(join(vault, 'private'))).toBe(false);
  });

  it('receipt and resume of an id that names nothing say what was looked for', () => {
    for (const cmd of ['receipt', 'resume']) {
      const r = cli(sb, [cmd, '--store', 'st', 'pub-nope']);
      expect(r.code, cmd).toBe(1);
      expect(r.stderr).toBe('E_NOT_FOUND: no publication, attachment or request pub-nope\n');
    }
  });

  it('a bad partition or request id is E_VALIDATION', () => {
    write('p.md', '---\nkind: page\ntitle: x\n---\n');
    expect(publish(['--partition', 'conversation:../x', 'p.md']).stderr).toMatch(/^E_VALIDATION: invalid session id/);
    expect(publish(['--partition', 'public', 'p.md']).stderr).toMatch(/^E_VALIDATION: unknown partition/);
    expect(publish(['--request-id', 'not-a-uuid', 'p.md']).stderr).toMatch(/^E_VALIDATION: request id/);
  });
});

describe('[REC-1][PUB-1] a citation\'s lines and quote are checked against the source it cites', () => {
  const claim = (evidence: string) => `---\nkind: claim\nclaim_kind: fact\ntitle: Node 20 everywhere\nevidence: ${evidence}\n---\nWhy.\n`;

  it('a quote that is not the source\'s words, or lines past its end, is E_VALIDATION and writes nothing', () => {
    write('ci.txt', 'CI config:\r\nevery job runs on Node 20.\r\n');
    const source = `src-${sha('CI config:\r\nevery job runs on Node 20.\r\n').slice(0, 24)}`;
    write('bad-quote.md', claim(`[{source: ${source}, quote: "every job runs on Node 22"}]`));
    const r = publish(['--evidence', 'ci.txt', 'bad-quote.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: record #1.*evidence\[0\] quotes words that are not in source src-/);
    write('bad-lines.md', claim(`[{source: ${source}, lines: [2, 3]}]`));
    expect(publish(['--evidence', 'ci.txt', 'bad-lines.md']).stderr).toMatch(/^E_VALIDATION: .*evidence\[0\] cites lines 2-3 of source src-\w+, which has 2 lines/);
    expect(existsSync(join(vault, 'private'))).toBe(false);

    // The source's words, within the lines given: published. Cited again later by id, the retained original is read.
    write('good.md', claim(`[{source: ${source}, lines: [2, 2], quote: "runs on Node 20"}]`));
    expect(publish(['--evidence', 'ci.txt', 'good.md']).code).toBe(0);
    write('again.md', claim(`[{source: ${source}, lines: [1, 1], quote: "runs on Node 20"}]`));
    expect(publish(['again.md']).stderr).toMatch(/^E_VALIDATION: .*evidence\[0\] quotes words that are not in source src-\w+ \(lines 1-1\)/);
    write('again.md', claim(`[{source: ${source}, quote: "CI config:\\nevery job"}]`));
    expect(publish(['again.md']).code).toBe(0);
  });

  it('a revision is checked for the citations it adds or changes, not for those its current revision has', () => {
    write('ci.txt', 'every job runs on Node 20.\n');
    const source = `src-${sha('every job runs on Node 20.\n').slice(0, 24)}`;
    write('c.md', claim(`[{source: ${source}, quote: "runs on Node 20"}]`));
    const first = publish(['--evidence', 'ci.txt', 'c.md']);
    expect(first.code, first.stderr).toBe(0);
    // The file edited by hand to a quote the source does not hold, and scanned: the record as it stands.
    const path = join(vault, first.receipt.records[0].path);
    writeFileSync(path, readFileSync(path, 'utf8').replace('quote: "runs on Node 20"', 'quote: "runs on Node 22"'));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    const stored = readFileSync(path, 'utf8');
    expect(stored).toContain('quote: "runs on Node 22"');
    // A revision that only changes its lifecycle keeps that citation: accepted.
    write('rev.md', stored.replace('lifecycle: active', 'lifecycle: superseded'));
    const rev = publish(['rev.md']);
    expect(rev.code, rev.stderr).toBe(0);
    // One that changes the citation is checked.
    write('rev2.md', readFileSync(path, 'utf8').replace('quote: "runs on Node 22"', 'quote: "runs on Node 18"'));
    expect(publish(['rev2.md']).stderr).toMatch(/^E_VALIDATION: .*evidence\[0\] quotes words that are not in source/);
  });

  it('a source that is not UTF-8 text is cited as given', () => {
    const bytes = Buffer.from([0x25, 0x50, 0x44, 0x46, 0x2d, 0x00, 0xff, 0x10]);
    write('scan.pdf', bytes);
    write('c.md', claim(`[{source: src-${sha(bytes).slice(0, 24)}, lines: [7, 9], quote: "page 3, second column"}]`));
    expect(publish(['--evidence', 'scan.pdf', 'c.md']).code).toBe(0);
  });
});

describe('[PUB-5] the same request id returns the same receipt', () => {
  it('never creates a second publication; other content under the same id is E_CONFLICT', () => {
    write('p.md', '---\nkind: page\ntitle: Once\n---\n');
    const rid = '0b5e8f1e-7d1c-4f7e-8c5a-3f2d1e0c9b8a';
    const a = publish(['--request-id', rid, 'p.md']).receipt;
    const b = publish(['--request-id', rid, 'p.md']).receipt;
    expect(b).toEqual(a);
    write('p.md', '---\nkind: page\ntitle: Other\n---\n');
    const c = publish(['--request-id', rid, 'p.md']);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/^E_CONFLICT: /);
    expect(userGit(sb, vault, ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
  });

  it('a request id is the same in any letter case (a UUID): the retry in capitals returns the same receipt', () => {
    write('p.md', '---\nkind: page\ntitle: Case page\n---\nb\n');
    const a = publish(['--request-id', 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE', 'p.md']);
    expect(a.code, a.stderr).toBe(0);
    expect(a.receipt.requestId).toBe('aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee');
    for (const rid of ['aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee', 'AAAAAAAA-bbbb-4CCC-8ddd-EEEEEEEEEEEE']) {
      expect(publish(['--request-id', rid, 'p.md']).receipt).toEqual(a.receipt);
    }
    const byRequest = cli(sb, ['receipt', '--store', 'st', '--json', 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE']);
    expect(JSON.parse(byRequest.stdout)).toEqual(a.receipt);
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toHaveLength(1);
  });
});

describe('[PUB-5] a failure after the journal names the publication and its request, so it is finished, not made twice', () => {
  it('resume finishes it: one record, one commit', () => {
    // What a full disk under state.sqlite does to the acknowledgement, made deterministic: the records index refuses the write.
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
    db.exec("CREATE TRIGGER refuse BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'simulated: database or disk is full'); END;");
    db.close();
    write('kept.md', '---\nkind: page\ntitle: Kept\n---\nbody\n');
    const failed = publish(['kept.md']);
    expect(failed.code).toBe(1);
    const m = /^E_INTERNAL: publication (pub-\S+) \(request (\S+)\) is journaled and kept, but could not be installed and acknowledged: simulated: database or disk is full; finish it with `knowledge resume \1` \(or the same request id again\): publishing it anew would make a second publication\n$/.exec(failed.stderr);
    expect(m, failed.stderr).not.toBeNull();
    const db2 = new Database(join(sb.dir, 'st', 'state.sqlite'));
    db2.exec('DROP TRIGGER refuse');
    db2.close();
    const resumed = cli(sb, ['resume', '--store', 'st', '--json', m![1]!]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ publicationId: m![1], requestId: m![2], git: { state: 'committed' } });
    expect((JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout) as { records: Array<{ title: string }> }).records.map((r) => r.title)).toEqual(['Kept']);
    expect(userGit(sb, vault, ['log', '--format=%s']).trim().split('\n')).toHaveLength(1);
  });
});

describe('[PUB-5] resume that fails again', () => {
  it.skipIf(NO_UNPRIVILEGED)(`says what publish says: the file system's error is E_IO naming both ids, not E_INTERNAL ${UNPRIVILEGED_NOTE}`, () => {
    write('p.md', '---\nkind: page\ntitle: Resume me\n---\nx\n');
    const run = unprivilegedCli(sb, 'the resume-fails-again test')!;
    const killed = run(['publish', '--store', 'st', '--request-id', '5e0e5e0e-0000-4000-8000-000000000001', 'p.md'], { env: { KNOWLEDGE_CRASH_AT: 'after-journal' } });
    expect(killed.code, killed.stderr).toBeNull();
    const id = (JSON.parse(run(['activity', '--store', 'st', '--json']).stdout) as Array<{ id: string }>)[0]!.id;
    chmodSync(vault, 0o555); // no folder can be made in the vault: its install fails with EACCES
    const again = run(['resume', '--store', 'st', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(new RegExp(`^E_IO: publication ${id} \\(request 5e0e5e0e-0000-4000-8000-000000000001\\) is journaled and kept, but could not be installed and acknowledged: EACCES: .*; finish it with \`knowledge resume ${id}\``));
    chmodSync(vault, 0o777);
    const done = run(['resume', '--store', 'st', '--json', id]);
    expect(done.code, done.stderr).toBe(0);
    // Installed and acknowledged (its checkpoint waits: the repository is root's, this user's git calls it dubious).
    const receipt = JSON.parse(done.stdout) as { publicationId: string; records: Array<{ path: string }> };
    expect(receipt.publicationId).toBe(id);
    expect(readFileSync(join(vault, receipt.records[0]!.path), 'utf8')).toMatch(/title: Resume me/);
  });
});

describe('evidence retention', () => {
  it('retains the original with an immutable descriptor; same bytes -> same source, one copy', () => {
    write('e.txt', 'the source text\n');
    write('c1.md', '---\nkind: claim\nclaim_kind: fact\ntitle: One\n---\n');
    write('c2.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Two\n---\n');
    const a = publish(['--evidence', 'e.txt', 'c1.md']).receipt;
    const b = publish(['--evidence', 'e.txt', 'c2.md']).receipt;
    expect(b.evidence[0].sourceId).toBe(a.evidence[0].sourceId);
    expect(b.evidence[0].path).toBe(a.evidence[0].path);
    const desc = YAML.parse(readFileSync(join(vault, `private/evidence/${a.evidence[0].sourceId.slice(4, 6)}/${a.evidence[0].sourceId}.yaml`), 'utf8'));
    expect(desc).toMatchObject({ source_id: a.evidence[0].sourceId, retained_path: a.evidence[0].path, sha256: sha('the source text\n'), size: 16, media_type: 'text/plain' });
    // The second publication's commit adds no second copy.
    const files = userGit(sb, vault, ['show', '--name-only', '--format=', b.git.commit]).trim().split('\n');
    expect(files).toEqual([b.records[0].path]);
    const rec = YAML.parse(readFileSync(join(vault, b.records[0].path), 'utf8').split('---\n')[1]!);
    expect(rec.evidence).toEqual([{ source: a.evidence[0].sourceId }]);
  });
});

describe('[GIT-9] evidence kept in or out of history by what it is', () => {
  const claim = (title: string) => write(`${title}.md`, `---\nkind: claim\nclaim_kind: fact\ntitle: ${title}\n---\nb\n`);
  const tracked = () => userGit(sb, vault, ['ls-files']).trim().split('\n');

  it('a UTF-16 text (its byte-order mark FF FE), and a text starting "ID3", are text: committed', () => {
    write('notes16.txt', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Meeting notes\r\n', 'utf16le')]));
    write('id3.txt', 'ID3 tags: the header is 10 bytes.\n');
    const r = publish(['--evidence', 'notes16.txt', '--evidence', 'id3.txt', claim('Notes')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.receipt.evidence.map((e: { inHistory: boolean }) => e.inHistory)).toEqual([true, true]);
    for (const e of r.receipt.evidence as Array<{ path: string }>) expect(tracked()).toContain(e.path);
  });

  it('a file whose extension is a name of Object.prototype (.constructor, .__proto__) is plain evidence', () => {
    write('notes.constructor', 'hello\n');
    write('notes.__proto__', 'there\n');
    const r = publish(['--evidence', 'notes.constructor', '--evidence', 'notes.__proto__', claim('Proto')]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.receipt.evidence.map((e: { inHistory: boolean }) => e.inHistory)).toEqual([true, true]);
  });

  it('an original kept out of history and deleted by hand is put back with its .gitignore: git status stays clean', () => {
    write('pic.png', Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), Buffer.from('fakepng')]));
    const first = publish(['--evidence', 'pic.png', claim('Picture')]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.receipt.evidence[0].inHistory).toBe(false);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    rmSync(join(vault, first.receipt.evidence[0].path, '..'), { recursive: true });
    const again = publish(['--evidence', 'pic.png', claim('Picture again')]);
    expect(again.code, again.stderr).toBe(0);
    expect(existsSync(join(vault, again.receipt.evidence[0].path))).toBe(true);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
  });

  it('files of a new source already at its paths (copied by hand from another partition) are refused before anything is written', () => {
    write('ev.txt', 'copied evidence\n');
    const priv = publish(['--evidence', 'ev.txt', claim('Private')]);
    expect(priv.code, priv.stderr).toBe(0);
    const shard = priv.receipt.evidence[0].path.split('/').slice(0, 3).join('/'); // private/evidence/<hh>
    mkdirSync(join(vault, 'conversations/s1/evidence'), { recursive: true });
    spawnSync('cp', ['-a', join(vault, shard), join(vault, 'conversations/s1/evidence/')]);
    const before = spawnSync('find', [join(vault, 'conversations')], { encoding: 'utf8' }).stdout;
    write('ev-copy.txt', 'copied evidence\n');
    const r = publish(['--partition', 'conversation:s1', '--evidence', 'ev-copy.txt', claim('Copy')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: evidence ev-copy\.txt: conversations\/s1\/evidence\/\S+ is already in the vault, but conversation:s1 has no source src-\S+ recorded \(the vault came without the store's state, as a clone does, or it was copied there by hand\?\); run `knowledge scan`: it adopts a source whose descriptor and original agree where they lie; or move it away; then publish again$/m);
    expect(spawnSync('find', [join(vault, 'conversations')], { encoding: 'utf8' }).stdout).toBe(before);
  });
});

describe('partitions', () => {
  it('private and conversation:<session> map to private/ and conversations/<session>/', () => {
    write('p.md', '---\nkind: page\ntitle: Chat note\n---\n');
    const r = publish(['--partition', 'conversation:sess-42', '--actor', 'agent', 'p.md']).receipt;
    expect(r.partition).toBe('conversation:sess-42');
    expect(r.records[0].path).toMatch(/^conversations\/sess-42\/pages\/[0-9a-f]{2}\/chat-note\.md$/);
    const fm = YAML.parse(readFileSync(join(vault, r.records[0].path), 'utf8').split('---\n')[1]!);
    expect(fm.scope).toBe('conversation:sess-42');
  });

  it('title collisions resolve deterministically', () => {
    write('a.md', '---\nkind: page\ntitle: Same\n---\na\n');
    write('b.md', '---\nkind: page\ntitle: SAME\n---\nb\n');
    const r1 = publish(['a.md']).receipt;
    const r2 = publish(['b.md']).receipt;
    // One shard folder per slug: the two records sit side by side.
    const shard = createHash('sha256').update('same').digest('hex').slice(0, 2);
    expect(r1.records[0].path).toBe(`private/pages/${shard}/same.md`);
    expect(r2.records[0].path).toMatch(new RegExp(`^private/pages/${shard}/same-[0-9a-f]{8}\\.md$`));
  });
});

describe('[PUB-1] bad input from files and ids (issue 2)', () => {
  const nothingWritten = () => {
    expect(existsSync(join(vault, 'private'))).toBe(false);
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toEqual([]);
  };

  it('non-UTF-8 bytes in a record are E_VALIDATION', () => {
    write('bin.md', Buffer.concat([Buffer.from('---\nkind: page\ntitle: caf'), Buffer.from([0xe9]), Buffer.from('\n---\n')]));
    const r = publish(['bin.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: .*not valid UTF-8/);
    nothingWritten();
  });

  for (const id of ['../escape', 'a/b', '/abs', 'nul\u0000id', '..', '']) {
    it(`an id that tries to escape (${JSON.stringify(id)}) is E_VALIDATION`, () => {
      write('p.md', `---\nid: ${JSON.stringify(id)}\nkind: page\ntitle: x\n---\n`);
      const r = publish(['p.md']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^E_VALIDATION: /);
      nothingWritten();
    });
  }

  it('a title that tries to escape still lands inside the partition', () => {
    write('p.md', '---\nkind: page\ntitle: ../../../etc/passwd\n---\n');
    const r = publish(['p.md']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.receipt.records[0].path).toMatch(/^private\/pages\/[0-9a-f]{2}\/[^/]+\.md$/);
    expect(existsSync(join(sb.dir, 'st', 'etc'))).toBe(false);
  });

  it('a missing record file, an evidence directory and an evidence device are E_VALIDATION', () => {
    write('c.md', '---\nkind: claim\nclaim_kind: fact\ntitle: x\n---\n');
    expect(publish(['missing.md']).stderr).toMatch(/^E_VALIDATION: .*no such file/);
    expect(publish(['--evidence', sb.dir, 'c.md']).stderr).toMatch(/^E_VALIDATION: .*not a regular file/);
    expect(publish(['--evidence', '/dev/null', 'c.md']).stderr).toMatch(/^E_VALIDATION: .*not a regular file/);
    nothingWritten();
  });

  it('an evidence path holding a control character (a line break, ESC) is E_VALIDATION as knowledge attach says it, writing nothing', () => {
    write('c.md', '---\nkind: claim\nclaim_kind: fact\ntitle: x\n---\n');
    for (const name of ['line\nbreak.txt', 'esc\u001b[31mred.txt']) {
      write(name, 'measured\n');
      const r = publish(['--evidence', name, 'c.md']);
      expect(r.code, JSON.stringify(name)).toBe(1);
      expect(r.stderr).toBe(`E_VALIDATION: the path ${JSON.stringify(name)} holds a control character\n`);
      nothingWritten();
      expect(cli(sb, ['attach', '--store', 'st', name]).stderr).toBe(r.stderr);
    }
  });

  /** `knowledge publish --store st ARGS` with standard input opened on `path` with `flags`. */
  const withStdin = (path: string, flags: string, args: string[]) => {
    const fd = openSync(path, flags);
    try {
      const r = spawnSync(process.execPath, [cliPath, 'publish', '--store', 'st', ...args], { cwd: sb.dir, env: sb.env, stdio: [fd, 'pipe', 'pipe'], encoding: 'utf8' });
      return { code: r.status, stderr: r.stderr };
    } finally {
      closeSync(fd);
    }
  };
  /** A bash `script` (with its pipes and process substitutions `<(…)`) in which PUBLISH is `knowledge publish --store st --json`; $1, $2… are `values`. */
  const inBash = (script: string, values: string[] = []) => {
    const r = spawnSync('bash', ['-c', script.replace('PUBLISH', '"$0" "$CLI" publish --store st --json'), process.execPath, ...values],
      { cwd: sb.dir, env: { ...sb.env, CLI: cliPath }, encoding: 'utf8' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it('standard input that cannot be read, and evidence that is a pipe, are E_VALIDATION (not E_INTERNAL), writing nothing', () => {
    write('c.md', '---\nkind: claim\nclaim_kind: fact\ntitle: x\n---\n');
    const dir = withStdin(sb.dir, 'r', ['-']);
    expect(dir.code).toBe(1);
    expect(dir.stderr).toBe('E_VALIDATION: record: cannot read standard input: it is a directory\n');
    const writeOnly = withStdin('/dev/null', 'w', ['-']);
    expect(writeOnly.code).toBe(1);
    expect(writeOnly.stderr).toBe('E_VALIDATION: record: cannot read standard input: it is not open for reading\n');
    // Evidence keeps its file's name: a pipe has none.
    const pipe = inBash('PUBLISH --evidence <(echo measured) c.md');
    expect(pipe.code).toBe(1);
    expect(pipe.stderr).toMatch(/^E_VALIDATION: evidence \/dev\/fd\/\d+ is not a regular file \(a pipe\): evidence is kept as a file under its own name; save it to a file and give that\n$/);
    expect(inBash('echo measured | PUBLISH --evidence /dev/stdin c.md').stderr).toMatch(/^E_VALIDATION: evidence \/dev\/stdin is not a regular file \(a pipe\)/);
    // A socket (what Node gives a child as its standard input) cannot be opened by a path: said, not E_INTERNAL.
    const socket = cli(sb, ['publish', '--store', 'st', '/dev/stdin'], { input: '---\nkind: page\ntitle: x\n---\n' });
    expect(socket.stderr).toBe('E_VALIDATION: record: /dev/stdin is not a regular file (a socket)\n');
    // A FIFO nobody writes to is not waited for: it reads as empty (no record).
    const fifo = inBash('mkfifo fifo && PUBLISH fifo');
    expect(fifo.code).toBe(1);
    expect(fifo.stderr).toMatch(/^E_VALIDATION: record #1: missing frontmatter/);
    rmSync(join(sb.dir, 'fifo'));
    // A record over the limit from a pipe is refused as from standard input.
    const big = inBash('PUBLISH <(printf -- "---\\nkind: page\\ntitle: big\\n---\\n"; head -c 1100000 /dev/zero | tr "\\0" x)');
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(/^E_TOO_LARGE: record: \/dev\/fd\/\d+ is more than 1048576 bytes; a record may be at most 1048576 bytes\n$/);
    nothingWritten();
  });

  it('a record given as a pipe path (/dev/stdin, a shell\'s <(…)) is read to its end as - reads standard input', () => {
    const record = (title: string) => `---\nkind: page\ntitle: ${title}\n---\nbody\n`;
    const stdin = inBash('printf %s "$1" | PUBLISH /dev/stdin', [record('From stdin')]);
    expect(stdin.code, stdin.stderr).toBe(0);
    const two = inBash('PUBLISH <(printf %s "$1") <(printf %s "$2")', [record('First'), record('Second')]);
    expect(two.code, two.stderr).toBe(0);
    expect(JSON.parse(two.stdout).records).toHaveLength(2);
    const titles = JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout).records.map((r: { title: string }) => r.title).sort();
    expect(titles).toEqual(['First', 'From stdin', 'Second']);
  });

  it('a record or evidence file over the limits is E_TOO_LARGE before it is read, even past 2 GiB', () => {
    write('ok.md', '---\nkind: page\ntitle: ok\n---\n');
    truncateSync(join(sb.dir, write('huge.bin', '')), 3 * 1024 ** 3); // sparse: no 3 GiB written
    truncateSync(join(sb.dir, write('big.md', '')), 2 * 1024 * 1024);
    for (const args of [['huge.bin'], ['big.md']]) {
      const r = publish(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(/^E_TOO_LARGE: record: .* bytes; a record may be at most 1048576 bytes\n$/);
    }
    // Evidence: the total counts, before any file is read (two of 200 MiB, each under the limit alone).
    truncateSync(join(sb.dir, write('half-1.bin', '')), 200 * 1024 * 1024);
    truncateSync(join(sb.dir, write('half-2.bin', '')), 200 * 1024 * 1024);
    for (const args of [['--evidence', 'huge.bin', 'ok.md'], ['--evidence', 'half-1.bin', '--evidence', 'half-2.bin', 'ok.md']]) {
      const r = publish(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(/^E_TOO_LARGE: evidence totals \d+ bytes; attach files over 268435456 bytes with knowledge attach\n$/);
    }
    nothingWritten();
  });

  it('[PUB-1] more than 200 records, or more than 50 evidence files, in one publication is E_TOO_LARGE and writes nothing', () => {
    const records = Array.from({ length: 201 }, (_, i) => write(`r${i}.md`, `---\nkind: page\ntitle: Page ${i}\n---\nx\n`));
    const r = publish(records);
    expect(r.code, r.stdout.slice(0, 200)).toBe(1);
    expect(r.stderr).toBe('E_TOO_LARGE: at most 200 records per publication\n');
    nothingWritten();
    const evidence = Array.from({ length: 51 }, (_, i) => ['--evidence', write(`e${i}.txt`, `source ${i}\n`)]).flat();
    const e = publish([...evidence, 'r0.md']);
    expect(e.code, e.stdout.slice(0, 200)).toBe(1);
    expect(e.stderr).toBe('E_TOO_LARGE: at most 50 evidence files per publication\n');
    nothingWritten();
  });

  it('[PUB-1] the core service (under MCP and the Gateway, which skip the CLI\'s check) refuses over 200 records or 50 evidence files with E_TOO_LARGE, writing nothing', async () => {
    const s = KnowledgeService.open(join(sb.dir, 'st'), { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
    const refused = async (req: PublishRequest): Promise<unknown> => {
      try {
        await s.publish(req);
        return 'accepted';
      } catch (err) {
        return isKnowledgeError(err) ? `${err.code}: ${err.message}` : err;
      }
    };
    try {
      const records = Array.from({ length: 201 }, (_, i) => `---\nkind: page\ntitle: Page ${i}\n---\nx\n`);
      expect(await refused({ partition: 'private', actor: 'operator', records, evidence: [] })).toBe('E_TOO_LARGE: at most 200 records per publication');
      const evidence = Array.from({ length: 51 }, (_, i) => ({ name: `e${i}.txt`, bytes: Buffer.from(`source ${i}\n`) }));
      expect(await refused({ partition: 'private', actor: 'operator', records: records.slice(0, 1), evidence })).toBe('E_TOO_LARGE: at most 50 evidence files per publication');
    } finally {
      s.close();
    }
    nothingWritten();
  });

  it('a store directory that is not a store is E_UNAVAILABLE', () => {
    write('p.md', '---\nkind: page\ntitle: x\n---\n');
    const r = cli(sb, ['publish', '--store', sb.home, 'p.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: /);
  });
});

describe('[PUB-3] a publication writes only regular files in real folders of the vault', () => {
  const activity = () => JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as unknown[];

  it('a symbolic link to a folder outside the vault (a conversation, a shard) is refused with E_CONFLICT; nothing is written there', () => {
    const outside = join(sb.dir, 'outside');
    mkdirSync(outside);
    mkdirSync(join(vault, 'conversations'), { recursive: true });
    symlinkSync(outside, join(vault, 'conversations', 'evil'));
    write('e.md', '---\nkind: page\ntitle: Escape page\n---\nx\n');
    let r = publish(['--partition', 'conversation:evil', 'e.md']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: cannot write conversations\/evil\/.*conversations\/evil is a symbolic link/);
    // Every shard folder of private/pages a link out of the vault.
    mkdirSync(join(vault, 'private', 'pages'), { recursive: true });
    for (let i = 0; i < 256; i++) {
      const hh = i.toString(16).padStart(2, '0');
      mkdirSync(join(outside, hh));
      symlinkSync(join(outside, hh), join(vault, 'private', 'pages', hh));
    }
    r = publish(['e.md']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: cannot write private\/pages\/[0-9a-f]{2}\/escape-page\.md: private\/pages\/[0-9a-f]{2} is a symbolic link/);
    expect(readdirSync(outside, { recursive: true }).filter((n) => String(n).endsWith('.md'))).toEqual([]);
    expect(activity()).toEqual([]);
  });

  it('a file where a folder should be, or a socket at a record\'s path, is E_CONFLICT with its reason (not E_INTERNAL)', async () => {
    write('s.md', '---\nkind: page\ntitle: Socket victim\n---\nx\n');
    const first = publish(['s.md']);
    const { id, path } = first.receipt.records[0] as { id: string; path: string };
    rmSync(join(vault, path));
    const server = createServer();
    await new Promise<void>((done) => server.listen(join(vault, path), done));
    try {
      write('s2.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: v2\n---\ny\n`);
      const r = publish(['s2.md']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^E_CONFLICT: record #1: cannot write .* is not a regular file/);
    } finally {
      server.close();
    }
    // Every shard folder of private/pages a plain file.
    rmSync(join(vault, 'private', 'pages'), { recursive: true, force: true });
    mkdirSync(join(vault, 'private', 'pages'));
    for (let i = 0; i < 256; i++) writeFileSync(join(vault, 'private', 'pages', i.toString(16).padStart(2, '0')), 'not a folder\n');
    write('f.md', '---\nkind: page\ntitle: Shard victim\n---\nx\n');
    const r = publish(['f.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: cannot write private\/pages\/[0-9a-f]{2}\/shard-victim\.md: private\/pages\/[0-9a-f]{2} is not a folder/);
  });

  it('a FIFO at a record\'s path blocks neither show nor publish: onDisk missing, and a revision is E_CONFLICT', () => {
    write('f.md', '---\nkind: page\ntitle: Fifo victim\n---\nx\n');
    const first = publish(['f.md']);
    expect(first.code, first.stderr).toBe(0);
    const { id, path } = first.receipt.records[0] as { id: string; path: string };
    rmSync(join(vault, path));
    expect(spawnSync('mkfifo', [join(vault, path)]).status).toBe(0);
    // Without O_NONBLOCK, opening the FIFO waits for a writer that never comes: killed after 30 s, the test fails.
    const run = (args: string[]) => spawnSync(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env, encoding: 'utf8', timeout: 30_000, killSignal: 'SIGKILL' });
    const show = run(['show', '--store', 'st', id, '--json']);
    expect(show.status, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout).record.onDisk).toBe('missing');
    write('f2.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: v2\n---\ny\n`);
    const rev = run(['publish', '--store', 'st', 'f2.md']);
    expect(rev.status, rev.stderr).toBe(1);
    expect(rev.stderr).toMatch(/^E_CONFLICT: record #1: cannot write private\/pages\/.*\.md is not a regular file/);
    expect(activity()).toHaveLength(1);
  });
});

/** libfaketime's wrapper (Debian's `faketime`), which sets the clock a process reads; .ci/run installs it. */
const FAKETIME = spawnSync('sh', ['-c', 'command -v faketime'], { encoding: 'utf8' }).stdout.trim();

describe('[PUB-1] a system clock past the year 9999', () => {
  // 10000-01-01T00:00:00Z: records, receipts and Git's dates have four-digit years.
  const atYear10000 = (args: string[]) => {
    const r = spawnSync(FAKETIME, ['@253402300800', process.execPath, cliPath, ...args], { cwd: sb.dir, env: sb.env, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it.skipIf(!FAKETIME)(`is refused with E_UNAVAILABLE naming the clock, and nothing is written${FAKETIME ? '' : ' (SKIPPED: faketime is not installed: apt-get install faketime)'}`, () => {
    write('p.md', '---\nid: a-page\nkind: page\ntitle: A page\n---\nBody\n');
    expect(publish(['p.md']).code).toBe(0);
    const file = join(vault, 'private', 'pages');
    const before = { activity: cli(sb, ['activity', '--store', 'st', '--json']).stdout, log: userGit(sb, vault, ['log', '--format=%H']) };
    write('p2.md', '---\nid: a-page\nkind: page\nrevision: 1\ntitle: A page, revised\n---\nBody\n');
    write('other.md', '---\nid: b-page\nkind: page\ntitle: Another\n---\nBody\n');
    writeFileSync(join(vault, 'hand.md'), 'made by hand\n');
    for (const args of [['publish', '--store', 'st', 'p2.md'], ['publish', '--store', 'st', 'other.md'], ['scan', '--store', 'st'], ['attach', '--store', 'st', 'other.md'], ['init', 'st2']]) {
      const r = atYear10000(args);
      expect(r.code, `${args[0]}: ${r.stderr}`).not.toBe(0);
      expect(r.stderr).toMatch(/^E_UNAVAILABLE: the system clock reads \+010000-01-01T00:00:\d\d\.\d{3}Z, past the year 9999 .*set the clock/);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect(existsSync(join(sb.dir, 'st2'))).toBe(false);
    expect(readdirSync(file, { recursive: true }).filter((n) => String(n).endsWith('.md'))).toHaveLength(1);
    expect(cli(sb, ['activity', '--store', 'st', '--json']).stdout).toBe(before.activity);
    expect(userGit(sb, vault, ['log', '--format=%H'])).toBe(before.log);
    // The same commands with the clock set right work.
    expect(publish(['p2.md', 'other.md']).code).toBe(0);
  });
});

describe('[PUB-3][PUB-1] a hand-made record whose file name is near the file system\'s 255-byte limit', () => {
  it('is revised in place: the install\'s temp name is cut to fit (was ENAMETOOLONG, a publication stuck for good)', () => {
    const folder = join(vault, 'private', 'n');
    mkdirSync(folder, { recursive: true });
    const names = ['語'.repeat(84) + '.md', 'a'.repeat(232) + '.md']; // 255 and 235 bytes
    names.forEach((name, i) => writeFileSync(join(folder, name),
      `---\nformat: knowledge-record-v1\nid: long-${i}\nrevision: 1\nkind: page\ntitle: Long name ${i}\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: private\nlifecycle: active\n---\nbody\n`));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    names.forEach((name, i) => {
      write(`r${i}.md`, `---\nid: long-${i}\nrevision: 1\nkind: page\ntitle: Long name ${i}\n---\nrevised ${i}\n`);
      const r = publish([`r${i}.md`]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.receipt.records[0]).toMatchObject({ id: `long-${i}`, revision: 2, path: `private/n/${name}` });
      expect(readFileSync(join(folder, name), 'utf8')).toMatch(new RegExp(`revised ${i}\\n$`));
    });
    expect(readdirSync(folder).sort()).toEqual([...names].sort());
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
  });
});

describe('[PUB-3][GIT-10] a save another program makes while a publication installs is never overwritten', () => {
  /**
   * Publish `files` in a child process paused after its staging file is fsynced, just before it replaces the
   * record's file (the window an editor's save can land in); `during` acts there. Its exit status and stderr.
   */
  async function publishPaused(files: string[], during: () => void, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stderr: string }> {
    const child = spawn(process.execPath, [cliPath, 'publish', '--store', 'st', '--json', ...files], {
      cwd: sb.dir, env: { ...sb.env, KNOWLEDGE_PAUSE_AT: 'install-before-replace:1000', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let acted = false;
    child.stderr!.on('data', (b: Buffer) => {
      stderr += b;
      if (!acted && stderr.includes('paused at install-before-replace')) {
        acted = true;
        during();
      }
    });
    const code = await new Promise<number | null>((done) => child.on('close', done));
    expect(acted, `never paused: ${stderr}`).toBe(true);
    return { code, stderr };
  }

  function published() {
    write('p.md', '---\nkind: page\ntitle: Shared page\n---\nv1\n');
    const first = publish(['p.md']);
    expect(first.code, first.stderr).toBe(0);
    const { id, path } = first.receipt.records[0] as { id: string; path: string };
    write('rev.md', `---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Shared page\n---\nv2 by the agent\n`);
    return { id, path, abs: join(vault, path) };
  }

  for (const how of ['in place', 'by rename'] as const) {
    it(`a save ${how} in that window: the publication is E_CONFLICT, the save stays on disk, and the next scan records it`, async () => {
      const { abs } = published();
      const saved = `${readFileSync(abs, 'utf8')}saved by the human ${how}\n`;
      const r = await publishPaused(['rev.md'], () => {
        if (how === 'in place') writeFileSync(abs, saved);
        else {
          writeFileSync(`${abs}.swp`, saved);
          renameSync(`${abs}.swp`, abs);
        }
      });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/E_CONFLICT: .* changed on disk while the publication was being installed/);
      expect(readFileSync(abs, 'utf8')).toBe(saved);
      expect(readdirSync(join(vault, '.knowledge-history', 'staging'))).toEqual([]);
      const scan = cli(sb, ['scan', '--store', 'st', '--json']);
      expect(scan.code, scan.stderr).toBe(0);
      expect(JSON.parse(scan.stdout).git.state).toBe('committed');
      expect(userGit(sb, vault, ['show', `HEAD:${relative(vault, abs)}`])).toBe(saved);
    });
  }

  it('a file created at a new record\'s path in that window stays, and the publication is E_CONFLICT', async () => {
    write('new.md', '---\nkind: page\ntitle: Brand new page\n---\nby the agent\n');
    const r = await publishPaused(['new.md'], () => {
      const dir = readdirSync(join(vault, 'private', 'pages'), { recursive: true }).map(String);
      expect(dir.some((d) => d.endsWith('brand-new-page.md'))).toBe(false);
      // The record's folder is made before the staging file; the file goes in the one shard folder there.
      const shards = readdirSync(join(vault, 'private', 'pages'));
      expect(shards).toHaveLength(1);
      writeFileSync(join(vault, 'private', 'pages', shards[0]!, 'brand-new-page.md'), 'mine\n');
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/E_CONFLICT: /);
    const shard = readdirSync(join(vault, 'private', 'pages'))[0]!;
    expect(readFileSync(join(vault, 'private', 'pages', shard, 'brand-new-page.md'), 'utf8')).toBe('mine\n');
  });

  it('killed after moving the old file aside: the next open puts it back and finishes the publication, once', () => {
    const { id, abs } = published();
    const killed = cli(sb, ['publish', '--store', 'st', '--json', 'rev.md'], { env: { KNOWLEDGE_CRASH_AT: 'install-held' } });
    expect(killed.code).not.toBe(0);
    expect(existsSync(abs), 'the old file is held aside at the crash').toBe(false);
    // The next writer's open finishes journaled publications before anything else (here, a scan's walk).
    const scan = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(scan.code, scan.stderr).toBe(0);
    expect(JSON.parse(scan.stdout).deleted ?? []).toEqual([]);
    expect(readFileSync(abs, 'utf8')).toContain('v2 by the agent');
    expect(readdirSync(join(vault, '.knowledge-history', 'staging'))).toEqual([]);
    const shown = JSON.parse(cli(sb, ['show', '--store', 'st', id, '--json']).stdout);
    expect(shown.record.revision).toBe(2);
    expect(cli(sb, ['verify', '--store', 'st']).code).toBe(0);
  });
});

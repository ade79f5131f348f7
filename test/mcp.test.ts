/**
 * Agent tools over MCP [SURF-3][READ-1][READ-2], end to end: the real
 * `knowledge mcp` process (real git, real SQLite) driven over stdio by the
 * MCP SDK's own Client, as Claude Code or any MCP client would.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { cli, cliPath, makeSandbox, NO_UNPRIVILEGED, UNPRIVILEGED_NOTE, unprivilegedCli, userGit, type Sandbox } from './helpers.js';

let sb: Sandbox;
let store: string;
let vault: string;
const open: Array<{ close(): Promise<void> }> = [];
const children: ChildProcess[] = [];

beforeEach(() => {
  sb = makeSandbox('kn-mcp-');
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  store = join(sb.dir, 'st');
  vault = join(store, 'vault');
});
afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
  for (const p of children.splice(0)) if (p.exitCode === null) p.kill('SIGKILL');
  sb.cleanup();
});

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

interface Session {
  client: Client;
  stderr: () => string;
  call(name: string, args?: Record<string, unknown>): Promise<ToolAnswer>;
  ok(name: string, args?: Record<string, unknown>): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  fail(name: string, args?: Record<string, unknown>): Promise<{ code: string; message: string }>;
}

interface ToolAnswer { isError?: boolean; structuredContent?: any; content: Array<{ type: string; text?: string }> } // eslint-disable-line @typescript-eslint/no-explicit-any

/** Launch `knowledge mcp` as a child process and connect the SDK client over stdio. */
async function connect(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; storeDir?: string } = {}): Promise<Session> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cliPath, 'mcp', '--store', opts.storeDir ?? store, ...args],
    env: { ...sb.env, ...opts.env } as Record<string, string>,
    cwd: opts.cwd ?? sb.dir,
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: 'knowledge-test', version: '1.0.0' });
  await client.connect(transport);
  open.push(client);
  const call = async (name: string, a: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: a })) as ToolAnswer;
  return {
    client,
    stderr: () => err,
    call,
    async ok(name, a) {
      const r = await call(name, a);
      expect(r.isError, `${name}: ${JSON.stringify(r.structuredContent)}`).toBeFalsy();
      // Structured result and its JSON text are the same value.
      expect(JSON.parse(r.content[0]!.text!)).toEqual(r.structuredContent);
      return r.structuredContent;
    },
    async fail(name, a) {
      const r = await call(name, a);
      expect(r.isError, `${name} should fail: ${JSON.stringify(r.structuredContent)}`).toBe(true);
      expect(r.content[0]!.text).toBe(`${r.structuredContent.error.code}: ${r.structuredContent.error.message}`);
      return r.structuredContent.error;
    },
  };
}

const claimMd = (title: string, extra = '') => `---\nkind: claim\nclaim_kind: fact\ntitle: ${title}\n${extra}---\nAt sea level.\n`;

function gitLog(): string {
  return userGit(sb, vault, ['log', '--format=%H%n%B%n--']);
}

describe('knowledge mcp: launching and the tool list', () => {
  it('lists exactly the ten fixed tools with strict schemas that take no store, agent or scope argument (snapshot)', async () => {
    const s = await connect(['--agent', 'bot']);
    const { tools } = await s.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      'knowledge_publish_batch', 'knowledge_remember', 'knowledge_attach', 'knowledge_attach_file', 'knowledge_resume',
      'knowledge_lookup', 'knowledge_grep', 'knowledge_records', 'knowledge_read', 'knowledge_history',
    ]);
    for (const t of tools) {
      expect(t.inputSchema.additionalProperties, t.name).toBe(false);
      const props = Object.keys(t.inputSchema.properties ?? {});
      for (const forbidden of ['store', 'agent', 'agent_id', 'partition', 'scope', 'session']) expect(props, t.name).not.toContain(forbidden);
      expect(t.description!.length, t.name).toBeGreaterThan(80);
    }
    await expect(JSON.stringify(tools, null, 2) + '\n').toMatchFileSnapshot('./__snapshots__/mcp-tools.json');
  });

  it('registers the agent to the store on first launch [LAY-2]', async () => {
    await connect(['--agent', 'bot']);
    const reg = JSON.parse(readFileSync(join(sb.env.KNOWLEDGE_HOME!, 'registry.json'), 'utf8'));
    expect(reg.agents).toEqual({ bot: { store: store } });
  });

  it('refuses to start without --agent or with a bad id (usage, exit 2), and on a missing store (E_UNAVAILABLE, exit 1)', () => {
    expect(cli(sb, ['mcp', '--store', 'st']).code).toBe(2);
    expect(cli(sb, ['mcp', '--store', 'st', '--agent', '../x']).code).toBe(2);
    expect(cli(sb, ['mcp', '--store', 'st', '--agent', 'bot', '--session', 'a/b']).code).toBe(2);
    // A client that closes stdin ends the server: exit 0, nothing but protocol on stdout.
    const closed = cli(sb, ['mcp', '--store', 'st', '--agent', 'bot'], { input: '' });
    expect(closed.code, closed.stderr).toBe(0);
    expect(closed.stdout).toBe('');
    const missing = cli(sb, ['mcp', '--store', 'nowhere', '--agent', 'bot'], { input: '' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^E_UNAVAILABLE: no store at .*nowhere \(create one with: knowledge init nowhere\)\n$/);
    // [LAY-3] only init creates a store (README): an agent's launch creates nothing.
    expect(existsSync(join(sb.dir, 'nowhere'))).toBe(false);
  });

  it.skipIf(NO_UNPRIVILEGED)(`a registry that cannot be kept where KNOWLEDGE_HOME (or HOME) says is E_UNAVAILABLE at launch, naming KNOWLEDGE_HOME ${UNPRIVILEGED_NOTE}`, () => {
    // HOME a file, no KNOWLEDGE_HOME: the registry would be HOME/.knowledge.
    writeFileSync(join(sb.dir, 'home-file'), 'x');
    const r = cli(sb, ['mcp', '--store', 'st', '--agent', 'a1'], { env: { HOME: join(sb.dir, 'home-file'), KNOWLEDGE_HOME: undefined }, input: '' });
    expect(r.code, r.stdout).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: cannot keep the registry in \S+home-file\/\.knowledge \(KNOWLEDGE_HOME\): ENOTDIR/);
    // A KNOWLEDGE_HOME this user may not write (the registry there names the store, not the agent).
    const run = unprivilegedCli(sb, 'the unwritable-KNOWLEDGE_HOME launch test')!;
    const home = sb.env.KNOWLEDGE_HOME!;
    const before = readFileSync(join(home, 'registry.json'), 'utf8');
    chmodSync(home, 0o555);
    try {
      const u = run(['mcp', '--store', 'st', '--agent', 'a1'], { input: '' });
      expect(u.code, u.stdout).toBe(1);
      expect(u.stderr).toMatch(new RegExp(`^E_UNAVAILABLE: cannot keep the registry in ${home} \\(KNOWLEDGE_HOME\\): EACCES`));
    } finally {
      chmodSync(home, 0o755);
    }
    expect(readFileSync(join(home, 'registry.json'), 'utf8')).toBe(before);
    expect(readdirSync(home).sort()).toEqual(['registry.json']);
  });

  it('a client that writes its requests and closes stdin (a shell pipe) gets the answer to a write still running', () => {
    const rid = '0b9d8e8a-3c1f-4b7e-9a51-2f6d7c8e9a10';
    const lines = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'knowledge_remember', arguments: { claim: 'Piped claim', source_text: 'piped source', audience: 'owner-private', request_id: rid } } },
    ];
    const r = cli(sb, ['mcp', '--store', 'st', '--agent', 'bot'], { input: lines.map((l) => JSON.stringify(l)).join('\n') + '\n' });
    expect(r.code, r.stderr).toBe(0);
    const answers = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: number; result?: { isError?: boolean } });
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[1]!.result?.isError).not.toBe(true);
    expect(cli(sb, ['receipt', '--store', 'st', rid]).code).toBe(0);
  });

  it('[SURF-1] takes --json like every command: its stdout is JSON-RPC either way', () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } };
    const plain = cli(sb, ['mcp', '--store', 'st', '--agent', 'bot'], { input: JSON.stringify(init) + '\n' });
    const json = cli(sb, ['mcp', '--store', 'st', '--agent', 'bot', '--json'], { input: JSON.stringify(init) + '\n' });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).toBe(plain.stdout);
    expect((JSON.parse(json.stdout.trim()) as { id: number; result: { serverInfo: unknown } }).result.serverInfo).toBeDefined();
    // A failure to start stays one line on stderr, stable code first.
    const missing = cli(sb, ['mcp', '--store', 'nowhere', '--agent', 'bot', '--json'], { input: '' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^E_UNAVAILABLE: [^\n]*\n$/);
  });

  it('answers an unknown tool with a protocol error, not a crash', async () => {
    const s = await connect(['--agent', 'bot']);
    await expect(s.client.callTool({ name: 'knowledge_delete_everything', arguments: {} })).rejects.toThrow(/unknown tool/);
    await s.ok('knowledge_records', {});
  });
});

describe('issue 7 "done when": remember, look up, search, break the repository, resume, read the history', () => {
  it('walks the whole story as a new user would', async () => {
    const s = await connect(['--agent', 'claude', '--session', 'chat1']);

    // Remember a claim.
    const remembered = await s.ok('knowledge_remember', {
      claim: 'The build uses Node 20', source_text: 'From the CI config: we pinned Node 20 for every job.', quote: 'we pinned Node 20',
      audience: 'owner-private', request_id: randomUUID(),
    });
    expect(remembered).toMatchObject({ kind: 'publication', partition: 'private', actor: 'agent', git: { state: 'committed' } });
    const id = remembered.records[0].id;

    // Look it up by title (case-insensitive) and search it by words.
    expect(await s.ok('knowledge_lookup', { key: 'the build uses node 20' })).toMatchObject({ status: 'found', record: { id, kind: 'claim', revision: 1 } });
    const found = await s.ok('knowledge_grep', { query: 'node build' });
    expect(found.total).toBe(1);
    expect(found.results[0]).toMatchObject({ id, title: 'The build uses Node 20' });
    expect(found.results[0].snippet).toContain('**Node**');

    // Break the repository: a stale index.lock. The write still succeeds; the receipt says pending [GIT-15][GIT-18].
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    const revised = await s.ok('knowledge_publish_batch', {
      request_id: randomUUID(), audience: 'owner-private',
      records: [{ id, revision: 1, kind: 'claim', claim_kind: 'fact', title: 'The build uses Node 20', body: 'Node 20 LTS, pinned in CI.\n', evidence: [{ source: remembered.evidence[0].sourceId }] }],
    });
    expect(revised.git).toMatchObject({ state: 'pending', code: 'locked' });
    expect(revised.records[0]).toMatchObject({ id, revision: 2 });
    expect(readFileSync(join(vault, revised.records[0].path), 'utf8')).toContain('Node 20 LTS, pinned in CI.');

    // Still locked: resume answers pending again (not an error), and the lock is left alone [GIT-19].
    expect((await s.ok('knowledge_resume', { id: revised.publicationId })).git.state).toBe('pending');
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(true);
    const queued = await s.ok('knowledge_history', { id });
    expect(queued.versions).toHaveLength(1);
    expect(queued.queued).toBe(1);

    // Fix it, resume: committed.
    rmSync(join(vault, '.git', 'index.lock'));
    const resumed = await s.ok('knowledge_resume', { id: revised.publicationId });
    expect(resumed).toMatchObject({ publicationId: revised.publicationId, git: { state: 'committed' } });
    expect(resumed.git.commit).toMatch(/^[0-9a-f]{40}$/);
    // A scan's id is not something to resume: the answer says what retries it.
    const scanId = await s.fail('knowledge_resume', { id: 'scan-mx0-0123456789' });
    expect(scanId).toMatchObject({ code: 'E_NOT_FOUND', message: expect.stringMatching(/scan ids are not resumed: run a scan/) });

    // Read the committed history: both versions, labelled agent, and the diff between them [READ-2][GIT-11].
    const history = await s.ok('knowledge_history', { id });
    expect(history.versions.map((v: { revision: number; actor: string; publicationId: string }) => [v.revision, v.actor, v.publicationId]))
      .toEqual([[2, 'agent', revised.publicationId], [1, 'agent', remembered.publicationId]]);
    expect(history.queued).toBe(0);
    const withDiff = await s.ok('knowledge_history', { id, from: history.versions[1].commit, to: history.versions[0].commit });
    expect(withDiff.diff.patch).toContain('+Node 20 LTS, pinned in CI.');
    expect(gitLog()).toContain('Knowledge-Actor: agent');
  });
});

describe('knowledge_publish_batch', () => {
  it('publishes pages, claims and a relationship with inline evidence cited by file name, in one commit', async () => {
    const s = await connect(['--agent', 'bot']);
    const r = await s.ok('knowledge_publish_batch', {
      records: [
        { id: 'svc-api', kind: 'page', title: 'API service', tags: ['svc'], body: 'Talks to [[svc-db]].\n', fields: { 'x-owner': 'team-a' } },
        { id: 'svc-db', kind: 'page', title: 'Database', aliases: ['DB'] },
        { kind: 'relationship', relationship_type: 'depends-on', from: 'svc-api', to: 'svc-db', title: 'API depends on DB', evidence: [{ file: 'arch.md', lines: [1, 2], quote: 'API uses the DB' }] },
        { markdown: claimMd('Water boils at 100 C') },
      ],
      evidence: [
        { name: 'arch.md', text: 'API uses the DB\nfor everything\n', attribution: 'design review' },
        { name: 'notes.bin', base64: Buffer.from([1, 2, 3]).toString('base64') },
      ],
    });
    expect(r.records.map((x: { path: string }) => x.path.replace(/\/[0-9a-f]{2}\//, '/<shard>/'))).toEqual([
      'private/pages/<shard>/api-service.md', 'private/pages/<shard>/database.md', 'private/relationships/<shard>/api-depends-on-db.md', 'private/claims/<shard>/water-boils-at-100-c.md',
    ]);
    const apiPath = (r.records[0] as { path: string }).path;
    expect(r.evidence).toEqual([
      expect.objectContaining({ sha256: sha('API uses the DB\nfor everything\n'), size: 31, inHistory: true }),
      expect.objectContaining({ sha256: sha(Buffer.from([1, 2, 3])), size: 3 }),
    ]);
    for (const rec of r.records) expect(rec.sha256).toBe(sha(readFileSync(join(vault, rec.path))));
    expect(readFileSync(join(vault, apiPath), 'utf8')).toContain('x-owner: team-a');
    // One publication, one commit with exactly its files [GIT-7].
    const files = userGit(sb, vault, ['show', '--name-only', '--format=', r.git.commit]).trim().split('\n');
    expect(files).toHaveLength(4 + 2 * 2);

    // knowledge_read: evidence descriptors with the citation, links and backlinks.
    const rel = await s.ok('knowledge_read', { id: r.records[2].id });
    expect(rel.evidence).toEqual([expect.objectContaining({
      known: true, sourceId: r.evidence[0].sourceId, citation: { source: r.evidence[0].sourceId, lines: [1, 2], quote: 'API uses the DB' },
      sha256: r.evidence[0].sha256, attributions: [expect.objectContaining({ attribution: 'design review' })],
    })]);
    expect(rel.links.sort()).toEqual(['svc-api', 'svc-db']);
    const db = await s.ok('knowledge_read', { id: 'svc-db' });
    expect(db.backlinks.map((b: { id: string }) => b.id).sort()).toEqual(['svc-api', r.records[2].id].sort());
    // A claim given evidence and no explicit citation cites every evidence item (Appendix A).
    const claim = await s.ok('knowledge_read', { id: r.records[3].id });
    expect(claim.evidence.map((e: { sourceId: string }) => e.sourceId).sort()).toEqual(r.evidence.map((e: { sourceId: string }) => e.sourceId).sort());
  });

  it('a retried request id returns the same receipt and writes nothing twice; other arguments under it are E_CONFLICT [PUB-5]', async () => {
    const s = await connect(['--agent', 'bot']);
    const request_id = randomUUID();
    const args = { request_id, records: [{ kind: 'page', title: 'Once' }] };
    const first = await s.ok('knowledge_publish_batch', args);
    expect(await s.ok('knowledge_publish_batch', args)).toEqual(first);
    expect(gitLog().match(/Knowledge-Publication:/g)).toHaveLength(1);
    const conflict = await s.fail('knowledge_publish_batch', { request_id, records: [{ kind: 'page', title: 'Twice' }] });
    expect(conflict.code).toBe('E_CONFLICT');
  });

  it('a stale expected revision is E_CONFLICT and writes nothing [REC-4]', async () => {
    const s = await connect(['--agent', 'bot']);
    const first = await s.ok('knowledge_publish_batch', { records: [{ kind: 'page', title: 'Evolving', body: 'v1\n' }] });
    const { id, path } = first.records[0];
    await s.ok('knowledge_publish_batch', { records: [{ id, revision: 1, kind: 'page', title: 'Evolving', body: 'v2\n' }] });
    const before = readFileSync(join(vault, path));
    const stale = await s.fail('knowledge_publish_batch', { records: [{ id, revision: 1, kind: 'page', title: 'Evolving', body: 'stale\n' }] });
    expect(stale.code).toBe('E_CONFLICT');
    expect(readFileSync(join(vault, path))).toEqual(before);
  });

  it('bad input: schema violations, oversized fields and core validation failures are tool errors with stable codes', async () => {
    const s = await connect(['--agent', 'bot']);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{}, 'E_VALIDATION'],
      [{ records: [] }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x' }], partition: 'conversation:other' }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x' }], request_id: 'not-a-uuid' }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x'.repeat(301) }] }, 'E_TOO_LARGE'],
      [{ records: [{ markdown: 'x'.repeat(1024 * 1024 + 1) }] }, 'E_TOO_LARGE'],
      [{ records: [{ kind: 'claim', claim_kind: 'fact', title: 'Uncited' }] }, 'E_VALIDATION'],
      [{ records: [{ markdown: 'no frontmatter' }] }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x', fields: { scope: 'conversation:other' } }] }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x' }], evidence: [{ name: 'a', base64: 'not base64!' }] }, 'E_VALIDATION'],
      [{ records: [{ kind: 'page', title: 'x' }], evidence: [{ name: 'a', text: 'x'.repeat(8 * 1024 * 1024 + 1) }] }, 'E_TOO_LARGE'],
      [{ records: [{ kind: 'page', title: 'x' }], audience: 'conversation' }, 'E_VALIDATION'],
      // A key the argument parser would drop without a word (JSON.parse makes it an own property, as a client's would).
      [JSON.parse('{"records":[{"kind":"page","title":"x","fields":{"__proto__":"kept?","other":"kept"}}]}') as Record<string, unknown>, 'E_VALIDATION'],
    ];
    for (const [args, code] of cases) {
      const e = await s.fail('knowledge_publish_batch', args);
      expect(e.code, `${JSON.stringify(args).slice(0, 120)}: ${e.message}`).toBe(code);
    }
    expect(readdirSync(vault).filter((f) => f === 'private')).toEqual([]);
  });

  it('a lone UTF-16 surrogate in evidence text, name or attribution is E_VALIDATION naming the field; nothing is written (was: U+FFFD stored)', async () => {
    const s = await connect(['--agent', 'bot']);
    const page = [{ kind: 'page', title: 'x' }];
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['knowledge_remember', { claim: 'remember claim two', source_text: 'src \udfff text' }, /^source_text holds a lone UTF-16 surrogate \(\\udfff\)/],
      ['knowledge_remember', { claim: 'c', source_text: 't', source_name: 'n\ud800.txt' }, /^source_name holds a lone UTF-16 surrogate \(\\ud800\)/],
      ['knowledge_remember', { claim: 'c', source_text: 't', attribution: 'me \udc00' }, /^attribution holds a lone UTF-16 surrogate \(\\udc00\)/],
      ['knowledge_publish_batch', { records: page, evidence: [{ name: 'a.txt', text: 'src \udfff text' }] }, /^evidence #1 \("a\.txt"\): text holds a lone UTF-16 surrogate \(\\udfff\)/],
      ['knowledge_publish_batch', { records: page, evidence: [{ name: 'ok.txt', text: 'fine' }, { name: 'a\ud800.txt', text: 't' }] }, /^evidence #2: name holds a lone UTF-16 surrogate \(\\ud800\)/],
      ['knowledge_publish_batch', { records: page, evidence: [{ name: 'a.txt', text: 't', attribution: '\udbff' }] }, /^evidence #1 \("a\.txt"\): attribution holds a lone UTF-16 surrogate \(\\udbff\)/],
    ];
    for (const [tool, args, message] of cases) {
      const e = await s.fail(tool, args);
      expect(e.code, `${tool} ${e.message}`).toBe('E_VALIDATION');
      expect(e.message).toMatch(message);
    }
    // A well-formed pair is one character, and kept.
    const ok = await s.ok('knowledge_remember', { claim: 'emoji', source_text: 'a \ud83d\ude00 b', attribution: '\ud83d\ude00' });
    expect(readFileSync(join(vault, ok.evidence[0].path), 'utf8')).toBe('a \u{1f600} b');
    expect(readdirSync(join(vault, 'private', 'evidence'), { recursive: true }).filter((f) => String(f).endsWith('.yaml'))).toHaveLength(1);

    const bytes = Buffer.from('x');
    const decl = { request_id: randomUUID(), filename: 'f.txt', size: 1, sha256: sha(bytes) };
    expect(await s.fail('knowledge_attach', { ...decl, filename: 'f\udfff.txt' })).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/^filename holds a lone UTF-16 surrogate \(\\udfff\)/) });
    expect(await s.fail('knowledge_attach', { ...decl, attribution: 'x\ud800' })).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/^attribution holds a lone UTF-16 surrogate \(\\ud800\)/) });
    // Nothing was started under the request id: the well-formed declaration is no conflict.
    expect((await s.ok('knowledge_attach', { ...decl, offset: 0, data_base64: bytes.toString('base64') })).kind).toBe('attachment');
  });

  it('a message over the transport limit is refused with E_TOO_LARGE and the server keeps serving', async () => {
    const s = await connect(['--agent', 'bot']);
    await expect(s.call('knowledge_publish_batch', { records: [{ kind: 'page', title: 'x' }], evidence: [{ name: 'a', text: 'x'.repeat(17 * 1024 * 1024) }] }))
      .rejects.toThrow(/E_TOO_LARGE/);
    expect(s.stderr()).toContain('E_TOO_LARGE');
    expect((await s.ok('knowledge_remember', { claim: 'Still here', source_text: 'yes' })).git.state).toBe('committed');
  });

  it('the refusal answers the request id wherever the client put it, here between the method and huge params', async () => {
    const child = spawn(process.execPath, [cliPath, 'mcp', '--store', store, '--agent', 'bot'], { cwd: sb.dir, env: sb.env, stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const answered = new Promise<void>((resolve) => child.stdout!.on('data', () => out.includes('\n') && resolve()));
    const big = `{"jsonrpc":"2.0","method":"tools/call","id":"req-in-the-middle","params":{"name":"knowledge_publish_batch","arguments":{"records":[{"kind":"page","title":"x"}],"evidence":[{"name":"a","text":"${'x'.repeat(17 * 1024 * 1024)}"}]}}}\n`;
    child.stdin!.write(big);
    await answered;
    const reply = JSON.parse(out.split('\n')[0]!);
    expect(reply).toMatchObject({ jsonrpc: '2.0', id: 'req-in-the-middle', error: { data: { code: 'E_TOO_LARGE' } } });
    child.stdin!.end();
  });
});

describe('parity: the CLI and the tool give the same receipt for the same request (STYLE habit 11)', () => {
  const text = claimMd('Water boils at 100 C');
  const notes = 'measured at sea level\n';

  function cliPublish(storeDir: string, requestId: string) {
    writeFileSync(join(sb.dir, 'c.md'), text);
    writeFileSync(join(sb.dir, 'notes.txt'), notes);
    const r = cli(sb, ['publish', '--store', storeDir, '--json', '--actor', 'agent', '--request-id', requestId, '--evidence', 'notes.txt', 'c.md']);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  }
  const mcpArgs = (requestId: string) => ({ request_id: requestId, records: [{ markdown: text }], evidence: [{ name: 'notes.txt', text: notes }] });

  function shape(v: unknown): unknown {
    if (Array.isArray(v)) return v.map(shape);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, shape(x)]));
    return typeof v;
  }

  it('into two fresh stores: identical keys and value types, identical paths, hashes and evidence', async () => {
    expect(cli(sb, ['init', 'st2']).code).toBe(0);
    const viaCli = cliPublish('st2', randomUUID());
    const s = await connect(['--agent', 'bot']);
    const viaMcp = await s.ok('knowledge_publish_batch', mcpArgs(randomUUID()));
    expect(shape(viaMcp)).toEqual(shape(viaCli));
    expect(viaMcp.evidence).toEqual(viaCli.evidence);
    expect(viaMcp.records.map((r: { path: string; revision: number }) => [r.path, r.revision])).toEqual(viaCli.records.map((r: { path: string; revision: number }) => [r.path, r.revision]));
    expect({ ...viaMcp, publicationId: 0, requestId: 0, createdAt: 0, records: 0, git: viaMcp.git.state })
      .toEqual({ ...viaCli, publicationId: 0, requestId: 0, createdAt: 0, records: 0, git: viaCli.git.state });
  });

  it('into one store under one request id: the CLI returns exactly the receipt the tool returned [PUB-5]', async () => {
    const requestId = randomUUID();
    const s = await connect(['--agent', 'bot']);
    const viaMcp = await s.ok('knowledge_publish_batch', mcpArgs(requestId));
    await s.client.close();
    expect(cliPublish('st', requestId)).toEqual(viaMcp);
    const receipt = cli(sb, ['receipt', '--store', 'st', '--json', viaMcp.publicationId]);
    expect(JSON.parse(receipt.stdout)).toEqual(viaMcp);
  });
});

describe('knowledge_records, knowledge_lookup, knowledge_grep: paging and outcomes', () => {
  it('pages the exhaustive inventory with nextOffset, and filters by kind and audience', async () => {
    const s = await connect(['--agent', 'bot', '--session', 'S']);
    await s.ok('knowledge_publish_batch', { audience: 'owner-private', records: ['A', 'B', 'C'].map((t) => ({ kind: 'page', title: `Private ${t}` })) });
    await s.ok('knowledge_publish_batch', { records: ['D', 'E'].map((t) => ({ kind: 'page', title: `Chat ${t}` })) });
    const seen: string[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const page: { records: Array<{ title: string }>; total: number; nextOffset: number | null } = await s.ok('knowledge_records', { limit: 2, offset });
      expect(page.total).toBe(5);
      seen.push(...page.records.map((r) => r.title));
      offset = page.nextOffset;
    }
    expect(seen.sort()).toEqual(['Chat D', 'Chat E', 'Private A', 'Private B', 'Private C']);
    const walked: string[] = [];
    let cursor: string | null | undefined;
    do {
      const page: { records: Array<{ title: string }>; nextOffset: number | null; nextCursor: string | null } = await s.ok('knowledge_records', { limit: 2, ...(cursor ? { cursor } : {}) });
      if (cursor) expect(page.nextOffset).toBeNull();
      walked.push(...page.records.map((r) => r.title));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(walked.sort()).toEqual(['Chat D', 'Chat E', 'Private A', 'Private B', 'Private C']);
    expect((await s.fail('knowledge_records', { cursor: 'nope' })).code).toBe('E_VALIDATION');
    expect((await s.ok('knowledge_records', { audience: 'conversation' })).total).toBe(2);
    expect((await s.ok('knowledge_records', { audience: 'owner-private', kind: 'claim' })).total).toBe(0);
    expect((await s.fail('knowledge_records', { limit: 501 })).code).toBe('E_VALIDATION');
  });

  it('lookup says found, ambiguous or missing; grep honours mode and limits', async () => {
    const s = await connect(['--agent', 'bot']);
    const pub = await s.ok('knowledge_publish_batch', { records: [
      { kind: 'page', title: 'Deploy guide', aliases: ['Runbook'], body: 'blue green rollout\n' },
      { kind: 'page', title: 'Runbook', body: 'green only\n' },
      { kind: 'page', title: 'Oncall', body: 'first\n' },
      { kind: 'page', title: 'Oncall', body: 'second\n' },
    ] });
    expect(await s.ok('knowledge_lookup', { key: 'DEPLOY GUIDE' })).toMatchObject({ status: 'found', record: { id: pub.records[0].id } });
    // An exact title wins over an alias; two records of one title are ambiguous.
    expect(await s.ok('knowledge_lookup', { key: 'runbook' })).toMatchObject({ status: 'found', record: { id: pub.records[1].id } });
    const amb = await s.ok('knowledge_lookup', { key: 'oncall' });
    expect(amb.status).toBe('ambiguous');
    expect(amb.candidates.map((c: { id: string }) => c.id).sort()).toEqual([pub.records[2].id, pub.records[3].id].sort());
    expect((await s.ok('knowledge_lookup', { key: 'nothing like it' })).status).toBe('missing');
    expect((await s.ok('knowledge_grep', { query: 'blue green' })).total).toBe(1);
    expect((await s.ok('knowledge_grep', { query: 'blue green', mode: 'any' })).total).toBe(2);
    expect((await s.ok('knowledge_grep', { query: 'green blue', mode: 'phrase' })).total).toBe(0);
    expect((await s.ok('knowledge_grep', { query: 'green', kind: 'claim' })).total).toBe(0);
    expect((await s.fail('knowledge_grep', { query: 'green', limit: 0 })).code).toBe('E_VALIDATION');
    const badDate = await s.fail('knowledge_grep', { query: 'green', updated_after: 'yesterday' });
    expect(badDate.code).toBe('E_VALIDATION');
    expect(badDate.message).toMatch(/^updated_after must be/); // the tool's own argument, not the service's field
    expect((await s.fail('knowledge_grep', { query: 'w '.repeat(65) })).code).toBe('E_VALIDATION');
  });
});

describe('knowledge_attach and knowledge_attach_file [ATT-1..3]', () => {
  it('uploads in chunks, resumes without duplicating a retried chunk, and returns the attachment receipt', async () => {
    const s = await connect(['--agent', 'bot']);
    const bytes = Buffer.from('first half|second half\n');
    const decl = { request_id: randomUUID(), filename: 'log.txt', size: bytes.length, sha256: sha(bytes) };
    const status = await s.ok('knowledge_attach', decl);
    expect(status).toMatchObject({ kind: 'upload', state: 'receiving', received: 0, size: bytes.length, chunkLimit: 4 * 1024 * 1024 });
    const part1 = await s.ok('knowledge_attach', { ...decl, offset: 0, data_base64: bytes.subarray(0, 11).toString('base64') });
    expect(part1.received).toBe(11);
    // The same chunk again (a retry after a lost answer): acknowledged, not stored twice.
    expect((await s.ok('knowledge_attach', { ...decl, offset: 0, data_base64: bytes.subarray(0, 11).toString('base64') })).received).toBe(11);
    expect((await s.fail('knowledge_attach', { ...decl, data_base64: 'AA==' })).code).toBe('E_VALIDATION');
    expect((await s.fail('knowledge_attach', { ...decl, filename: 'other.txt' })).code).toBe('E_CONFLICT');
    const receipt = await s.ok('knowledge_attach', { ...decl, offset: 11, data_base64: bytes.subarray(11).toString('base64') });
    expect(receipt).toMatchObject({ kind: 'attachment', actor: 'agent', partition: 'private', sha256: sha(bytes), size: bytes.length, git: { state: 'committed' } });
    expect(readFileSync(join(vault, receipt.path))).toEqual(bytes);
    // Asking again returns the same receipt.
    expect(await s.ok('knowledge_attach', decl)).toEqual(receipt);
    // Cite the attached source from a claim.
    const pub = await s.ok('knowledge_publish_batch', { records: [{ kind: 'claim', claim_kind: 'event', title: 'The log was attached', evidence: [{ source: receipt.sourceId }] }] });
    expect((await s.ok('knowledge_read', { id: pub.records[0].id })).evidence[0]).toMatchObject({ known: true, sourceId: receipt.sourceId });
    // Resume works on attachment ids too.
    expect(await s.ok('knowledge_resume', { id: receipt.attachmentId })).toEqual(receipt);
  });

  it('takes chunks of the advertised limit (4 MiB) and inline evidence of 8 MiB', async () => {
    const s = await connect(['--agent', 'bot']);
    const bytes = Buffer.alloc(4 * 1024 * 1024 + 3, 7);
    const decl = { request_id: randomUUID(), filename: 'big.bin', size: bytes.length, sha256: sha(bytes) };
    expect((await s.ok('knowledge_attach', { ...decl, offset: 0, data_base64: bytes.subarray(0, 4 * 1024 * 1024).toString('base64') })).received).toBe(4 * 1024 * 1024);
    const receipt = await s.ok('knowledge_attach', { ...decl, offset: 4 * 1024 * 1024, data_base64: bytes.subarray(4 * 1024 * 1024).toString('base64') });
    expect(readFileSync(join(vault, receipt.path)).equals(bytes)).toBe(true);
    const evidence = Buffer.alloc(8 * 1024 * 1024, 9);
    const pub = await s.ok('knowledge_publish_batch', { records: [{ kind: 'claim', claim_kind: 'fact', title: 'Big evidence' }], evidence: [{ name: 'e.bin', base64: evidence.toString('base64') }] });
    expect(pub.evidence[0]).toMatchObject({ sha256: sha(evidence), size: evidence.length });
  });

  it('attaches a regular file inside the workspace root; outside the root is E_DENIED, a symlink E_VALIDATION', async () => {
    const ws = join(sb.dir, 'ws');
    mkdirSync(join(ws, 'docs'), { recursive: true });
    writeFileSync(join(ws, 'docs', 'spec.txt'), 'the spec\n');
    writeFileSync(join(sb.dir, 'secret.txt'), 'outside\n');
    symlinkSync(join(ws, 'docs', 'spec.txt'), join(ws, 'link.txt'));
    const s = await connect(['--agent', 'bot'], { cwd: ws });
    const r = await s.ok('knowledge_attach_file', { path: 'docs/spec.txt', attribution: 'repo' });
    expect(r).toMatchObject({ kind: 'attachment', filename: 'spec.txt', sha256: sha('the spec\n'), actor: 'agent' });
    expect((await s.fail('knowledge_attach_file', { path: '../secret.txt' })).code).toBe('E_DENIED');
    expect((await s.fail('knowledge_attach_file', { path: join(sb.dir, 'secret.txt') })).code).toBe('E_DENIED');
    expect((await s.fail('knowledge_attach_file', { path: 'link.txt' })).code).toBe('E_VALIDATION');
    expect((await s.fail('knowledge_attach_file', { path: 'docs' })).code).toBe('E_VALIDATION');
  });
});

describe('[SURF-3] scoping: the caller decides store and partition', () => {
  it('session B never sees session A\'s conversation (missing, never leaked); both see private', async () => {
    const a = await connect(['--agent', 'bot', '--session', 'A']);
    const secret = await a.ok('knowledge_remember', { claim: 'Alice likes green tea', source_text: 'Alice: I like green tea.' });
    expect(secret.partition).toBe('conversation:A');
    const shared = await a.ok('knowledge_remember', { claim: 'The office opens at nine', source_text: 'Sign: opens 9:00.', audience: 'owner-private' });
    const sid = secret.records[0].id;

    const b = await connect(['--agent', 'bot', '--session', 'B']);
    expect(await b.ok('knowledge_lookup', { key: sid })).toEqual({ status: 'missing' });
    expect(await b.ok('knowledge_lookup', { key: 'Alice likes green tea' })).toEqual({ status: 'missing' });
    expect((await b.ok('knowledge_grep', { query: 'green tea' })).total).toBe(0);
    expect((await b.ok('knowledge_records', {})).records.map((r: { id: string }) => r.id)).toEqual([shared.records[0].id]);
    for (const [tool, args] of [['knowledge_read', { id: sid }], ['knowledge_history', { id: sid }], ['knowledge_resume', { id: secret.publicationId }]] as const) {
      const e = await b.fail(tool, args);
      expect(e.code, tool).toBe('E_NOT_FOUND');
      expect(e.message).not.toContain('green tea');
    }
    expect((await b.ok('knowledge_lookup', { key: 'The office opens at nine' })).status).toBe('found');
    // B cannot revise A's record either.
    const steal = await b.fail('knowledge_publish_batch', { records: [{ id: sid, revision: 1, kind: 'page', title: 'mine now' }] });
    expect(steal.code).toBe('E_CONFLICT');
    expect(steal.message).not.toContain('green tea');

    // A still reads its own conversation; an agent without a session reads only private.
    expect((await a.ok('knowledge_read', { id: sid })).record.title).toBe('Alice likes green tea');
    const none = await connect(['--agent', 'bot']);
    expect((await none.ok('knowledge_records', {})).total).toBe(1);
    expect((await none.fail('knowledge_remember', { claim: 'x', source_text: 'y', audience: 'conversation' })).code).toBe('E_VALIDATION');
  });

  it('an id another conversation uses, or used for a record since deleted, is refused in words that name nothing of it; the deleted record stays its owner\'s', async () => {
    const a = await connect(['--agent', 'bot', '--session', 'A']);
    const first = await a.ok('knowledge_publish_batch', { records: [{ id: 'acme-merger', kind: 'page', title: 'Merger plan', body: 'v1' }] });
    await a.ok('knowledge_publish_batch', { records: [{ id: 'acme-merger', revision: 1, kind: 'page', title: 'Merger plan', body: 'v2' }] });
    await a.ok('knowledge_publish_batch', { records: [{ id: 'acme-live', kind: 'page', title: 'Live plan' }] });
    rmSync(join(vault, first.records[0].path));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0); // the record is deleted: a tombstone keeps its id and history

    const b = await connect(['--agent', 'bot', '--session', 'B']);
    const deleted = await b.fail('knowledge_publish_batch', { records: [{ id: 'acme-merger', kind: 'page', title: 'mine' }] });
    const live = await b.fail('knowledge_publish_batch', { records: [{ id: 'acme-live', kind: 'page', title: 'mine' }] });
    for (const e of [deleted, live]) {
      expect(e.code).toBe('E_CONFLICT');
      expect(e.message.replace(/acme-\w+/, 'ID')).not.toMatch(/conversation|partition|deleted|revision|merger|live/i);
    }
    // One wording for both: the refusal says the id is taken, nothing more.
    expect(deleted.message.replace('acme-merger', 'ID')).toBe(live.message.replace('acme-live', 'ID'));
    expect((await b.fail('knowledge_history', { id: 'acme-merger' })).code).toBe('E_NOT_FOUND');

    // The owner still reads the deleted record's history, and publishing it again goes on from revision 2.
    expect((await a.ok('knowledge_history', { id: 'acme-merger' })).versions.map((v: { revision: number }) => v.revision)).toEqual([2, 1]);
    const again = await a.ok('knowledge_publish_batch', { records: [{ id: 'acme-merger', kind: 'page', title: 'Merger plan', body: 'v3' }] });
    expect(again.records[0]).toMatchObject({ id: 'acme-merger', revision: 3 });
    // The operator, who may read every partition, is told where the id is used.
    writeFileSync(join(sb.dir, 'op.md'), '---\nid: acme-live\nkind: page\ntitle: Mine\n---\nx\n');
    const op = cli(sb, ['publish', '--store', 'st', 'op.md']);
    expect(op.code).toBe(1);
    expect(op.stderr).toMatch(/^E_CONFLICT: record #1: id acme-live is already used by a record in another partition \(conversation:A\)/);
  });

  it('a sandboxed caller is denied every tool with E_DENIED and is not registered', async () => {
    const s = await connect(['--agent', 'jail', '--sandboxed']);
    const { tools } = await s.client.listTools();
    for (const t of tools) expect((await s.fail(t.name, {})).code, t.name).toBe('E_DENIED');
    expect((await s.fail('knowledge_remember', { claim: 'x', source_text: 'y' })).code).toBe('E_DENIED');
    expect(s.stderr()).toContain('sandboxed');
    const reg = JSON.parse(readFileSync(join(sb.env.KNOWLEDGE_HOME!, 'registry.json'), 'utf8'));
    expect(reg.agents.jail).toBeUndefined();
    expect(existsSync(join(vault, 'private'))).toBe(false);
  });

  it('an agent registered to another store is denied every tool with E_DENIED, and that store stays untouched', async () => {
    expect(cli(sb, ['init', 'home-store']).code).toBe(0);
    const home = await connect(['--agent', 'roamer'], { storeDir: join(sb.dir, 'home-store') });
    await home.ok('knowledge_records', {});
    const foreign = await connect(['--agent', 'roamer']);
    const { tools } = await foreign.client.listTools();
    for (const t of tools) expect((await foreign.fail(t.name, {})).code, t.name).toBe('E_DENIED');
    const e = await foreign.fail('knowledge_remember', { claim: 'x', source_text: 'y' });
    expect(e.message).toContain('registered to another store');
    expect(foreign.stderr()).toContain('registered to');
    expect(existsSync(join(vault, 'private'))).toBe(false);
    // Another agent may still use this store.
    expect((await (await connect(['--agent', 'local'])).ok('knowledge_remember', { claim: 'x', source_text: 'y' })).kind).toBe('publication');
  });
});

describe('[LAY-4] the server holds the writer lock only during a write', () => {
  it('lets the CLI write between tool calls', async () => {
    const s = await connect(['--agent', 'bot']);
    await s.ok('knowledge_remember', { claim: 'Before', source_text: 'a' });
    writeFileSync(join(sb.dir, 'p.md'), '---\nkind: page\ntitle: From the CLI\n---\n');
    const r = cli(sb, ['publish', '--store', 'st', '--json', 'p.md']);
    expect(r.code, r.stderr).toBe(0);
    expect((await s.ok('knowledge_lookup', { key: 'From the CLI' })).status).toBe('found');
  });

  /** Another process holding the store's writer lock, described as `command`. */
  async function startHolder(command: string) {
    const holder = spawn(process.execPath, ['--input-type=module', '-e', `
      const { KnowledgeService } = await import(${JSON.stringify(pathToFileURL(join(cliPath, '..', '..', 'dist', 'service.js')).href)});
      KnowledgeService.open(${JSON.stringify(store)}, { write: true, command: ${JSON.stringify(command)} });
      process.stdout.write('ready\\n');
      setInterval(() => {}, 1000);
    `], { cwd: sb.dir, env: sb.env, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(holder);
    await new Promise<void>((resolveReady, reject) => {
      holder.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolveReady());
      holder.on('exit', (code) => reject(new Error(`holder exited ${code}`)));
    });
    return holder;
  }

  it('next to another agent\'s write, E_LOCKED names neither that agent nor its conversation', async () => {
    const holder = await startHolder('knowledge mcp (agent rival, session secret-merger-7731)');
    const s = await connect(['--agent', 'bot', '--session', 'mine'], { env: { KNOWLEDGE_MCP_LOCK_WAIT_MS: '200' } });
    const e = await s.fail('knowledge_remember', { claim: 'Blocked', source_text: 'x' });
    expect(e.code).toBe('E_LOCKED');
    expect(e.message).toContain('knowledge mcp (another agent\'s write)');
    expect(JSON.stringify(e)).not.toMatch(/secret-merger|rival/);
    holder.kill('SIGKILL');
  });

  it('next to another writer (a Gateway), writes answer E_LOCKED naming the holder; reads still work', async () => {
    const holder = await startHolder('knowledge serve (test holder)');
    const s = await connect(['--agent', 'bot'], { env: { KNOWLEDGE_MCP_LOCK_WAIT_MS: '200' } });
    const e = await s.fail('knowledge_remember', { claim: 'Blocked', source_text: 'x' });
    expect(e.code).toBe('E_LOCKED');
    expect(e.message).toContain('knowledge serve (test holder)');
    expect((await s.ok('knowledge_records', {})).total).toBe(0);
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
    // The holder is gone (a crashed holder never blocks forever): the next write goes through.
    expect((await s.ok('knowledge_remember', { claim: 'Unblocked', source_text: 'x' })).git.state).toBe('committed');
  });
});

describe('layer direction (STYLE habit 12)', () => {
  it('only src/mcp imports the MCP SDK', () => {
    const root = join(cliPath, '..', '..', 'src');
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (p.endsWith('.ts') && !relative(root, p).startsWith('mcp/') && readFileSync(p, 'utf8').includes('@modelcontextprotocol/')) offenders.push(relative(root, p));
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});

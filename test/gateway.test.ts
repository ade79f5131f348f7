/**
 * The Gateway [SURF-2, LAY-4]: the JSON API in-process through
 * `app.request()` over a real store (real SQLite, real git), and the real
 * server and `knowledge serve` process for what only a bound port shows
 * (the writer lock, tokens over HTTP, Host checks, clean shutdown).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { makeSandbox, cli, cliPath, gitWrapper, userGit, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { createApp } from '../src/gateway/app.js';
import { httpStatus } from '../src/errors.js';

const httpStatusOf = (code: keyof typeof httpStatus) => httpStatus[code];
import { startGateway, type RunningGateway } from '../src/gateway/server.js';

let sb: Sandbox;
let store: string;
let vault: string;
let svc: KnowledgeService | null = null;
const gateways: RunningGateway[] = [];
const children: ChildProcess[] = [];

beforeEach(() => {
  sb = makeSandbox('kn-gw-');
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  store = join(sb.dir, 'st');
  vault = join(store, 'vault');
});

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const g of gateways.splice(0)) await g.close();
  svc?.close();
  svc = null;
  sb.cleanup();
});

function openService(): KnowledgeService {
  svc = KnowledgeService.open(store, { write: true, command: 'gateway test', env: sb.env, git: { pathEnv: sb.env.PATH } });
  return svc;
}

const page = (fm: string, body = 'body\n') => `---\n${fm.trim()}\n---\n${body}`;

/** A store with a few records: one with evidence, one revised twice, links between them. */
const NOTES = Buffer.from('Notes from the design review.\nWe chose SQLite.\n');

async function seed(s: KnowledgeService) {
  const notes = NOTES;
  await s.publish({ partition: 'private', actor: 'operator', records: [page('kind: page\nid: rec-glossary\ntitle: Glossary\ntags: [ref]', 'Version one.\n')], evidence: [] });
  await s.publish({ partition: 'private', actor: 'agent', records: [page('kind: page\nid: rec-glossary\nrevision: 1\ntitle: Glossary\ntags: [ref]', 'Version two.\n')], evidence: [] });
  await s.publish({ partition: 'private', actor: 'operator', records: [page('kind: page\nid: rec-glossary\nrevision: 2\ntitle: Glossary\ntags: [ref]', 'Version three, about lanterns.\n')], evidence: [] });
  await s.publish({
    partition: 'private',
    actor: 'agent',
    records: [page('kind: claim\nclaim_kind: decision\nid: rec-claim\ntitle: We use SQLite\ntags: [storage]\ndependencies: [rec-glossary]', 'Decided at the review. See [[rec-glossary]].\n')],
    evidence: [{ name: 'review.txt', bytes: notes, attribution: 'design review' }],
  });
  await s.publish({ partition: 'conversation:chat1', actor: 'agent', records: [page('kind: page\nid: rec-chat\ntitle: Chat notes', 'Lanterns again.\n')], evidence: [] });
  await s.settle(); // the index update after the last receipt (Knowledge holds index.lock until then)
}

async function json(res: Response | Promise<Response>) {
  const r = await res;
  return { status: r.status, body: (await r.json()) as Record<string, unknown> & { error?: { code: string; message: string } } };
}

const WRITE = { method: 'POST', headers: { 'X-Knowledge-Request': '1' } } as const;

describe('the Gateway\'s error codes for a failing disk', () => {
  it('a full disk (SQLITE_FULL, ENOSPC) is E_IO as on the command line; a database file gone is E_UNAVAILABLE', async () => {
    const s = openService();
    const app = createApp(s);
    const failWith = (code: string, message: string) => {
      s.search = () => { throw Object.assign(new Error(message), { code }); };
    };
    failWith('SQLITE_FULL', 'database or disk is full');
    const full = await json(app.request('/api/search?q=x'));
    expect(full.status).toBe(httpStatusOf('E_IO'));
    expect(full.body.error).toEqual({ code: 'E_IO', message: 'the disk is full (SQLITE_FULL): database or disk is full' });
    failWith('ENOSPC', 'no space left on device');
    expect((await json(app.request('/api/search?q=x'))).body.error?.code).toBe('E_IO');
    failWith('SQLITE_READONLY_DBMOVED', 'attempt to write a readonly database');
    expect((await json(app.request('/api/search?q=x'))).body.error?.code).toBe('E_UNAVAILABLE');
  });
});

describe('[READ-1] records, lookup and search over HTTP', () => {
  it('lists records, filters them, and reads one with its evidence and backlinks', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    const all = await json(app.request('/api/records'));
    expect(all.status).toBe(200);
    expect(all.body.total).toBe(3);
    const claims = await json(app.request('/api/records?kind=claim'));
    expect((claims.body.records as Array<{ id: string }>).map((r) => r.id)).toEqual(['rec-claim']);
    const byType = await json(app.request('/api/records?type=decision'));
    expect((byType.body.records as Array<{ id: string }>).map((r) => r.id)).toEqual(['rec-claim']);
    expect((await json(app.request('/api/records?type=no-such-type'))).body.total).toBe(0);
    const chat = await json(app.request('/api/records?partition=conversation%3Achat1'));
    expect((chat.body.records as Array<{ id: string }>).map((r) => r.id)).toEqual(['rec-chat']);
    // A cursor walk: nextCursor as cursor until it is null, every record once.
    const walked: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await json(app.request(`/api/records?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
      expect(page.status).toBe(200);
      walked.push(...(page.body.records as Array<{ id: string }>).map((r) => r.id));
      cursor = page.body.nextCursor as string | null;
    } while (cursor !== null);
    expect(walked).toEqual((all.body.records as Array<{ id: string }>).map((r) => r.id));
    const badCursor = await json(app.request('/api/records?cursor=nope'));
    expect(badCursor.status).toBe(400);
    expect(badCursor.body).toMatchObject({ error: { code: 'E_VALIDATION' } });

    const claim = await json(app.request('/api/records/rec-claim'));
    expect(claim.status).toBe(200);
    expect(claim.body).toMatchObject({ record: { id: 'rec-claim', kind: 'claim', revision: 1 }, links: ['rec-glossary'] });
    const ev = (claim.body.evidence as Array<{ known: boolean; path: string; size: number }>)[0]!;
    expect(ev).toMatchObject({ known: true, size: NOTES.length, mediaType: expect.stringMatching(/^text\/plain/) });
    expect(ev.path).toMatch(/^private\/evidence\/.+\/review\.txt$/);
    const glossary = await json(app.request('/api/records/rec-glossary'));
    expect((glossary.body.backlinks as Array<{ id: string }>).map((b) => b.id)).toEqual(['rec-claim']);
  });

  it('looks up by title and searches with filters', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    expect((await json(app.request('/api/lookup?key=glossary'))).body).toMatchObject({ status: 'found', record: { id: 'rec-glossary' } });
    expect((await json(app.request('/api/lookup?key=nothing%20here'))).body).toEqual({ status: 'missing' });
    const hits = await json(app.request('/api/search?q=lanterns'));
    expect(hits.status).toBe(200);
    expect((hits.body.results as Array<{ id: string }>).map((r) => r.id).sort()).toEqual(['rec-chat', 'rec-glossary']);
    const tagged = await json(app.request('/api/search?q=lanterns&tag=ref'));
    expect((tagged.body.results as Array<{ id: string }>).map((r) => r.id)).toEqual(['rec-glossary']);
    const future = await json(app.request('/api/search?q=lanterns&after=2999-01-01'));
    expect(future.body.total).toBe(0);
  });

  it('answers unknown record ids with 404 E_NOT_FOUND, including path-traversal attempts', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    for (const path of [
      '/api/records/no-such-record',
      '/api/records/..%2F..%2Fstate.sqlite',
      '/api/records/%2e%2e',
      '/api/records/..%2Fvault.json/history',
      '/api/records/%00',
    ]) {
      const r = await json(app.request(path));
      expect(r.status, path).toBe(404);
      expect(r.body.error?.code, path).toBe('E_NOT_FOUND');
    }
    expect((await json(app.request('/api/no-such-route'))).body.error?.code).toBe('E_NOT_FOUND');
  });

  it('answers malformed query parameters with 400 E_VALIDATION and oversized ones with 413 E_TOO_LARGE', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    for (const path of [
      '/api/records?kind=essay',
      '/api/records?limit=0',
      '/api/records?limit=-1',
      '/api/records?limit=1e3',
      '/api/records?offset=abc',
      '/api/records?partition=..%2Fprivate',
      '/api/records?lifecyle=active',
      '/api/records?kind=page&kind=claim',
      '/api/search',
      '/api/search?q=x&mode=regex',
      '/api/search?q=x&after=yesterday',
      `/api/search?q=${'a'.repeat(501)}`,
      '/api/lookup',
      '/api/activity?limit=100000',
      '/api/records/rec-glossary/diff?from=HEAD~1&to=HEAD',
      '/api/records/rec-glossary/diff?from=' + 'a'.repeat(40),
      // Bytes that are not UTF-8 once percent-decoded, in any string parameter (the CLI refuses such an argument).
      '/api/search?q=%FF',
      '/api/search?q=caf%E9',
      '/api/search?q=x&tag=%FF',
      '/api/records?type=%C3',
      '/api/records?cursor=%FF',
      '/api/lookup?key=%FF',
      '/api/activity?cursor=%FF',
      '/api/records/rec-glossary/diff?from=%FF&to=%FF',
      // The same in a path segment: an id no caller could have meant is malformed, not absent.
      '/api/records/%FF',
      '/api/records/rec-%E9/history',
      '/api/publications/%C3',
    ]) {
      const r = await json(app.request(path));
      expect(r.status, path).toBe(400);
      expect(r.body.error?.code, path).toBe('E_VALIDATION');
    }
    expect((await json(app.request('/api/search?q=%FF'))).body.error?.message).toMatch(/^query parameter "q" is not UTF-8 text/);
    expect((await json(app.request('/api/records/%FF'))).body.error?.message).toMatch(/^path segment 3 \("%FF"\) is not UTF-8 text/);
    // Escaped UTF-8 in a path is text like any other: an unknown id is absent.
    expect((await json(app.request('/api/records/caf%C3%A9'))).body.error?.code).toBe('E_NOT_FOUND');
    // A date error names the query parameter the caller sent.
    expect((await json(app.request('/api/search?q=x&before=soon'))).body.error?.message).toMatch(/^before must be/);
    const huge = await json(app.request(`/api/search?q=${'a'.repeat(5000)}`));
    expect(huge.status).toBe(413);
    expect(huge.body.error?.code).toBe('E_TOO_LARGE');
  });
});

describe('[READ-2] history and diffs over HTTP', () => {
  it('lists every committed version with its actor and diffs any two', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    const h = await json(app.request('/api/records/rec-glossary/history'));
    expect(h.status).toBe(200);
    const versions = h.body.versions as Array<{ commit: string; actor: string; revision: number }>;
    expect(versions.map((v) => [v.revision, v.actor])).toEqual([[3, 'operator'], [2, 'agent'], [1, 'operator']]);
    const d = await json(app.request(`/api/records/rec-glossary/diff?from=${versions[2]!.commit}&to=${versions[0]!.commit}`));
    expect(d.status).toBe(200);
    const patch = d.body.patch as string;
    expect(patch).toContain('-Version one.');
    expect(patch).toContain('+Version three, about lanterns.');
    expect(patch).toContain('-revision: 1');
    expect(patch).toContain('+revision: 3');
    // A commit of the vault that is not a version of this record.
    const claimHistory = await json(app.request('/api/records/rec-claim/history'));
    const other = (claimHistory.body.versions as Array<{ commit: string }>)[0]!.commit;
    const wrong = await json(app.request(`/api/records/rec-glossary/diff?from=${other}&to=${versions[0]!.commit}`));
    expect(wrong.status).toBe(400);
    expect(wrong.body.error?.code).toBe('E_VALIDATION');
  });
});

describe('[SURF-2][GIT-16] Activity & issues and retry over HTTP', () => {
  it('shows a pending checkpoint with its reason; resume needs the same-origin header; after the fix it is committed', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    const receipt = await s.publish({ partition: 'private', actor: 'agent', records: [page('kind: page\nid: rec-late\ntitle: Late')], evidence: [] });
    expect(receipt.git.state).toBe('pending');

    const act = await json(app.request('/api/activity'));
    const entries = act.body as unknown as Array<{ id: string; kind: string; git: { state: string; code?: string; reason?: string } }>;
    const entry = entries.find((e) => e.id === receipt.publicationId)!;
    expect(entry.git).toMatchObject({ state: 'pending', code: 'locked' });
    expect(entry.git.reason).toContain('index.lock');

    // Cross-site attempts are refused and change nothing.
    const noHeader = await json(app.request(`/api/publications/${receipt.publicationId}/resume`, { method: 'POST' }));
    expect(noHeader.status).toBe(403);
    expect(noHeader.body.error?.code).toBe('E_DENIED');
    const foreign = await json(app.request(`/api/publications/${receipt.publicationId}/resume`, { method: 'POST', headers: { 'X-Knowledge-Request': '1', Origin: 'http://evil.example' } }));
    expect(foreign.status).toBe(403);
    expect(await json(app.request(`/api/publications/${receipt.publicationId}/resume`, { method: 'GET' }))).toMatchObject({ status: 404 });

    // Still locked: resume answers 200 with the same pending state, and the lock is left alone [GIT-19].
    const still = await json(app.request(`/api/publications/${receipt.publicationId}/resume`, WRITE));
    expect(still.status).toBe(200);
    expect(still.body.git).toMatchObject({ state: 'pending', code: 'locked' });
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(true);

    rmSync(join(vault, '.git', 'index.lock'));
    const done = await json(app.request(`/api/publications/${receipt.publicationId}/resume`, WRITE));
    expect(done.status).toBe(200);
    expect(done.body.git).toMatchObject({ state: 'committed' });
    const commit = (done.body.git as { commit: string }).commit;
    expect(userGit(sb, vault, ['log', '-1', '--format=%H']).trim()).toBe(commit);
    const after = (await json(app.request('/api/activity'))).body as unknown as typeof entries;
    expect(after.find((e) => e.id === receipt.publicationId)!.git).toEqual({ state: 'committed', commit });
    expect((await json(app.request(`/api/publications/${receipt.publicationId}`))).body.git).toEqual({ state: 'committed', commit });
  });

  it('two concurrent retries commit the waiting checkpoint once', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    const a = await s.publish({ partition: 'private', actor: 'agent', records: [page('kind: page\ntitle: Waiting A')], evidence: [] });
    const b = await s.publish({ partition: 'private', actor: 'agent', records: [page('kind: page\ntitle: Waiting B')], evidence: [] });
    rmSync(join(vault, '.git', 'index.lock'));
    const before = Number(userGit(sb, vault, ['rev-list', '--count', 'HEAD']).trim());
    // Retries from two tabs at once: both drain the same outbox; the Gateway runs them one after the other.
    const [ra, rb, ra2, rb2] = await Promise.all([
      json(app.request(`/api/publications/${b.publicationId}/resume`, WRITE)),
      json(app.request(`/api/publications/${a.publicationId}/resume`, WRITE)),
      json(app.request(`/api/publications/${b.publicationId}/resume`, WRITE)),
      json(app.request(`/api/publications/${a.publicationId}/resume`, WRITE)),
    ]);
    for (const r of [ra, rb, ra2, rb2]) expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(ra.body.git).toMatchObject({ state: 'committed' });
    expect(rb.body.git).toMatchObject({ state: 'committed' });
    expect(ra2.body.git).toEqual(ra.body.git);
    expect(rb2.body.git).toEqual(rb.body.git);
    expect(Number(userGit(sb, vault, ['rev-list', '--count', 'HEAD']).trim())).toBe(before + 2);
    // In queue order [GIT-5]: A's commit is B's parent.
    expect(userGit(sb, vault, ['rev-parse', `${(ra.body.git as { commit: string }).commit}^`]).trim()).toBe((rb.body.git as { commit: string }).commit);
  });

  it('runs a scan: observes an external edit, reports validation findings, and keeps its receipt', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    const first = await json(app.request('/api/scan', { ...WRITE, headers: { ...WRITE.headers, 'Content-Type': 'application/json' }, body: JSON.stringify({ partition: 'private' }) }));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const glossaryPath = s.readRecord({ kind: 'operator' }, 'rec-glossary').record.path;
    expect(glossaryPath).toMatch(/^private\/pages\/[0-9a-f]{2}\/glossary\.md$/);
    appendFileSync(join(vault, glossaryPath), '\nEdited outside.\n');
    writeFileSync(join(vault, 'private', 'pages', 'broken.md'), '---\nkind: [unclosed\n---\n');
    const scan = await json(app.request('/api/scan', WRITE));
    expect(scan.status).toBe(200);
    expect(scan.body.modified).toContain(glossaryPath);
    const diags = scan.body.diagnostics as Array<{ path: string; code: string }>;
    expect(diags.some((d) => d.path === 'private/pages/broken.md')).toBe(true);
    expect(scan.body.git).toMatchObject({ state: 'committed' });
    const kept = await json(app.request(`/api/scans/${scan.body.scanId as string}`));
    expect(kept.status).toBe(200);
    expect(kept.body.scanId).toBe(scan.body.scanId);
    const act = (await json(app.request('/api/activity'))).body as unknown as Array<{ id: string; kind: string; detail: { diagnostics: number } }>;
    expect(act.find((e) => e.id === scan.body.scanId)).toMatchObject({ kind: 'scan' });
  });

  it('refuses malformed and oversized write bodies, and unknown ids', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    const post = (path: string, body: string) => json(app.request(path, { ...WRITE, headers: { ...WRITE.headers, 'Content-Type': 'application/json' }, body }));
    expect(await post('/api/scan', '{not json')).toMatchObject({ status: 400, body: { error: { code: 'E_VALIDATION' } } });
    expect(await post('/api/scan', '{"partition": "private", "path": "/etc"}')).toMatchObject({ status: 400, body: { error: { code: 'E_VALIDATION' } } });
    expect(await post('/api/scan', '{"partition": "../../etc"}')).toMatchObject({ status: 400, body: { error: { code: 'E_VALIDATION' } } });
    expect(await post('/api/scan', JSON.stringify({ partition: 'x'.repeat(40_000) }))).toMatchObject({ status: 413, body: { error: { code: 'E_TOO_LARGE' } } });
    expect(await post('/api/publications/pub-nope/resume', '')).toMatchObject({ status: 404, body: { error: { code: 'E_NOT_FOUND' } } });
    expect(await post('/api/attachments/att-nope/resume', '')).toMatchObject({ status: 404, body: { error: { code: 'E_NOT_FOUND' } } });
  });

  it('a read-only store serves reads and refuses writes with E_READ_ONLY', async () => {
    expect(cli(sb, ['init', 'ro', '--read-only']).code).toBe(0);
    svc = KnowledgeService.open(join(sb.dir, 'ro'), { write: true, env: sb.env });
    const app = createApp(svc);
    expect((await json(app.request('/api/records'))).status).toBe(200);
    expect(await json(app.request('/api/scan', WRITE))).toMatchObject({ status: 403, body: { error: { code: 'E_READ_ONLY' } } });
  });
});

describe('[LAY-2] the registry\'s writesEnabled while the Gateway runs', () => {
  it('an operator who sets writesEnabled to false (or back to true) in the registry is obeyed from the next request, without a restart', async () => {
    const s = openService();
    const app = createApp(s);
    const registryFile = join(sb.home, '.knowledge', 'registry.json');
    const setWrites = (on: boolean) => {
      const reg = JSON.parse(readFileSync(registryFile, 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
      reg.stores[store]!.writesEnabled = on;
      writeFileSync(registryFile, JSON.stringify(reg, null, 2));
    };
    const scan = () => json(app.request('/api/scan', { ...WRITE, headers: { ...WRITE.headers, 'Content-Type': 'application/json' }, body: '{"partition": "private"}' }));
    mkdirSync(join(vault, 'private'), { recursive: true });
    writeFileSync(join(vault, 'private', 'a.md'), page('kind: page\nid: rec-a\ntitle: A'));
    setWrites(false);
    expect(await json(app.request('/api/store'))).toMatchObject({ status: 200, body: { writesEnabled: false } });
    expect(await scan()).toMatchObject({ status: 403, body: { error: { code: 'E_READ_ONLY' } } });
    setWrites(true);
    expect(await json(app.request('/api/store'))).toMatchObject({ status: 200, body: { writesEnabled: true } });
    expect(await scan()).toMatchObject({ status: 200 });
  });
});

describe('[LAY-2] a store made writable while the Gateway runs', () => {
  it('gets what a writer\'s open gives it: a publication cut short while it was read-only is finished by the next request', async () => {
    writeFileSync(join(sb.dir, 'a.md'), page('kind: page\nid: rec-cut\ntitle: Cut short'));
    expect(cli(sb, ['publish', '--store', 'st', 'a.md'], { env: { KNOWLEDGE_CRASH_AT: 'after-install' } }).code).toBeNull();
    const registryFile = join(sb.home, '.knowledge', 'registry.json');
    const setWrites = (on: boolean) => {
      const reg = JSON.parse(readFileSync(registryFile, 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
      reg.stores[store]!.writesEnabled = on;
      writeFileSync(registryFile, JSON.stringify(reg, null, 2));
    };
    setWrites(false);
    const app = createApp(openService());
    const status = async () => ((await json(app.request('/api/activity'))).body as unknown as Array<{ detail: { status?: string } }>)[0]!.detail.status;
    expect(await status()).toBe('journaled');
    setWrites(true);
    expect(await status()).toBe('acknowledged');
    // A registry caught half-saved: reads go on, writes wait for it (E_UNAVAILABLE), and both work once it reads again.
    const saved = readFileSync(registryFile, 'utf8');
    writeFileSync(registryFile, saved.slice(0, saved.length >> 1));
    expect((await json(app.request('/api/records'))).status).toBe(200);
    expect(await json(app.request('/api/scan', WRITE))).toMatchObject({ status: 503, body: { error: { code: 'E_UNAVAILABLE', message: expect.stringMatching(/registry .* is unreadable/) } } });
    writeFileSync(registryFile, saved);
    expect((await json(app.request('/api/scan', WRITE))).status).toBe(200);
  });
});

describe('[SURF-2] tokens, hosts and the page', () => {
  it('with a token, every API route needs Authorization: Bearer <token> (401 otherwise); the page files carry no data and need none', async () => {
    const s = openService();
    await seed(s);
    const token = 'tok-0123456789abcdef';
    const app = createApp(s, { token });
    const none = await app.request('/api/records');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('E_UNAUTHORIZED');
    expect((await app.request('/api/records', { headers: { Authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
    expect((await app.request('/api/store', { headers: { Authorization: `Basic ${token}` } })).status).toBe(401);
    // A token in the query string is not a credential (it would end up in logs and history).
    expect((await app.request(`/api/records?token=${token}`)).status).toBe(401);
    expect((await app.request('/api/records', { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    // Writes need the token too, before anything else is looked at.
    expect((await app.request('/api/scan', WRITE)).status).toBe(401);
    expect((await app.request('/')).status).toBe(200);
  });

  it('Activity says what each entry was: a publication\'s record count and first title, an attachment\'s file name, a scan\'s counts (JSON, HTTP and the CLI\'s text)', async () => {
    writeFileSync(join(sb.dir, 'w1.md'), '---\nkind: page\ntitle: "Two  words  and more"\n---\nx\n');
    writeFileSync(join(sb.dir, 'w2.md'), '---\nkind: page\ntitle: Second of two\n---\nx\n');
    const pub = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'w1.md', 'w2.md']).stdout) as { publicationId: string };
    writeFileSync(join(sb.dir, 'w3.md'), '---\nkind: page\ntitle: Alone\n---\nx\n');
    const alone = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--partition', 'conversation:c1', 'w3.md']).stdout) as { publicationId: string };
    writeFileSync(join(sb.dir, 'notes.txt'), 'n');
    expect(cli(sb, ['attach', '--store', 'st', 'notes.txt']).code).toBe(0);
    writeFileSync(join(sb.dir, 'st', 'vault', 'private', 'by-hand.md'), '---\nkind: page\ntitle: By hand\n---\nx\n');
    expect(cli(sb, ['scan', '--store', 'st', '--partition', 'private']).code).toBe(0);
    const app = createApp(openService());
    const entries = (await json(app.request('/api/activity?limit=4'))).body as unknown as Array<{ id: string; kind: string; detail: Record<string, unknown> }>;
    expect(entries.map((e) => e.kind)).toEqual(['scan', 'attachment', 'publication', 'publication']);
    expect(entries[2]).toMatchObject({ id: alone.publicationId, detail: { partition: 'conversation:c1', records: 1, title: 'Alone' } });
    // The title exactly as published, in JSON.
    expect(entries[3]).toMatchObject({ id: pub.publicationId, detail: { partition: 'private', records: 2, title: 'Two  words  and more' } });
    const text = cli(sb, ['activity', '--store', 'st', '--limit', '4']).stdout.split('\n');
    expect(text[0]).toMatch(/ scan .* external baseline of private: 1 added {2}committed [0-9a-f]{40}$/);
    expect(text[1]).toMatch(/ attachment .* operator notes\.txt in private {2}committed [0-9a-f]{40}$/);
    expect(text[2]).toMatch(/ publication .* operator “Alone” in conversation:c1 {2}committed [0-9a-f]{40}$/);
    // On one line: runs of white space are one space.
    expect(text[3]).toContain(' operator “Two words and more” and 1 more in private  committed ');
  });

  it('Activity pages reach every entry: limit and offset, newest first, each entry once', async () => {
    for (let k = 0; k < 5; k++) {
      writeFileSync(join(sb.dir, `act${k}.md`), `---\nkind: page\ntitle: Activity ${k}\n---\nx\n`);
      expect(cli(sb, ['publish', '--store', 'st', `act${k}.md`]).code).toBe(0);
    }
    const app = createApp(openService());
    const all = await json(app.request('/api/activity?limit=500'));
    const ids = (all.body as unknown as Array<{ id: string }>).map((e) => e.id);
    expect(ids.length).toBeGreaterThanOrEqual(5);
    const paged: string[] = [];
    for (let offset = 0; offset < ids.length + 2; offset += 2) {
      const page = await json(app.request(`/api/activity?limit=2&offset=${offset}`));
      expect(page.status).toBe(200);
      paged.push(...(page.body as unknown as Array<{ id: string }>).map((e) => e.id));
    }
    expect(paged).toEqual(ids);
    expect((await json(app.request('/api/activity?offset=-1'))).status).toBe(400);
    // The CLI pages the same way, and says on stderr that there are more.
    const cliPage = cli(sb, ['activity', '--store', 'st', '--json', '--limit', '2', '--offset', '2']);
    expect((JSON.parse(cliPage.stdout) as Array<{ id: string }>).map((e) => e.id)).toEqual(ids.slice(2, 4));
    const cliEntries = JSON.parse(cliPage.stdout) as Array<{ id: string; cursor: string }>;
    expect(cliPage.stderr).toBe(`the newest 3–4 entries; older ones: --offset 4, or --cursor ${cliEntries[1]!.cursor}\n`);
    // By cursor, over HTTP and from the CLI: the entries after the one whose cursor is given.
    const byCursor = await json(app.request(`/api/activity?limit=2&cursor=${cliEntries[1]!.cursor}`));
    expect((byCursor.body as unknown as Array<{ id: string }>).map((e) => e.id)).toEqual(ids.slice(4, 6));
    const both = await json(app.request(`/api/activity?offset=2&cursor=${cliEntries[1]!.cursor}`));
    expect(both.status).toBe(400);
    // A cursor beside an offset is refused alike by Activity and the list (one check, src/read/query.ts cursorStart), here and from the CLI.
    const listCursor = (await json(app.request('/api/records?limit=1'))).body.nextCursor as string;
    const listBoth = await json(app.request(`/api/records?offset=1&cursor=${encodeURIComponent(listCursor)}`));
    expect(listBoth.status).toBe(400);
    expect(both.body).toEqual(listBoth.body);
    expect(both.body).toEqual({ error: { code: 'E_VALIDATION', message: 'give cursor or offset, not both: a cursor already says where the page starts' } });
    const cliBoth = cli(sb, ['activity', '--store', 'st', '--offset', '2', '--cursor', cliEntries[1]!.cursor]);
    const cliListBoth = cli(sb, ['list', '--store', 'st', '--offset', '1', '--cursor', listCursor]);
    expect([cliBoth.code, cliListBoth.code]).toEqual([1, 1]);
    expect(cliBoth.stderr).toBe(cliListBoth.stderr);
    expect(cliBoth.stderr).toMatch(/^E_VALIDATION: give cursor or offset, not both/);
    expect((await json(app.request('/api/activity?cursor=nonsense'))).status).toBe(400);
    const cliNext = cli(sb, ['activity', '--store', 'st', '--json', '--limit', '1', '--cursor', cliEntries[1]!.cursor]);
    const next = JSON.parse(cliNext.stdout) as Array<{ id: string; cursor: string }>;
    expect(next.map((e) => e.id)).toEqual(ids.slice(4, 5));
    expect(cliNext.stderr).toBe(ids.length > 5 ? `the next 1 after the cursor; older ones: --cursor ${next[0]!.cursor}\n` : '');
    const badCursor = cli(sb, ['activity', '--store', 'st', '--cursor', 'nonsense']);
    expect([badCursor.code, badCursor.stderr]).toEqual([1, 'E_VALIDATION: cursor must be the cursor of an activity entry\n']);
    // Exactly the last entries: no promise of older ones.
    const last = cli(sb, ['activity', '--store', 'st', '--json', '--limit', '2', '--offset', String(ids.length - 2)]);
    expect((JSON.parse(last.stdout) as Array<{ id: string }>).map((e) => e.id)).toEqual(ids.slice(-2));
    expect(last.stderr).toBe('');
  });

  it('answers only Host headers it was told to (DNS rebinding)', async () => {
    const s = openService();
    const app = createApp(s, { allowedHosts: ['127.0.0.1:8484'] });
    expect((await app.request('http://127.0.0.1:8484/api/records')).status).toBe(200);
    const r = await json(app.request('http://attacker.example:8484/api/records'));
    expect(r.status).toBe(403);
    expect(r.body.error?.code).toBe('E_DENIED');
  });

  it('serves the page from a fixed table with a strict CSP, and nothing else from disk', async () => {
    const s = openService();
    const app = createApp(s);
    const index = await app.request('/');
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = index.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const html = await index.text();
    // No external resources in the page itself.
    expect(html).not.toMatch(/(?:src|href)="(?:https?:)?\/\//);
    expect((await app.request('/app.js')).headers.get('content-type')).toMatch(/^text\/javascript/);
    for (const path of ['/../package.json', '/%2e%2e/package.json', '/app.js/../../package.json', '/page/app.js', '/src/gateway/app.ts', '/..%2f..%2fpackage.json', '/state.sqlite', '/vault/vault.json']) {
      const r = await app.request(path);
      expect(r.status, path).toBe(404);
      expect(await r.text(), path).not.toContain('"dependencies"');
    }
  });

  it('a store that becomes unavailable while serving answers 503 E_UNAVAILABLE, then recovers when it is back', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    renameSync(vault, `${vault}.moved`);
    for (const path of ['/api/records', '/api/records/rec-claim', '/api/search?q=lanterns', '/api/activity']) {
      const r = await json(app.request(path));
      expect(r.status, path).toBe(503);
      expect(r.body.error?.code, path).toBe('E_UNAVAILABLE');
    }
    expect((await app.request('/api/scan', WRITE)).status).toBe(503);
    // The page itself still loads and shows the error state.
    expect((await app.request('/')).status).toBe(200);
    renameSync(`${vault}.moved`, vault);
    expect((await app.request('/api/records')).status).toBe(200);
    renameSync(join(store, 'state.sqlite'), join(store, 'state.moved'));
    expect((await json(app.request('/api/records'))).body.error?.code).toBe('E_UNAVAILABLE');
    renameSync(join(store, 'state.moved'), join(store, 'state.sqlite'));
    expect((await app.request('/api/records')).status).toBe(200);
    // Another state.sqlite put in its place (a restore from a backup, say): this handle no longer names it.
    copyFileSync(join(store, 'state.sqlite'), join(store, 'state.copy'));
    renameSync(join(store, 'state.sqlite'), join(store, 'state.moved'));
    renameSync(join(store, 'state.copy'), join(store, 'state.sqlite'));
    const replaced = await json(app.request('/api/records'));
    expect(replaced.body.error?.code).toBe('E_UNAVAILABLE');
    expect(replaced.body.error?.message).toMatch(/state\.sqlite was replaced/);
    expect((await app.request('/api/scan', WRITE)).status).toBe(503);
  });

  it('a write-ahead log deleted under the served store answers 503: its writes, and its writer lock, would be in a file no one else reads [LAY-4]', async () => {
    const s = openService();
    await seed(s);
    const app = createApp(s);
    expect((await app.request('/api/scan', WRITE)).status).toBe(200);
    rmSync(join(store, 'state.sqlite-wal'));
    rmSync(join(store, 'state.sqlite-shm'), { force: true });
    const r = await json(app.request('/api/scan', WRITE));
    expect(r.status).toBe(503);
    expect(r.body.error?.message).toMatch(/state\.sqlite-wal was deleted or replaced/);
    expect((await json(app.request('/api/records'))).body.error?.code).toBe('E_UNAVAILABLE');
    // Its writer lock is not in that log alone: the OS file lock on writer.lock still keeps every other writer out,
    // so no command writes a state the served process would overwrite when it ends.
    writeFileSync(join(sb.dir, 'x.md'), page('kind: page\ntitle: Meanwhile'));
    const meanwhile = cli(sb, ['publish', '--store', 'st', 'x.md']);
    expect(meanwhile.code).toBe(1);
    expect(meanwhile.stderr).toMatch(/^E_LOCKED: /);
  });
});

/** The raw response to `request` written as is to the Gateway's port (what an HTTP client would not send). */
function rawRequest(port: string, request: string): Promise<string> {
  return new Promise((done, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (c) => { answer += c; });
    socket.on('end', () => done(answer));
    socket.on('error', reject);
  });
}

/** GET over real HTTP with an explicit Host header (fetch may not set it). */
function rawGet(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolveGet, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolveGet({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('[LAY-4] the Gateway owns the store while it runs', () => {
  it('closes, and gives up the writer lock, while a client stalls in the middle of a request body', async () => {
    const gw = await startGateway({ storeDir: store, port: 0, env: sb.env, git: { pathEnv: sb.env.PATH } });
    gateways.push(gw);
    const socket = connect(gw.port, '127.0.0.1');
    await new Promise<void>((done) => socket.once('connect', () => done()));
    socket.on('error', () => {});
    // 100 bytes announced, 5 sent, and then nothing.
    socket.write(`POST /api/scan HTTP/1.1\r\nHost: 127.0.0.1:${gw.port}\r\nX-Knowledge-Request: 1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"par`);
    await new Promise((done) => setTimeout(done, 200));
    await gw.close();
    socket.destroy();
    writeFileSync(join(sb.dir, 'n.md'), '---\nkind: page\ntitle: After close\n---\nx\n');
    expect(cli(sb, ['publish', '--store', 'st', 'n.md']).code).toBe(0);
  });

  it('closing answers a request already at work, even past the grace period that cuts stalled bodies', async () => {
    mkdirSync(join(vault, 'private'), { recursive: true });
    writeFileSync(join(vault, 'private', 'a.md'), '# a\n');
    const slow = gitWrapper(sb, 'slow-import-git', ['for a in "$@"; do [ "$a" = fast-import ] && sleep 6; done']);
    const gw = await startGateway({ storeDir: store, port: 0, env: sb.env, git: { pathEnv: sb.env.PATH, gitPath: slow } });
    gateways.push(gw);
    const answer = fetch(`${gw.origin}/api/scan`, { method: 'POST', headers: { 'X-Knowledge-Request': '1' } });
    await new Promise((done) => setTimeout(done, 500));
    await gw.close();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { kind: string }).kind).toBe('scan');
  });

  it('holds the writer lock: a second Gateway and a writing CLI command get E_LOCKED naming it; after close, writes work', async () => {
    const gw = await startGateway({ storeDir: store, port: 0, env: sb.env, git: { pathEnv: sb.env.PATH } });
    gateways.push(gw);
    const res = await fetch(`${gw.origin}/api/records`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");

    // A second Gateway (another process) is refused, told who holds the store.
    const second = cli(sb, ['serve', '--store', 'st', '--port', '0']);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/^E_LOCKED: .*knowledge serve/);
    expect(second.stderr).toContain(`pid ${process.pid}`);
    expect(second.stderr).toContain(`(knowledge serve on 127.0.0.1:${gw.port})`); // the port it got, not "any port"

    writeFileSync(join(sb.dir, 'n.md'), '---\nkind: page\ntitle: While served\n---\nx\n');
    const blocked = cli(sb, ['publish', '--store', 'st', 'n.md']);
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toMatch(/^E_LOCKED: .*knowledge serve/);
    // Reading commands still work beside it.
    expect(cli(sb, ['list', '--store', 'st']).code).toBe(0);

    await gw.close();
    expect(cli(sb, ['publish', '--store', 'st', 'n.md']).code).toBe(0);
  });

  it('closing waits for the requests it is answering: a scan running when it stops is answered whole, and only then is the store released', async () => {
    for (let i = 0; i < 3000; i++) {
      const dir = join(vault, 'private', 'bulk', String(i % 30));
      if (i < 30) mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `b${i}.md`), page(`kind: page\ntitle: Bulk ${i}`));
    }
    const errors: unknown[] = [];
    const gw = await startGateway({ storeDir: store, port: 0, env: sb.env, git: { pathEnv: sb.env.PATH }, onInternalError: (e) => errors.push(e) });
    gateways.push(gw);
    let answeredAt = 0;
    const answer = fetch(`${gw.origin}/api/scan`, { ...WRITE, headers: { ...WRITE.headers, 'content-type': 'application/json' }, body: '{}' })
      .finally(() => (answeredAt = Date.now()));
    await new Promise((r) => setTimeout(r, 150));
    expect(answeredAt, 'the scan was still running when the Gateway began to close').toBe(0);
    await gw.close();
    const res = await answer;
    expect(res.status).toBe(200);
    const receipt = (await res.json()) as { kind: string; added: string[]; git: { state: string } | null };
    expect(receipt.kind).toBe('scan');
    expect(receipt.added).toHaveLength(3000);
    expect(errors).toEqual([]);
    // Released once the scan was recorded: the next writer finds nothing left to scan, and the history is whole.
    const again = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ added: [], modified: [], deleted: [] });
    expect(cli(sb, ['verify', '--store', 'st']).code).toBe(0);
  });

  it('knowledge serve runs as a process, prints its URL, refuses foreign Host headers, and releases the store on SIGTERM', async () => {
    const child = spawn(process.execPath, [cliPath, 'serve', '--store', 'st', '--port', '0'], { cwd: sb.dir, env: sb.env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (c) => { out += c; });
    child.stderr!.on('data', (c) => { err += c; });
    const url = await new Promise<string>((resolveUrl, reject) => {
      const t = setTimeout(() => reject(new Error(`no URL printed: ${out} ${err}`)), 15_000);
      child.stdout!.on('data', () => {
        const m = /open (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
        if (m) { clearTimeout(t); resolveUrl(m[1]!); }
      });
      child.on('exit', (code) => { clearTimeout(t); reject(new Error(`serve exited ${code}: ${err}`)); });
    });
    const ok = await rawGet(`${url}api/records`);
    expect(ok.status).toBe(200);
    const page = await rawGet(url);
    expect(page.body).toContain('Activity &amp; issues');
    const rebound = await rawGet(`${url}api/records`, { Host: `attacker.example:${new URL(url).port}` });
    expect(rebound.status).toBe(403);
    // A request target in absolute form names the Gateway itself, but the Host header is still foreign.
    const absolute = await rawRequest(new URL(url).port, `GET ${url}api/records?limit=1 HTTP/1.1\r\nHost: attacker.example:${new URL(url).port}\r\nConnection: close\r\n\r\n`);
    expect(absolute).toMatch(/^HTTP\/1\.1 403 /);
    expect(await rawRequest(new URL(url).port, `GET ${url}api/records?limit=1 HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
    writeFileSync(join(sb.dir, 'n.md'), '---\nkind: page\ntitle: After\n---\nx\n');
    expect(cli(sb, ['publish', '--store', 'st', 'n.md']).stderr).toMatch(/^E_LOCKED/);
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(cli(sb, ['publish', '--store', 'st', 'n.md']).code).toBe(0);
  });

  it('refuses to bind beyond loopback without a token, and enforces the token when given', async () => {
    const noToken = cli(sb, ['serve', '--store', 'st', '--host', '0.0.0.0', '--port', '0']);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/^E_USAGE: .*--token/);
    expect(cli(sb, ['serve', '--store', 'st', '--token', 'short']).code).toBe(2);
    for (const bad of [' '.repeat(16), 'tok en-0123456789abcdef', 'tok-0123456789abcdéf']) {
      const r = cli(sb, ['serve', '--store', 'st', '--token', bad]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^E_USAGE: the token must be printable ASCII without spaces/);
    }
    expect(cli(sb, ['serve', '--store', 'st', '--port', '70000']).code).toBe(2);
    expect(cli(sb, ['serve', '--store', 'st', '--port', 'http']).code).toBe(2);

    const token = 'tok-0123456789abcdef';
    const gw = await startGateway({ storeDir: store, host: '127.0.0.1', port: 0, token, env: sb.env });
    gateways.push(gw);
    expect(gw.url).toBe(`${gw.origin}/#token=${token}`);
    expect((await fetch(`${gw.origin}/api/records`)).status).toBe(401);
    expect((await fetch(`${gw.origin}/api/records`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    // With a token, the Host check is the token's job: any Host with the token is answered.
    expect((await rawGet(`${gw.origin}/api/records`, { Host: 'kb.example:1', Authorization: `Bearer ${token}` })).status).toBe(200);
  });
});

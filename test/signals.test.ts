import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { storeWithHistory, cli, cliPath, userGit, type Sandbox } from './helpers.js';

/**
 * Signals delivered to a real `knowledge` process (Ctrl-C is SIGINT to the
 * process group; SIGTERM; SIGHUP when the terminal closes), at a known moment:
 * the process pauses at a named point (KNOWLEDGE_PAUSE_AT) and announces it on
 * stderr, the test signals it there, and the process acts on the signal at
 * its next wait.
 */
let sb: Sandbox;
let vault: string;
beforeEach(() => {
  ({ sb, vault } = storeWithHistory());
  writeFileSync(join(sb.dir, 'p.md'), '---\nkind: page\ntitle: Interrupted\n---\nexact bytes\n');
});
afterEach(() => sb.cleanup());

/** Run the CLI, send `signal` (to its process group, as a terminal does) once it pauses at `point`; its end and stderr. */
async function signalledAt(args: string[], point: string, signal: NodeJS.Signals, env: NodeJS.ProcessEnv = {}, again?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; stdout: string }> {
  const child = spawn(process.execPath, [cliPath, ...args], {
    cwd: sb.dir, env: { ...sb.env, ...env, KNOWLEDGE_PAUSE_AT: `${env.KNOWLEDGE_PAUSE_AT ? `${env.KNOWLEDGE_PAUSE_AT},` : ''}${point}:1500` }, stdio: ['ignore', 'pipe', 'pipe'], detached: true,
  });
  let stdout = '';
  let stderr = '';
  let sent = false;
  child.stdout!.on('data', (b) => (stdout += b));
  child.stderr!.on('data', (b) => {
    stderr += b;
    if (!sent && stderr.includes(`paused at ${point} `)) {
      sent = true;
      process.kill(-child.pid!, signal);
      if (again) setTimeout(() => process.kill(-child.pid!, again), 200);
    }
  });
  const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((done) => child.on('close', (c, s) => done([c, s])));
  expect(sent, `never paused at ${point}: ${stderr}`).toBe(true);
  return { code, signal: sig, stderr, stdout };
}

/** Knowledge's index.lock was left, as after a crash; the next write (a scan) takes it over and releases it. */
function lockLeftThenTakenOver(): void {
  const lock = join(vault, '.git', 'index.lock');
  expect(readFileSync(lock, 'utf8')).toMatch(/^knowledge-index-lock /);
  const scan = cli(sb, ['scan', '--store', 'st', '--json']);
  expect(scan.code, scan.stderr).toBe(0);
  expect(existsSync(lock)).toBe(false);
}

/** The status a shell reports: 128 + the signal's number when the process ended by it. */
function shellStatus(r: { code: number | null; signal: NodeJS.Signals | null }): number | null {
  const n: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };
  return r.signal ? 128 + n[r.signal]! : r.code;
}

function commitsFor(id: string): string[] {
  return userGit(sb, vault, ['log', '--format=%H', `--grep=: ${id}$`, 'main']).trim().split('\n').filter(Boolean);
}

describe('an interrupted publish names its request (and publication) so that running it again does not publish twice', () => {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    it(`${signal} after the journal: one line naming both ids, status 128+n; the same request id then gives one publication, one commit`, async () => {
      const r = await signalledAt(['publish', '--store', 'st', 'p.md', '--json'], 'after-journal', signal);
      expect(shellStatus(r), r.stderr).toBe(signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : 129);
      expect(r.stdout).toBe('');
      const lines = r.stderr.split('\n').filter((l) => l && !l.startsWith('knowledge: paused at'));
      expect(lines, r.stderr).toHaveLength(1);
      const m = new RegExp(`^E_INTERRUPTED: ${signal} stopped knowledge publish after publication (pub-\\S+) \\(request ([0-9a-f-]{36})\\) was journaled; ` +
        'knowledge resume \\1 \\(or the same command with --request-id \\2\\) finishes it').exec(lines[0]!);
      expect(m, lines[0]).not.toBeNull();
      const [, publicationId, requestId] = m!;
      const again = cli(sb, ['publish', '--store', 'st', '--request-id', requestId!, 'p.md', '--json']);
      expect(again.code, again.stderr).toBe(0);
      const receipt = JSON.parse(again.stdout);
      expect(receipt).toMatchObject({ publicationId, requestId, git: { state: 'committed' } });
      expect(commitsFor(publicationId!)).toEqual([receipt.git.commit]);
      expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('2');
      const act = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as unknown[];
      expect(act).toHaveLength(2);
    });
  }
});

describe('an interrupted attach names its request id to resume with [ATT-1]', () => {
  it('SIGINT mid-upload: it stops there, one line naming the attachment and request id, status 130; that request id resumes it into one attachment, one commit', async () => {
    writeFileSync(join(sb.dir, 'big.log'), 'x'.repeat(10 * 1024 * 1024));
    const r = await signalledAt(['attach', '--store', 'st', 'big.log', '--json'], 'attach-mid-upload', 'SIGINT', { KNOWLEDGE_ATTACH_COMMIT_BYTES: '1' });
    expect(shellStatus(r), r.stderr).toBe(130);
    const lines = r.stderr.split('\n').filter((l) => l && !l.startsWith('knowledge: paused at'));
    expect(lines, r.stderr).toHaveLength(1);
    const m = /^E_INTERRUPTED: SIGINT stopped knowledge attach of big\.log, attachment (att-\S+) \(request ([0-9a-f-]{36})\); retry with request id \2 to resume/.exec(lines[0]!);
    expect(m, lines[0]).not.toBeNull();
    const [, attachmentId, requestId] = m!;
    const again = cli(sb, ['attach', '--store', 'st', '--request-id', requestId!, 'big.log', '--json']);
    expect(again.code, again.stderr).toBe(0);
    // Stopped where it was, between two commit groups (not once the whole file was sent): the retry sends the rest.
    expect(again.stderr).toBe(`resumed the upload at byte ${8 * 1024 * 1024} of ${10 * 1024 * 1024}\n`);
    const receipt = JSON.parse(again.stdout);
    expect(receipt).toMatchObject({ attachmentId, requestId, git: { state: 'committed' } });
    expect(commitsFor(attachmentId!)).toEqual([receipt.git.commit]);
    expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('2');
  });

  it('SIGTERM while the file is hashed, before the upload starts: it stops there (not once the whole file is read), nothing kept, status 143; the same request id then attaches it once', async () => {
    writeFileSync(join(sb.dir, 'big.log'), 'y'.repeat(12 * 1024 * 1024));
    const r = await signalledAt(['attach', '--store', 'st', 'big.log', '--json'], 'attach-mid-hash', 'SIGTERM', { KNOWLEDGE_ATTACH_COMMIT_BYTES: '1' });
    expect(shellStatus(r), r.stderr).toBe(143);
    // Paused once: the hash did not go on to its next 4 MiB.
    expect(r.stderr.match(/paused at attach-mid-hash/g), r.stderr).toHaveLength(1);
    const lines = r.stderr.split('\n').filter((l) => l && !l.startsWith('knowledge: paused at'));
    expect(lines, r.stderr).toHaveLength(1);
    const m = /^E_INTERRUPTED: SIGTERM stopped knowledge attach of big\.log, request ([0-9a-f-]{36}); retry with request id \1 to resume/.exec(lines[0]!);
    expect(m, lines[0]).not.toBeNull();
    // No upload was started: the store's activity is its one publication.
    expect(JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout)).toHaveLength(1);
    const again = cli(sb, ['attach', '--store', 'st', '--request-id', m![1]!, 'big.log', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toBe('');
    const receipt = JSON.parse(again.stdout);
    expect(receipt).toMatchObject({ requestId: m![1], size: 12 * 1024 * 1024, git: { state: 'committed' } });
    expect(commitsFor(receipt.attachmentId)).toEqual([receipt.git.commit]);
  });
});


describe('[GIT-10] a signal while Knowledge holds index.lock waits for the index update and the lock\'s release', () => {
  const lock = () => join(vault, '.git', 'index.lock');

  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    it(`${signal} after the branch moved, before the index followed: the index is updated and the lock released, then status 128+n`, async () => {
      const r = await signalledAt(['publish', '--store', 'st', 'p.md', '--json'], 'after-update-ref', signal);
      expect(shellStatus(r), r.stderr).toBe(signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : 129);
      // Ended by the signal itself (raised again), not an exit with its status: a calling script stops as on Ctrl-C.
      expect(r.signal, r.stderr).toBe(signal);
      expect(r.stderr).toContain(`knowledge: ${signal} received; finishing the index update first`);
      expect(r.stderr).toMatch(new RegExp(`^E_INTERRUPTED: ${signal} stopped knowledge publish after publication pub-`, 'm'));
      expect(existsSync(lock())).toBe(false);
      // The index is the branch's: nothing staged, and the user's own commit keeps the published file.
      expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
      writeFileSync(join(vault, 'mine.txt'), 'the user\'s\n');
      userGit(sb, vault, ['add', 'mine.txt']);
      userGit(sb, vault, ['commit', '-q', '-m', 'user commit']);
      expect(userGit(sb, vault, ['ls-tree', '-r', '--name-only', 'main', '--', 'private']).trim().split('\n')).toHaveLength(2);
    });
  }

  it('a second signal stops at once: the lock is left, as after a crash, and the next write takes it over', async () => {
    const r = await signalledAt(['publish', '--store', 'st', 'p.md', '--json'], 'after-update-ref', 'SIGINT', {}, 'SIGINT');
    expect(shellStatus(r), r.stderr).toBe(130);
    expect(r.stderr).toContain('knowledge: SIGINT received; finishing the index update first');
    lockLeftThenTakenOver();
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
  });
});

describe('[SCAN-4] an interrupted scan on a terminal', () => {
  it('clears its progress line before the E_INTERRUPTED line, as a finished scan clears it', async () => {
    // stderr is a pipe here; a module loaded first makes the CLI take it for a terminal, so it draws its progress line.
    const tty = join(sb.dir, 'stderr-is-a-tty.mjs');
    writeFileSync(tty, "Object.defineProperty(process.stderr, 'isTTY', { value: true });\n");
    // A file the scan records and commits: it pauses after queueing that commit (well past the bar's first 500 ms), then draws its commit phase.
    writeFileSync(join(vault, 'private', 'edited.md'), '---\nkind: page\ntitle: Edited by hand\n---\nx\n');
    const r = await signalledAt(['scan', '--store', 'st'], 'scan-after-enqueue', 'SIGINT', { NODE_OPTIONS: `--import=${pathToFileURL(tty).href}` });
    expect(shellStatus(r), r.stderr).toBe(130);
    expect(r.stderr).toContain('\r\x1b[2Kcommitting ');
    // The last progress line is cleared (carriage return, erase the line), and the interrupted line starts on the empty line.
    expect(r.stderr.endsWith('\r\x1b[2KE_INTERRUPTED: SIGINT stopped knowledge scan; run knowledge scan again\n'), JSON.stringify(r.stderr)).toBe(true);
  });

  it('a signal held while the index follows the branch is said on a line of its own, the progress line cleared first', async () => {
    const tty = join(sb.dir, 'stderr-is-a-tty.mjs');
    writeFileSync(tty, "Object.defineProperty(process.stderr, 'isTTY', { value: true });\n");
    writeFileSync(join(vault, 'private', 'edited.md'), '---\nkind: page\ntitle: Edited by hand\n---\nx\n');
    // Paused first where the bar has drawn its commit phase, then signalled once the branch moved.
    const r = await signalledAt(['scan', '--store', 'st'], 'after-update-ref', 'SIGINT', { NODE_OPTIONS: `--import=${pathToFileURL(tty).href}`, KNOWLEDGE_PAUSE_AT: 'scan-after-enqueue:700' });
    expect(shellStatus(r), r.stderr).toBe(130);
    expect(r.stderr).toContain('\r\x1b[2Kcommitting ');
    const held = r.stderr.indexOf('knowledge: SIGINT received; finishing the index update first');
    expect(held, JSON.stringify(r.stderr)).toBeGreaterThan(0);
    // (Here the pause's own line ends the progress line; without the test's pauses the note would follow it directly.)
    expect(r.stderr.slice(0, held).endsWith('\r\x1b[2K'), JSON.stringify(r.stderr)).toBe(true);
  });
});

/**
 * The long-running surfaces: `knowledge serve` (the Gateway, a scan over HTTP)
 * and `knowledge mcp` (a publish tool call over stdio), signalled while their
 * checkpoint holds index.lock (paused after the branch moved, before the index
 * followed), and signalled idle.
 */
type Server = 'serve' | 'mcp';
const servers: ChildProcess[] = [];
afterEach(() => {
  for (const c of servers.splice(0)) if (c.exitCode === null && c.signalCode === null) process.kill(-c.pid!, 'SIGKILL');
});
const PUBLISH_REQUEST = '0b0e5c1a-6f0d-4c3e-9a57-3d2f4b6c8e10';

/**
 * Start `knowledge <server>` (its own process group, as a terminal starts it); once it serves, make a write that
 * reaches a checkpoint (unless `idle`); send `signal` (to the group) when it pauses after the branch moved, with
 * index.lock held (idle: a moment after it serves), and `again` 200 ms later. Its end, its stderr, and its answer to
 * the write (null if none).
 */
async function serverSignalled(server: Server, signal: NodeJS.Signals, opts: { idle?: boolean; again?: NodeJS.Signals; point?: string } = {}): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; answered: string | null }> {
  const point = opts.point ?? 'after-update-ref';
  const args = server === 'serve' ? ['serve', '--store', 'st', '--port', '0'] : ['mcp', '--store', 'st', '--agent', 'bot'];
  const child = spawn(process.execPath, [cliPath, ...args], {
    cwd: sb.dir, env: { ...sb.env, ...(opts.idle ? {} : { KNOWLEDGE_PAUSE_AT: `${point}:1500` }) }, stdio: ['pipe', 'pipe', 'pipe'], detached: true,
  });
  let stdout = '';
  let stderr = '';
  let sent = false;
  let answered: string | null = null;
  const fire = () => {
    if (sent) return;
    sent = true;
    process.kill(-child.pid!, signal);
    if (opts.again) setTimeout(() => process.kill(-child.pid!, opts.again!), 200);
  };
  servers.push(child);
  child.stdout!.on('data', (b) => (stdout += b)); // first: the listeners below read what it appends
  const served = new Promise<void>((ready) => {
    if (server === 'serve') {
      child.stdout!.on('data', () => { if (/open http:\/\/127\.0\.0\.1:\d+\//.test(stdout)) ready(); });
    } else {
      child.stdout!.on('data', () => { if (/"id":1[,}]/.test(stdout)) ready(); });
      const send = (m: unknown) => child.stdin!.write(JSON.stringify(m) + '\n');
      send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } } });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    }
  });
  child.stderr!.on('data', (b) => {
    stderr += b;
    if (!opts.idle && stderr.includes(`paused at ${point} `)) fire();
  });
  const ended = new Promise<[number | null, NodeJS.Signals | null]>((done) => child.on('close', (c, s) => done([c, s])));
  void served.then(async () => {
    // Idle: a moment after it says it serves (no write is made).
    if (opts.idle) return void setTimeout(fire, 300);
    if (server === 'serve') {
      mkdirSync(join(vault, 'private'), { recursive: true });
      writeFileSync(join(vault, 'private', 'edited.md'), '---\nkind: page\ntitle: Edited\n---\nedited outside\n');
      const origin = /open (http:\/\/127\.0\.0\.1:\d+)\//.exec(stdout)![1]!;
      await fetch(`${origin}/api/scan`, { method: 'POST', headers: { 'X-Knowledge-Request': '1', 'content-type': 'application/json' }, body: '{}' })
        .then(async (res) => (answered = `${res.status} ${await res.text()}`), () => undefined);
    } else {
      child.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'knowledge_publish_batch', arguments: {
        request_id: PUBLISH_REQUEST, audience: 'owner-private', records: [{ kind: 'page', title: 'Via MCP', body: 'exact bytes\n' }],
      } } }) + '\n');
    }
  });
  const [code, sig] = await ended;
  if (server === 'mcp') answered = stdout.split('\n').find((l) => /"id":2[,}]/.test(l)) ?? null;
  expect(sent, `never signalled: ${stderr}`).toBe(true);
  return { code, signal: sig, stderr, answered };
}

/** What the write made: the scan's or the publication's path in the vault. */
const written = (server: Server) => (server === 'serve' ? 'private/edited.md' : 'private/pages/');

describe('[GIT-10] the Gateway and the MCP server: a signal while a checkpoint holds index.lock waits for the index update and the lock\'s release', () => {
  const lock = () => join(vault, '.git', 'index.lock');

  for (const server of ['serve', 'mcp'] as const) {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      // The Gateway closes on each, then exits 0 (SIGINT, SIGTERM) or ends by SIGHUP; the MCP server ends by each.
      const status = server === 'serve' && signal !== 'SIGHUP' ? 0 : signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : 129;
      it(`knowledge ${server}, ${signal}: the index follows the branch and the lock is released, then status ${status}; the write is recorded committed`, async () => {
        const r = await serverSignalled(server, signal);
        expect(shellStatus(r), r.stderr).toBe(status);
        expect(existsSync(lock()), 'index.lock left behind').toBe(false);
        // The index is the branch's: nothing staged against HEAD (the checkpoint's file is not "deleted" there).
        expect(userGit(sb, vault, ['diff', '--cached', '--name-status', 'HEAD'])).toBe('');
        expect(userGit(sb, vault, ['ls-tree', '-r', '--name-only', 'HEAD', '--', 'private'])).toContain(written(server));
        const act = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as Array<{ git: { state: string } | null }>;
        expect(act.map((e) => e.git?.state)).toEqual(['committed', 'committed']);
        const verify = cli(sb, ['verify', '--store', 'st']);
        expect(verify.code, verify.stderr).toBe(0);
        expect(r.stderr).toContain(`knowledge: ${signal} received; finishing the index update first`);
        if (server === 'serve') expect(r.answered, 'the scan taken was answered before closing').toMatch(/^200 /);
        if (server === 'mcp') {
          // Its answer was not written (the server ended by the signal), but the publication is recorded under its request id, committed once.
          expect(r.answered).toBeNull();
          const receipt = JSON.parse(cli(sb, ['receipt', '--store', 'st', PUBLISH_REQUEST, '--json']).stdout);
          expect(receipt).toMatchObject({ requestId: PUBLISH_REQUEST, git: { state: 'committed' } });
          expect(commitsFor(receipt.publicationId)).toEqual([receipt.git.commit]);
        }
      });
    }

    it(`knowledge ${server}: a second signal stops it at once, leaving the lock as after a crash; the next write takes it over`, async () => {
      const r = await serverSignalled(server, 'SIGINT', { again: 'SIGINT' });
      expect(shellStatus(r), r.stderr).toBe(130);
      expect(r.stderr).toContain('knowledge: SIGINT received; finishing the index update first');
      lockLeftThenTakenOver();
      expect(userGit(sb, vault, ['diff', '--cached', '--name-status', 'HEAD'])).toBe('');
      expect(cli(sb, ['verify', '--store', 'st']).code).toBe(0);
    });
  }
});

describe('the Gateway signalled mid-request, before its checkpoint holds any lock', () => {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const status = signal === 'SIGHUP' ? 129 : 0;
    it(`knowledge serve, ${signal}: the scan it has taken is answered and committed, then status ${status}, the store free`, async () => {
      // Paused while the scan stages what it read (synchronously: the signal is acted on once the pause ends).
      const r = await serverSignalled('serve', signal, { point: 'scan-mid-stage' });
      expect(shellStatus(r), r.stderr).toBe(status);
      expect(r.answered, 'the scan taken was answered before the Gateway ended').toMatch(/^200 /);
      expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(false);
      expect(userGit(sb, vault, ['ls-tree', '-r', '--name-only', 'HEAD', '--', 'private'])).toContain(written('serve'));
      expect(cli(sb, ['verify', '--store', 'st']).code).toBe(0);
      expect(cli(sb, ['publish', '--store', 'st', 'p.md']).code).toBe(0);
    });
  }
});

describe('the Gateway and the MCP server signalled idle end as they always have, leaving the store free', () => {
  for (const server of ['serve', 'mcp'] as const) {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      const status = server === 'serve' && signal !== 'SIGHUP' ? 0 : signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : 129;
      it(`knowledge ${server}, ${signal}: status ${status}, nothing on stderr`, async () => {
        const r = await serverSignalled(server, signal, { idle: true });
        expect(shellStatus(r), r.stderr).toBe(status);
        expect(r.stderr).toBe('');
        expect(cli(sb, ['publish', '--store', 'st', 'p.md']).code).toBe(0);
      });
    }
  }
});

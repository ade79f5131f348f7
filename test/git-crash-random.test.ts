import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { storeSandbox, cli, cliPath, userGit, userGitRaw, type Sandbox } from './helpers.js';

/**
 * [PUB-2][GIT-4][GIT-6] Real `knowledge publish` / `resume` processes are
 * SIGKILLed after a random delay, over and over, so the kill lands anywhere:
 * in the journal, the install, between any two git steps (git children
 * that were already started run to completion, as after a real crash of the
 * parent), between git and SQLite. Afterwards every request is retried once:
 * each publication is exactly one commit, with exactly its bytes, in order;
 * `git fsck --strict` is clean and `knowledge verify` agrees.
 */
let sb: Sandbox;
let vault: string;
beforeEach(() => ({ sb, vault } = storeSandbox()));
afterEach(() => sb.cleanup());

/** Small seeded PRNG (mulberry32) so a failing run can be replayed with KNOWLEDGE_TEST_SEED. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function runKilled(args: string[], delayMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env, stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), delayMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, ms: performance.now() - t0 });
    });
  });
}

const ITERATIONS = 20;

describe('[GIT-6] SIGKILL at random moments, many times', () => {
  it(`${ITERATIONS} killed publications and resumes: every publication ends as exactly one commit of its bytes`, async () => {
    const seed = Number(process.env.KNOWLEDGE_TEST_SEED ?? Date.now() % 1_000_000);
    const rand = prng(seed);
    console.log(`random crash test seed ${seed} (replay with KNOWLEDGE_TEST_SEED=${seed})`);
    writeFileSync(join(sb.dir, 'first.md'), '---\nkind: page\ntitle: First\n---\nfirst\n');
    // How long an uninterrupted publication takes here: kills are spread over that span.
    const t0 = performance.now();
    expect(cli(sb, ['publish', '--store', 'st', 'first.md']).code).toBe(0);
    const span = Math.max(150, (performance.now() - t0) * 1.2);

    const requests: Array<{ id: string; args: string[] }> = [];
    const kills: string[] = [];
    for (let i = 1; i <= ITERATIONS; i++) {
      writeFileSync(join(sb.dir, `p${i}.md`), `---\nkind: page\ntitle: Crash ${i}\n---\nbody ${i} ${'x'.repeat(i * 37)}\n`);
      const args = ['publish', '--store', 'st', '--json', '--request-id', randomUUID(), `p${i}.md`];
      if (i % 4 === 0) {
        writeFileSync(join(sb.dir, `e${i}.txt`), `evidence ${i}\n`);
        args.push('--evidence', `e${i}.txt`);
      }
      requests.push({ id: args[5]!, args });
      const delay = Math.floor(rand() * span);
      const r = await runKilled(args, delay);
      kills.push(`${delay}ms:${r.signal ?? r.code}`);
      // Sometimes a resume of an earlier request is killed too.
      if (rand() < 0.3) {
        const earlier = requests[Math.floor(rand() * requests.length)]!;
        await runKilled(['resume', '--store', 'st', '--json', earlier.id], Math.floor(rand() * span));
      }
      // Sometimes the request is retried at once (and may be killed again).
      if (rand() < 0.5) await runKilled(args, Math.floor(rand() * span * 2));
    }
    console.log(`kills: ${kills.join(' ')}`);
    // Let git children orphaned by the last kills finish (they hold locks while they run).
    await new Promise((r) => setTimeout(r, 1000));

    // Restart: retry every request once, as a caller would.
    const receipts = requests.map(({ args }) => {
      const r = cli(sb, args);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { publicationId: string; records: Array<{ path: string; sha256: string }>; evidence: Array<{ path: string; sha256: string }>; git: { state: string; commit: string } };
    });
    for (const r of receipts) expect(r.git.state, JSON.stringify(r.git)).toBe('committed');

    const log = userGit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main'])
      .trim().split('\n').map((l) => l.split(' '));
    const byPub = new Map<string, string[]>();
    for (const [commit, pub] of log) byPub.set(pub!, [...(byPub.get(pub!) ?? []), commit!]);
    // Exactly one commit per publication (the first one included), no other commits.
    expect(log).toHaveLength(ITERATIONS + 1);
    for (const r of receipts) {
      expect(byPub.get(r.publicationId)).toEqual([r.git.commit]);
      for (const f of [...r.records, ...r.evidence]) {
        const blob = userGitRaw(sb, vault, ['cat-file', 'blob', `${r.git.commit}:${f.path}`]).stdout;
        expect(createHash('sha256').update(blob).digest('hex'), f.path).toBe(f.sha256);
      }
    }
    const fsck = userGitRaw(sb, vault, ['fsck', '--strict', '--no-dangling']);
    expect(fsck.status, fsck.stderr + fsck.stdout).toBe(0);
    expect(userGit(sb, vault, ['for-each-ref', '--format=%(refname)'])).toBe('refs/heads/main\n');
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
    const v = cli(sb, ['verify', '--store', 'st', '--json']);
    expect(v.code, v.stdout).toBe(0);
  }, 300_000);
});

describe('[GIT-6] a resume draining a chain, killed between its git steps', () => {
  for (const point of ['after-commit-object', 'after-update-ref', 'before-record-commit', 'after-record-commit'] as const) {
    it(`killed ${point}: the next resume commits each queued batch exactly once`, () => {
      writeFileSync(join(sb.dir, 'first.md'), '---\nkind: page\ntitle: First\n---\nfirst\n');
      expect(cli(sb, ['publish', '--store', 'st', 'first.md']).code).toBe(0);
      const queued = [1, 2, 3].map((i) => {
        writeFileSync(join(sb.dir, `q${i}.md`), `---\nkind: page\ntitle: Queued ${i}\n---\nqueued ${i}\n`);
        const r = cli(sb, ['publish', '--store', 'st', '--json', `q${i}.md`], { env: { PATH: '/nonexistent-bin' } });
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout) as { publicationId: string; records: Array<{ path: string; sha256: string }> };
      });
      const killed = cli(sb, ['resume', '--store', 'st', queued[2]!.publicationId], { env: { KNOWLEDGE_CRASH_AT: point } });
      expect(killed.code, killed.stderr).toBeNull();
      const r = cli(sb, ['resume', '--store', 'st', '--json', queued[2]!.publicationId]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).git.state).toBe('committed');
      const log = userGit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main'])
        .trim().split('\n').map((l) => l.split(' '));
      expect(log.slice(1).map((l) => l[1])).toEqual(queued.map((q) => q.publicationId));
      for (const [i, q] of queued.entries()) {
        const blob = userGitRaw(sb, vault, ['cat-file', 'blob', `${log[i + 1]![0]}:${q.records[0]!.path}`]).stdout;
        expect(createHash('sha256').update(blob).digest('hex')).toBe(q.records[0]!.sha256);
      }
      expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
      expect(cli(sb, ['verify', '--store', 'st']).code).toBe(0);
    });
  }
});


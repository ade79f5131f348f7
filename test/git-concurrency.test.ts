import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { storeSandbox, cli, cliPath, userGit, userGitRaw, type Sandbox } from './helpers.js';

/**
 * [GIT-5][GIT-6][GIT-10] The user commits on the branch in a tight loop while
 * publications run as separate processes. Every publication ends as exactly
 * one commit on that branch (a moved branch is retried, then resume finishes
 * whatever is still pending), in publication order, each holding exactly its
 * bytes; the user's commits are all kept; nothing lands on another ref.
 */
let sb: Sandbox;
let vault: string;
beforeEach(() => ({ sb, vault } = storeSandbox()));
afterEach(() => sb.cleanup());

function cliAsync(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('[GIT-5] the user\'s own commits racing with publications', () => {
  it('no lost or duplicated checkpoint, nothing on the wrong branch, every user commit kept', async () => {
    writeFileSync(join(sb.dir, 'first.md'), '---\nkind: page\ntitle: First\n---\nfirst\n');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'first.md']).stdout).git.state).toBe('committed');
    writeFileSync(join(vault, 'user.txt'), 'user 0\n');
    userGit(sb, vault, ['add', 'user.txt']);
    userGit(sb, vault, ['commit', '-q', '-m', 'user 0']);

    // The user's loop: edit, stage, commit; failures (a lock held by
    // Knowledge, a branch moved under it) are what a user would see too.
    const loop = join(sb.dir, 'user-loop.sh');
    writeFileSync(loop, [
      '#!/bin/sh',
      'i=1',
      `while [ ! -f "${sb.dir}/stop" ]; do`,
      '  echo "user $i" >> user.txt',
      '  git add user.txt 2>/dev/null && git commit -q -m "user $i" 2>/dev/null && echo "user $i" >> "' + join(sb.dir, 'user-ok') + '"',
      '  i=$((i+1))',
      '  sleep 0.0$(( (i % 9) + 1 ))', // 10-90 ms between commits: fast for a person, a real race for Knowledge
      'done',
      '',
    ].join('\n'));
    const user = spawn('sh', [loop], { cwd: vault, env: sb.env, stdio: 'ignore' });
    const userDone = new Promise((r) => user.on('close', r));

    const receipts: Array<{ publicationId: string; records: Array<{ path: string; sha256: string }>; git: { state: string; code?: string } }> = [];
    for (let i = 1; i <= 12; i++) {
      writeFileSync(join(sb.dir, `p${i}.md`), `---\nkind: page\ntitle: Racing ${i}\n---\nbody ${i}\n`);
      const r = await cliAsync(['publish', '--store', 'st', '--json', `p${i}.md`]);
      expect(r.code, r.stderr).toBe(0);
      receipts.push(JSON.parse(r.stdout));
    }
    writeFileSync(join(sb.dir, 'stop'), '');
    await userDone;
    const states = receipts.map((r) => r.git.state + (r.git.code ? `:${r.git.code}` : ''));
    // Whatever is still pending (the loop held index.lock, or moved the branch twice) is finished now.
    const last = receipts[receipts.length - 1]!;
    const final = JSON.parse(cli(sb, ['resume', '--store', 'st', '--json', last.publicationId]).stdout);
    expect(final.git.state, JSON.stringify({ states, final: final.git })).toBe('committed');

    const log = userGit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)%x01%s', 'main']).trim().split('\n');
    const ours = log.map((l) => l.split('\x01')[0]!.split(' ')).filter((p) => p[1]);
    // Exactly one commit per publication, in publication order.
    expect(ours.map((p) => p[1])).toEqual([expect.any(String), ...receipts.map((r) => r.publicationId)]);
    for (const r of receipts) {
      const rec = JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', r.publicationId]).stdout);
      expect(rec.git.state).toBe('committed');
      const commit = ours.find((p) => p[1] === r.publicationId)![0]!;
      expect(rec.git.commit).toBe(commit);
      // Exactly its bytes.
      const bytes = userGitRaw(sb, vault, ['cat-file', 'blob', `${commit}:${r.records[0]!.path}`]);
      expect(createHash('sha256').update(bytes.stdout).digest('hex')).toBe(r.records[0]!.sha256);
    }
    // Every commit the user's loop reported is on the branch.
    const userOk = existsSync(join(sb.dir, 'user-ok')) ? readFileSync(join(sb.dir, 'user-ok'), 'utf8').trim().split('\n') : [];
    const subjects = new Set(log.map((l) => l.split('\x01')[1]));
    for (const s of userOk) expect(subjects.has(s), s).toBe(true);
    // The branch tip still holds every published file's bytes (no user commit reverted one), and the index agrees.
    for (const r of receipts) {
      const tipBytes = userGitRaw(sb, vault, ['cat-file', 'blob', `main:${r.records[0]!.path}`]).stdout;
      expect(createHash('sha256').update(tipBytes).digest('hex'), r.records[0]!.path).toBe(r.records[0]!.sha256);
    }
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
    // Nothing on another ref; the scratch ref is gone.
    expect(userGit(sb, vault, ['for-each-ref', '--format=%(refname)'])).toBe('refs/heads/main\n');
    expect(userGitRaw(sb, vault, ['fsck', '--strict', '--no-dangling']).status).toBe(0);
    const v = cli(sb, ['verify', '--store', 'st', '--json']);
    expect(v.code, v.stdout).toBe(0);
    // Log what the race produced: how many user commits and how each publication first came back.
    console.log(`concurrency: ${userOk.length} user commits; first receipts: ${states.join(', ')}`);
  }, 180_000);
});

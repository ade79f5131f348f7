import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { makeSandbox, cli, gitWrapper, userGit, type Sandbox } from './helpers.js';

/**
 * `knowledge verify` against real repositories: a healthy store passes (exit
 * 0); each kind of disagreement between the store and its repository is
 * reported with its stable code (exit 1). Nothing is repaired.
 */
let sb: Sandbox;
let vault: string;
let pubs: Array<{ publicationId: string; git: { commit: string }; records: Array<{ path: string }> }>;
beforeEach(() => {
  sb = makeSandbox();
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  vault = join(sb.dir, 'st', 'vault');
  pubs = [];
  for (let i = 1; i <= 3; i++) {
    writeFileSync(join(sb.dir, `r${i}.md`), `---\nkind: page\ntitle: Page ${i}\n---\nbody ${i}\n`);
    const r = cli(sb, ['publish', '--store', 'st', '--json', `r${i}.md`]);
    expect(r.code, r.stderr).toBe(0);
    pubs.push(JSON.parse(r.stdout));
  }
});
afterEach(() => sb.cleanup());

function verify(env: NodeJS.ProcessEnv = {}) {
  const r = cli(sb, ['verify', '--store', 'st', '--json'], { env });
  return { code: r.code, report: JSON.parse(r.stdout) as { ok: boolean; problems: Array<{ code: string; batchId?: number; message: string }>; checked: { files: number } }, stderr: r.stderr };
}
function sql(statement: string, ...params: unknown[]): void {
  const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
  try {
    db.prepare(statement).run(...params);
  } finally {
    db.close();
  }
}
const vaultId = () => JSON.parse(readFileSync(join(vault, 'vault.json'), 'utf8')).vaultId as string;
const codes = (v: ReturnType<typeof verify>) => v.report.problems.map((p) => p.code);

describe('knowledge verify', () => {
  it('a healthy store passes: every commit on the branch with exactly its bytes', () => {
    const v = verify();
    expect(v.code, v.stderr).toBe(0);
    expect(v.report).toMatchObject({ ok: true, problems: [], batches: { total: 3, committed: 3, queued: 0 }, branch: 'refs/heads/main' });
    expect(v.report.checked.files).toBe(3);
    const human = cli(sb, ['verify', '--store', 'st']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^ok: store /);
  });

  it('commit-missing: a recorded commit that does not exist', () => {
    sql('UPDATE batches SET commit_id = ? WHERE batch_id = 2', 'f'.repeat(40));
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v)).toContain('commit-missing');
    // Exit 1 with one line that starts with a stable code (Appendix A): the store and its repository disagree.
    expect(v.stderr).toMatch(/^E_CONFLICT: verify found \d+ problems? in \S+: (\S+, )*commit-missing\b.*\n$/);
  });

  it('not-on-branch: the branch was reset below a recorded commit', () => {
    userGit(sb, vault, ['reset', '-q', '--soft', 'HEAD~1']);
    const v = verify();
    expect(v.code).toBe(1);
    expect(v.report.problems).toEqual([expect.objectContaining({ code: 'not-on-branch', batchId: 3 })]);
  });

  it('bytes-mismatch: the commit does not hold the bytes the batch queued', () => {
    sql('UPDATE batch_files SET blob_oid = ? WHERE batch_id = 1', 'e'.repeat(40));
    const v = verify();
    expect(v.code).toBe(1);
    expect(v.report.problems).toEqual([expect.objectContaining({ code: 'bytes-mismatch', batchId: 1 })]);
  });

  it('duplicate-commit and unknown-batch: trailers copied onto other commits', () => {
    userGit(sb, vault, ['commit', '-q', '--allow-empty', '-m', `copy\n\nKnowledge-Batch: ${vaultId()}/2\nKnowledge-Publication: ${pubs[1]!.publicationId}\n`]);
    userGit(sb, vault, ['commit', '-q', '--allow-empty', '-m', `stray\n\nKnowledge-Batch: ${vaultId()}/99\n`]);
    // A trailer of another store's vault is none of our business.
    userGit(sb, vault, ['commit', '-q', '--allow-empty', '-m', 'other\n\nKnowledge-Batch: another-vault/2\n']);
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v).sort()).toEqual(['duplicate-commit', 'unknown-batch']);
  });

  it('unrecorded-commit: a checkpoint that landed but was never recorded; resume records it and verify passes', () => {
    writeFileSync(join(sb.dir, 'r4.md'), '---\nkind: page\ntitle: Page 4\n---\nbody 4\n');
    const killed = cli(sb, ['publish', '--store', 'st', '--json', 'r4.md'], { env: { KNOWLEDGE_CRASH_AT: 'before-record-commit' } });
    expect(killed.code).toBeNull();
    const v = verify();
    expect(v.code).toBe(1);
    // Killed with index.lock held after the branch moved: the lock it left is named too (index-lock-left).
    expect(v.report.problems).toEqual([expect.objectContaining({ code: 'unrecorded-commit', batchId: 4 }), expect.objectContaining({ code: 'index-lock-left' })]);
    const act = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as Array<{ id: string }>;
    const r = cli(sb, ['resume', '--store', 'st', act[0]!.id, '--json']);
    expect(JSON.parse(r.stdout).git.state).toBe('committed');
    expect(verify().code).toBe(0);
  });

  it('a restored older state.sqlite numbers batches again: the branch\'s commit of that number is another batch\'s, never advised to resume nor counted twice', () => {
    const state = join(sb.dir, 'st', 'state.sqlite');
    const backup = join(sb.dir, 'state.bak');
    cpSync(state, backup);
    writeFileSync(join(sb.dir, 'beta.md'), '---\nkind: page\ntitle: Beta\n---\nbeta\n');
    const beta = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'beta.md']).stdout) as { publicationId: string; git: { commit: string } };
    for (const suffix of ['', '-wal', '-shm']) rmSync(state + suffix, { force: true });
    cpSync(backup, state);
    // A git hiccup: Gamma's checkpoint (batch 4 again) waits, while Beta's commit (batch 4 too) is on the branch.
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    writeFileSync(join(sb.dir, 'gamma.md'), '---\nkind: page\ntitle: Gamma\n---\ngamma\n');
    const gamma = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'gamma.md']).stdout) as { publicationId: string; git: { state: string } };
    expect(gamma.git.state).toBe('pending');
    const before = verify();
    expect(before.code).toBe(1);
    expect(before.report.problems).toEqual([expect.objectContaining({ code: 'unknown-batch', batchId: 4, commit: beta.git.commit }), expect.objectContaining({ code: 'state-behind-history', batchId: 4 })]);
    const message = before.report.problems[0]!.message;
    expect(message).toContain(beta.publicationId);
    expect(message).toContain(`this store's batch 4 is publication ${gamma.publicationId}`);
    expect(message).not.toMatch(/resume records it/);
    rmSync(join(vault, '.git', 'index.lock'));
    const resumed = JSON.parse(cli(sb, ['resume', '--store', 'st', gamma.publicationId, '--json']).stdout) as { git: { state: string; commit: string } };
    expect(resumed.git.state).toBe('committed');
    expect(resumed.git.commit).not.toBe(beta.git.commit);
    const after = verify();
    expect(after.report.problems).toEqual([expect.objectContaining({ code: 'unknown-batch', batchId: 4, commit: beta.git.commit }), expect.objectContaining({ code: 'state-behind-history', batchId: 4 })]);
  });

  it('two copies of one vault each committed batch 4 and one\'s history was merged into the other\'s: the other copy\'s commit is not this store\'s', () => {
    cpSync(join(sb.dir, 'st'), join(sb.dir, 'copy'), { recursive: true });
    expect(existsSync(join(sb.dir, 'copy', 'vault', '.git'))).toBe(true);
    writeFileSync(join(sb.dir, 'mine.md'), '---\nkind: page\ntitle: Mine\n---\nmine\n');
    const mine = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'mine.md']).stdout) as { git: { commit: string } };
    writeFileSync(join(sb.dir, 'theirs.md'), '---\nkind: page\ntitle: Theirs\n---\ntheirs\n');
    const theirs = JSON.parse(cli(sb, ['publish', '--store', 'copy', '--json', 'theirs.md']).stdout) as { publicationId: string; git: { commit: string } };
    expect(theirs.git.commit).not.toBe(mine.git.commit);
    userGit(sb, vault, ['pull', '-q', '--no-rebase', '--no-edit', join(sb.dir, 'copy', 'vault'), 'main']);
    const v = verify();
    expect(v.code).toBe(1);
    expect(v.report.problems).toEqual([expect.objectContaining({ code: 'unknown-batch', batchId: 4, commit: theirs.git.commit }), expect.objectContaining({ code: 'state-behind-history', batchId: 4 })]);
    expect(v.report.problems[0]!.message).toContain(theirs.publicationId);
    // The next checkpoint goes on as batch 5, after the merge; the other copy's batch 4 stays what it is.
    writeFileSync(join(sb.dir, 'next.md'), '---\nkind: page\ntitle: Next\n---\nnext\n');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'next.md']).stdout).git.state).toBe('committed');
    expect(codes(verify())).toEqual(['unknown-batch', 'state-behind-history']);
  });

  it('state-behind-history: an older state.sqlite restored, the branch holds checkpoints it never queued; verify says so plainly, before and after a retry publishes again', () => {
    const state = join(sb.dir, 'st', 'state.sqlite');
    const backup = join(sb.dir, 'state.bak');
    cpSync(state, backup);
    writeFileSync(join(sb.dir, 'beta.md'), '---\nkind: page\ntitle: Beta\n---\nbeta\n');
    const beta = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'beta.md']).stdout) as { requestId: string; git: { commit: string } };
    writeFileSync(join(sb.dir, 'delta.md'), '---\nkind: page\ntitle: Delta\n---\ndelta\n');
    expect(cli(sb, ['publish', '--store', 'st', 'delta.md']).code).toBe(0);
    for (const suffix of ['', '-wal', '-shm']) rmSync(state + suffix, { force: true });
    cpSync(backup, state);
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v)).toEqual(['unknown-batch', 'unknown-batch', 'state-behind-history']);
    const behind = v.report.problems.find((p) => p.code === 'state-behind-history')!;
    expect(behind.batchId).toBe(5);
    expect(behind.message).toMatch(/^the branch holds 2 checkpoints of this vault that state\.sqlite never queued \(batches 4-5\): was an older state\.sqlite restored, or another copy of this vault's history merged in\? /);
    expect(cli(sb, ['verify', '--store', 'st']).stderr).toMatch(/^E_CONFLICT: verify found 3 problems in \S+: unknown-batch, state-behind-history\n$/);
    // The restored state does not know Beta's request: its retry publishes again (the documented limit), and verify still says why.
    const again = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--request-id', beta.requestId, 'beta.md']).stdout) as { git: { state: string; commit: string } };
    expect(again.git.state).toBe('committed');
    expect(again.git.commit).not.toBe(beta.git.commit);
    expect(codes(verify())).toEqual(['unknown-batch', 'unknown-batch', 'state-behind-history']);
  });

  it('history-order: commits recorded against the wrong batches', () => {
    sql('UPDATE batches SET commit_id = CASE batch_id WHEN 1 THEN ? WHEN 2 THEN ? END WHERE batch_id IN (1, 2)', pubs[1]!.git.commit, pubs[0]!.git.commit);
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v)).toEqual(expect.arrayContaining(['wrong-commit', 'history-order']));
  });

  it('publications made on two branches the user then merged are side by side, not out of order', () => {
    userGit(sb, vault, ['checkout', '-q', '-b', 'side']);
    writeFileSync(join(sb.dir, 's.md'), '---\nkind: page\ntitle: On side\n---\nside\n');
    expect(cli(sb, ['publish', '--store', 'st', 's.md']).code).toBe(0);
    userGit(sb, vault, ['checkout', '-q', 'main']);
    writeFileSync(join(sb.dir, 'm.md'), '---\nkind: page\ntitle: On main\n---\nmain\n');
    expect(cli(sb, ['publish', '--store', 'st', 'm.md']).code).toBe(0);
    userGit(sb, vault, ['merge', '-q', '--no-edit', 'side']);
    const v = verify();
    expect(v.report.problems).toEqual([]);
    expect(v.code).toBe(0);
  });

  it('queue-order and bytes-missing: a batch back in the queue behind committed ones', () => {
    sql("UPDATE batches SET state = 'queued', commit_id = NULL WHERE batch_id = 1");
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v)).toEqual(expect.arrayContaining(['queue-order', 'bytes-missing', 'unrecorded-commit']));
  });

  it('receipt-mismatch: a publication naming another batch', () => {
    sql('UPDATE publications SET batch_id = 1 WHERE publication_id = ?', pubs[2]!.publicationId);
    const v = verify();
    expect(v.code).toBe(1);
    expect(codes(v)).toContain('receipt-mismatch');
  });

  it('git-unavailable and repository-missing: the repository cannot be checked', () => {
    const noGit = verify({ PATH: '/nonexistent-bin' });
    expect(noGit.code).toBe(1);
    expect(codes(noGit)).toEqual(['git-unavailable']);
    expect(noGit.stderr).toMatch(/^E_UNAVAILABLE: verify found 1 problem in \S+: git-unavailable\n$/);
    // Git runs but cannot read the history: nothing was found to disagree either.
    const failingLog = gitWrapper(sb, 'failing-log-git', ['for a in "$@"; do [ "$a" = log ] && { echo "fatal: simulated read failure" >&2; exit 128; }; done']);
    const unreadable = verify({ KNOWLEDGE_GIT: failingLog });
    expect(codes(unreadable)).toEqual(['repository-unreadable']);
    expect(unreadable.stderr).toMatch(/^E_UNAVAILABLE: verify found 1 problem in \S+: repository-unreadable\n$/);
    rmSync(join(vault, '.git'), { recursive: true, force: true });
    const gone = verify();
    expect(gone.code).toBe(1);
    expect(codes(gone)).toEqual(['repository-missing']);
    expect(gone.stderr).toMatch(/^E_CONFLICT: verify found 1 problem in \S+: repository-missing\n$/);
  });

  it('repository-unreadable when git cannot say what the commits hold at the published paths (not every file gone)', () => {
    // cat-file fails when asked for <commit>:<path>; asked for commit ids alone, it answers.
    const failing = gitWrapper(sb, 'failing-cat-file-git', [
      'for a in "$@"; do',
      '  if [ "$a" = cat-file ]; then',
      '    in=$(cat)',
      '    case "$in" in *:*) echo "fatal: simulated read failure" >&2; exit 128;; esac',
      '    printf \'%s\\n\' "$in" | git "$@"; exit $?',
      '  fi',
      'done',
    ]);
    const v = verify({ KNOWLEDGE_GIT: failing });
    expect(codes(v), v.stderr).toEqual(['repository-unreadable']);
    expect(v.code).toBe(1);
    expect(v.stderr).toMatch(/^E_UNAVAILABLE: verify found 1 problem in \S+: repository-unreadable\n$/);
  });

  it('its stderr line is one line when the store path holds a line break', () => {
    expect(cli(sb, ['init', 'a\nb']).code).toBe(0);
    expect(cli(sb, ['publish', '--store', 'a\nb', 'r1.md']).code).toBe(0);
    const r = cli(sb, ['verify', '--store', 'a\nb'], { env: { KNOWLEDGE_GIT: '/nonexistent' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`E_UNAVAILABLE: verify found 1 problem in ${join(sb.dir, 'a')} b: git-unavailable\n`);
  });

  it('waiting batches alone are not a problem (git was missing)', () => {
    writeFileSync(join(sb.dir, 'r4.md'), '---\nkind: page\ntitle: Page 4\n---\nbody 4\n');
    expect(cli(sb, ['publish', '--store', 'st', 'r4.md'], { env: { PATH: '/nonexistent-bin' } }).code).toBe(0);
    const v = verify();
    expect(v.code).toBe(0);
    expect(v.report).toMatchObject({ batches: { committed: 3, queued: 1 } });
  });

  for (const [point, behind] of [['after-record-commit', 'the index is behind the branch: the update for batch 4, already committed, was not made'], ['after-update-ref', 'the index may be behind the branch']] as const) {
    it(`index-lock-left: a Knowledge process killed ${point} left .git/index.lock; verify says so and what fixes it, and the next scan does`, () => {
      writeFileSync(join(sb.dir, 'r4.md'), '---\nkind: page\ntitle: Page 4\n---\nbody 4\n');
      expect(cli(sb, ['publish', '--store', 'st', 'r4.md'], { env: { KNOWLEDGE_CRASH_AT: point } }).code).toBeNull();
      expect(readFileSync(join(vault, '.git', 'index.lock'), 'utf8')).toMatch(/^knowledge-index-lock /);
      const v = verify();
      expect(v.code).toBe(1);
      expect(codes(v)).toContain('index-lock-left');
      const p = (v.report.problems as Array<{ code: string; message: string }>).find((x) => x.code === 'index-lock-left')!;
      expect(p.message).toMatch(/^\.git\/index\.lock was left by a Knowledge process that has ended \(pid \d+\); /);
      expect(p.message).toContain(behind);
      expect(p.message).toContain('until the next Knowledge write or scan (knowledge scan) updates the index and removes the lock');
      expect(v.stderr).toMatch(/^E_CONFLICT: verify found \d+ problems? in .*index-lock-left/);
      const human = cli(sb, ['verify', '--store', 'st']);
      expect(human.stdout).toMatch(/^ {2}index-lock-left: \.git\/index\.lock was left/m);
      expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
      const after = verify();
      expect(after.code, JSON.stringify(after.report.problems)).toBe(0);
    });
  }
});

import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { GitRunner } from './runner.js';
import { refTransaction } from './ref-session.js';
import { vaultEnv } from './inspect.js';
import { ugit, userRepo, writeFile, longLivedScope, type GitSandbox } from './test-sandbox.js';

const scope = longLivedScope(afterEach);

function setup(): { sb: GitSandbox; vault: string; r: GitRunner; spawns: () => number; commits: string[] } {
  const sb = scope.sandbox();
  const vault = userRepo(sb);
  const commits = [ugit(sb, vault, ['rev-parse', 'main']).trim()];
  for (let i = 0; i < 3; i++) {
    writeFile(vault, `f${i}.md`, `${i}\n`);
    ugit(sb, vault, ['add', `f${i}.md`]);
    ugit(sb, vault, ['commit', '-q', '-m', `c${i}`]);
    commits.push(ugit(sb, vault, ['rev-parse', 'main']).trim());
  }
  ugit(sb, vault, ['update-ref', 'refs/heads/main', commits[0]!]);
  const r = new GitRunner();
  scope.track(r);
  let n = 0;
  const orig = r.spawnLongLived.bind(r);
  r.spawnLongLived = (args, opts) => {
    n++;
    return orig(args, opts);
  };
  return { sb, vault, r, spawns: () => n, commits };
}

describe('long-lived update-ref sessions (the branch move of a checkpoint)', () => {
  it('runs consecutive compare-and-swap transactions in one git process, each with its reflog message', async () => {
    const { sb, vault, r, spawns, commits } = setup();
    const env = vaultEnv(vault);
    for (let i = 1; i <= 3; i++) {
      const out = await refTransaction(r, vault, env, 'knowledge: checkpoint', `update refs/heads/main ${commits[i]} ${commits[i - 1]}\n`);
      expect(out.code, out.stderr).toBe(0);
      expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(commits[i]);
    }
    expect(spawns()).toBe(1);
    expect(ugit(sb, vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n').slice(0, 3)).toEqual(Array(3).fill('knowledge: checkpoint'));
  });

  it('a branch that moved fails the transaction like a one-shot update-ref, changes nothing, and the next one starts afresh', async () => {
    const { sb, vault, r, spawns, commits } = setup();
    const env = vaultEnv(vault);
    expect((await refTransaction(r, vault, env, 'm', `update refs/heads/main ${commits[1]} ${commits[0]}\n`)).code).toBe(0);
    // Expected old value is stale: git refuses, the ref stays.
    const bad = await refTransaction(r, vault, env, 'm', `update refs/heads/main ${commits[3]} ${commits[0]}\n`);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/but expected|cannot lock ref/);
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(commits[1]);
    const good = await refTransaction(r, vault, env, 'm', `update refs/heads/main ${commits[2]} ${commits[1]}\n`);
    expect(good.code, good.stderr).toBe(0);
    expect(spawns()).toBe(2);
  });

  it('never keeps Node running: a process that made a transaction exits by itself at once', () => {
    const { sb, vault, commits } = setup();
    const dist = (f: string) => pathToFileURL(join(process.cwd(), 'dist', 'git', f)).href;
    const code = `const { GitRunner } = await import(${JSON.stringify(dist('runner.js'))});
      const { refTransaction } = await import(${JSON.stringify(dist('ref-session.js'))});
      const { vaultEnv } = await import(${JSON.stringify(dist('inspect.js'))});
      const r = new GitRunner();
      const out = await refTransaction(r, ${JSON.stringify(vault)}, vaultEnv(${JSON.stringify(vault)}), 'm', ${JSON.stringify(`update refs/heads/main ${commits[1]} ${commits[0]}\n`)});
      process.stdout.write(String(out.code));`;
    const started = Date.now();
    const p = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: 20_000 });
    expect(p.stderr).toBe('');
    expect(p.stdout).toBe('0');
    expect(Date.now() - started).toBeLessThan(2500); // the idle close is 30 s away: nothing waited for it
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(commits[1]);
  });
});

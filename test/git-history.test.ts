import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { storeSandbox, cli, gitWrapper, userGit, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import type { Caller } from '../src/access.js';

/**
 * End-to-end history rules through the CLI, as a user runs them: outages,
 * repository problems and their fixes, resume, ordering [GIT-5, GIT-14..19].
 */
let sb: Sandbox;
let vault: string;
beforeEach(() => ({ sb, vault } = storeSandbox()));
afterEach(() => sb.cleanup());

const NO_GIT = { PATH: '/nonexistent-bin' };

function publishText(text: string, env: NodeJS.ProcessEnv = {}) {
  writeFileSync(join(sb.dir, 'r.md'), text);
  const r = cli(sb, ['publish', '--store', 'st', '--json', 'r.md'], { env });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

describe('[GIT-17] a Git outage followed by more edits loses no version', () => {
  it('queues every version while git is missing, then commits each, in order, with its own bytes', () => {
    const v1 = publishText('---\nkind: page\ntitle: Outage\n---\nversion one\n', NO_GIT);
    expect(v1.git).toEqual({ state: 'unavailable', reason: expect.stringMatching(/git/) });
    const id = v1.records[0].id;
    const v2 = publishText(`---\nid: ${id}\nrevision: 1\nkind: page\ntitle: Outage\n---\nversion two\n`, NO_GIT);
    const v3 = publishText(`---\nid: ${id}\nrevision: 2\nkind: page\ntitle: Outage\n---\nversion three\n`, NO_GIT);
    expect(v3.git.state).toBe('unavailable');
    expect(existsSync(join(vault, '.git'))).toBe(false); // nothing happened to git while it was missing
    const activity = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json'], { env: NO_GIT }).stdout);
    expect(activity.map((a: { git: { state: string } }) => a.git.state)).toEqual(['unavailable', 'unavailable', 'unavailable']);

    // Git is back (installed for the first time, from Knowledge's point of view): resume the middle one.
    const resumed = cli(sb, ['resume', '--store', 'st', v2.publicationId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout).git.state).toBe('committed');
    expect(JSON.parse(cli(sb, ['receipt', '--store', 'st', v1.publicationId, '--json']).stdout).git.state).toBe('committed');
    // Then the last one.
    const last = JSON.parse(cli(sb, ['resume', '--store', 'st', v3.publicationId, '--json']).stdout);
    expect(last.git.state).toBe('committed');
    const log = userGit(sb, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main'])
      .trim().split('\n').map((l) => l.split(' '));
    expect(log.map((l) => l[1])).toEqual([v1.publicationId, v2.publicationId, v3.publicationId]);
    const path = v1.records[0].path;
    expect(userGit(sb, vault, ['show', `${log[0]![0]}:${path}`])).toMatch(/version one/);
    expect(userGit(sb, vault, ['show', `${log[1]![0]}:${path}`])).toMatch(/version two/);
    expect(userGit(sb, vault, ['show', `${log[2]![0]}:${path}`])).toBe(readFileSync(join(vault, path), 'utf8'));
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'private'])).toBe('');
  });
});

describe('[GIT-18][GIT-19] repository problems are pending; fix and resume commits', () => {
  it('index.lock: pending with code locked, the lock is left alone, resume after removing it commits', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    writeFileSync(join(vault, '.git', 'index.lock'), '');
    const p = publishText('---\nkind: page\ntitle: Second\n---\ntwo\n');
    expect(p.git).toMatchObject({ state: 'pending', code: 'locked' });
    expect(p.git.reason).toMatch(/index\.lock/);
    expect(existsSync(join(vault, '.git', 'index.lock'))).toBe(true);
    // A third publication waits behind it, never overtaking [GIT-5].
    const q = publishText('---\nkind: page\ntitle: Third\n---\nthree\n');
    expect(q.git.state).toBe('pending');
    expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('1');
    rmSync(join(vault, '.git', 'index.lock'));
    const r = JSON.parse(cli(sb, ['resume', '--store', 'st', q.publicationId, '--json']).stdout);
    expect(r.git.state).toBe('committed');
    const subjects = userGit(sb, vault, ['log', '--reverse', '--format=%(trailers:key=Knowledge-Publication,valueonly,separator=)', 'main']).trim().split('\n');
    expect(subjects.slice(1)).toEqual([p.publicationId, q.publicationId]);
  });

  it('detached HEAD: pending detached-head, HEAD untouched; re-attaching and resuming commits on the branch', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    const head = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    userGit(sb, vault, ['checkout', '-q', '--detach']);
    const p = publishText('---\nkind: page\ntitle: Second\n---\ntwo\n');
    expect(p.git).toMatchObject({ state: 'pending', code: 'detached-head' });
    expect(userGit(sb, vault, ['rev-parse', 'HEAD']).trim()).toBe(head);
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(head);
    userGit(sb, vault, ['checkout', '-q', 'main']);
    const r = JSON.parse(cli(sb, ['resume', '--store', 'st', p.publicationId, '--json']).stdout);
    expect(r.git.state).toBe('committed');
    expect(userGit(sb, vault, ['rev-parse', 'main']).trim()).toBe(r.git.commit);
  });

  it('a publication whose checkpoint is pending is still accepted (exit 0) and never rolled back [GIT-15]', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    writeFileSync(join(vault, '.git', 'MERGE_HEAD'), userGit(sb, vault, ['rev-parse', 'HEAD']));
    const p = publishText('---\nkind: page\ntitle: During merge\n---\nkept\n');
    expect(p.git).toMatchObject({ state: 'pending', code: 'operation-in-progress' });
    expect(readFileSync(join(vault, p.records[0].path), 'utf8')).toMatch(/kept/);
    expect(existsSync(join(vault, '.git', 'MERGE_HEAD'))).toBe(true);
  });
});

describe('[GIT-15] housekeeping after a checkpoint', () => {
  it('a roll-up of the repository\'s packs that fails is told as a warning, and the publication stands', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    // More packs than the roll-up threshold (24): files git itself ignores (no .idx).
    const packDir = join(vault, '.git', 'objects', 'pack');
    for (let i = 0; i < 25; i++) writeFileSync(join(packDir, `pack-${String(i).padStart(40, '0')}.pack`), '');
    const failing = gitWrapper(sb, 'failing-repack-git', ['for a in "$@"; do [ "$a" = repack ] && { echo "fatal: out of memory, malloc failed" >&2; exit 128; }; done']);
    writeFileSync(join(sb.dir, 'r.md'), '---\nkind: page\ntitle: Second\n---\ntwo\n');
    const r = cli(sb, ['publish', '--store', 'st', '--json', 'r.md'], { env: { KNOWLEDGE_GIT: failing } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).git.state).toBe('committed');
    expect(r.stderr).toMatch(/^warning: could not roll up the repository's packs \(git-error\): git failed: fatal: out of memory, malloc failed; tried again after the next checkpoint$/m);
  });
});

describe('[GIT-10] the user\'s own work in the repository is never touched', () => {
  it('staged, unstaged and untracked user files survive a checkpoint; published paths are clean', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    writeFileSync(join(vault, 'notes.md'), 'my staged note\n');
    userGit(sb, vault, ['add', 'notes.md']);
    writeFileSync(join(vault, 'draft.md'), 'untracked draft\n');
    const p = publishText('---\nkind: page\ntitle: Second\n---\ntwo\n');
    expect(p.git.state).toBe('committed');
    expect(userGit(sb, vault, ['show', '--name-only', '--format=', p.git.commit]).trim()).toBe(p.records[0].path);
    const status = userGit(sb, vault, ['status', '--porcelain']).split('\n').filter(Boolean).sort();
    expect(status).toEqual(['?? draft.md', 'A  notes.md']);
  });

  it('a split index whose shared index expires at once stays readable while Knowledge writes its copy of the index, and the user\'s staged work survives', () => {
    publishText('---\nkind: page\ntitle: First\n---\none\n');
    writeFileSync(join(vault, 'notes.md'), 'my staged note\n');
    userGit(sb, vault, ['add', 'notes.md']);
    userGit(sb, vault, ['config', 'core.splitIndex', 'true']);
    userGit(sb, vault, ['config', 'splitIndex.sharedIndexExpire', 'now']);
    userGit(sb, vault, ['update-index', '--split-index']);
    // After each index write of Knowledge's to a copy (GIT_INDEX_FILE), the user's git reads the live index.
    const log = join(sb.dir, 'live-index.log');
    const userEnv = Object.entries(sb.env).filter(([k]) => k === 'PATH' || k === 'HOME' || k.startsWith('GIT_') || k === 'LC_ALL')
      .map(([k, v]) => `${k}='${v}'`).join(' ');
    const wrapper = join(sb.dir, 'checking-git');
    writeFileSync(wrapper, [
      '#!/bin/sh',
      'git "$@"; rc=$?',
      'case " $* " in *" update-index "*)',
      `  if [ -n "$GIT_INDEX_FILE" ]; then (cd '${vault}' && env -i ${userEnv} git status --porcelain >/dev/null 2>>'${log}' && echo readable >>'${log}' || echo broken >>'${log}'); fi;;`,
      'esac',
      'exit $rc',
      '',
    ].join('\n'), { mode: 0o755 });
    const p = publishText('---\nkind: page\ntitle: Second\n---\ntwo\n', { KNOWLEDGE_GIT: wrapper });
    expect(p.git.state).toBe('committed');
    const seen = readFileSync(log, 'utf8');
    expect(seen).toMatch(/^readable$/m);
    expect(seen).not.toMatch(/broken|fatal/);
    expect(userGit(sb, vault, ['status', '--porcelain']).split('\n').filter(Boolean)).toEqual(['A  notes.md']);
    // Shared index files past git's default expiry (two weeks) still go when Knowledge writes a new one.
    const gitDir = join(vault, '.git');
    const old = ['1', '2', '3'].map((n) => join(gitDir, `sharedindex.${n.repeat(40)}`));
    const month = (Date.now() - 30 * 86400_000) / 1000;
    for (const f of old) {
      writeFileSync(f, 'stale');
      utimesSync(f, month, month);
    }
    userGit(sb, vault, ['config', 'splitIndex.maxPercentChange', '1']);
    publishText('---\nkind: page\ntitle: Third\n---\nthree\n');
    publishText('---\nkind: page\ntitle: Fourth\n---\nfour\n');
    expect(old.filter((f) => existsSync(f))).toEqual([]);
    expect(userGit(sb, vault, ['status', '--porcelain']).split('\n').filter(Boolean)).toEqual(['A  notes.md']);
  });

  it('a file marked intent-to-add (git add -N) that a scan commits is in the index as committed: the user\'s next commit keeps it', () => {
    mkdirSync(join(vault, 'private'), { recursive: true });
    writeFileSync(join(vault, 'private', 'a.md'), '# a\n');
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    writeFileSync(join(vault, 'private', 'new.md'), '# new\n');
    userGit(sb, vault, ['add', '-N', 'private/new.md']);
    // A really staged empty file is the user's, and stays staged as it is.
    writeFileSync(join(vault, 'private', 'staged-empty.md'), '');
    userGit(sb, vault, ['add', 'private/staged-empty.md']);
    writeFileSync(join(vault, 'private', 'staged-empty.md'), 'filled after staging\n');
    const r = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { added: string[]; git: { state: string } };
    expect(r.added).toEqual(['private/new.md', 'private/staged-empty.md']);
    expect(r.git.state).toBe('committed');
    expect(userGit(sb, vault, ['status', '--porcelain']).split('\n').filter(Boolean)).toEqual(['MM private/staged-empty.md']);
    userGit(sb, vault, ['commit', '-q', '-m', 'my own commit']);
    expect(userGit(sb, vault, ['show', '--name-status', '--format=', 'HEAD']).trim()).toBe('M\tprivate/staged-empty.md');
    expect(userGit(sb, vault, ['ls-tree', '-r', '--name-only', 'HEAD']).trim().split('\n')).toContain('private/new.md');
  });

  it('the user\'s skip-worktree and assume-unchanged flags on files a scan commits are kept', () => {
    mkdirSync(join(vault, 'private'), { recursive: true });
    for (const n of ['s', 'h', 'plain']) writeFileSync(join(vault, 'private', `${n}.md`), `# ${n}\n`);
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    userGit(sb, vault, ['update-index', '--skip-worktree', 'private/s.md']);
    userGit(sb, vault, ['update-index', '--assume-unchanged', 'private/h.md']);
    for (const n of ['s', 'h', 'plain']) writeFileSync(join(vault, 'private', `${n}.md`), `# ${n}, edited\n`);
    const r = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout) as { modified: string[]; git: { state: string } };
    expect(r).toMatchObject({ modified: ['private/h.md', 'private/plain.md', 'private/s.md'], git: { state: 'committed' } });
    // The entries hold the committed blobs, with the user's flags as they were.
    expect(userGit(sb, vault, ['ls-files', '-v', 'private']).trim().split('\n').sort()).toEqual(['H private/plain.md', 'S private/s.md', 'h private/h.md']);
    expect(userGit(sb, vault, ['diff', '--cached', '--name-only']).trim()).toBe('');
    expect(userGit(sb, vault, ['ls-files', '-s', 'private/s.md'])).toContain(userGit(sb, vault, ['rev-parse', 'HEAD:private/s.md']).trim());
  });
});

describe('[GIT-20] the history covers the whole vault, every conversation partition too', () => {
  it('[GIT-20] agents\' conversation publications and the operator\'s private one are all in the branch\'s commits, unfiltered by partition; the documentation says so', async () => {
    const svc = KnowledgeService.open(join(sb.dir, 'st'), { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
    const conv: Array<{ path: string; commit: string }> = [];
    try {
      for (const session of ['s1', 's2']) {
        const agent: Caller = { kind: 'agent', agentId: 'bot', session };
        const r = await svc.publishAs(agent, { partition: `conversation:${session}`, records: [`---\nkind: page\ntitle: Said in ${session}\n---\nconversation ${session}\n`], evidence: [] });
        expect(r.git, JSON.stringify(r.git)).toMatchObject({ state: 'committed' });
        expect(r.records[0]!.path).toMatch(new RegExp(`^conversations/${session}/`));
        conv.push({ path: r.records[0]!.path, commit: (r.git as { commit: string }).commit });
      }
      expect(await svc.settle()).toEqual([]);
    } finally {
      svc.close();
    }
    const priv = publishText('---\nkind: page\ntitle: Private note\n---\nprivate\n');
    expect(priv.git, JSON.stringify(priv.git)).toMatchObject({ state: 'committed' });
    expect(priv.records[0].path).toMatch(/^private\//);
    const tree = (rev: string) => userGit(sb, vault, ['ls-tree', '-r', '--name-only', rev]).trim().split('\n');
    // Each conversation publication's own commit holds its file, and the branch holds every partition's.
    for (const c of conv) expect(tree(c.commit)).toContain(c.path);
    const head = tree('main');
    for (const p of [...conv.map((c) => c.path), priv.records[0].path]) expect(head).toContain(p);
    for (const c of conv) expect(userGit(sb, vault, ['show', `main:${c.path}`])).toContain('conversation ');
    expect(userGit(sb, vault, ['status', '--porcelain', '--', 'conversations', 'private']).trim()).toBe('');
    // The documentation says the history is not scoped to a partition.
    const flat = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), 'utf8').replace(/\n> ?/g, '\n').replace(/\s+/g, ' ');
    const guide = flat('docs/local-history.md');
    expect(guide).toContain('the history covers the whole vault [GIT-20]');
    expect(guide).toContain('holds every partition, including every conversation partition. Partition access checks (an agent that may read only its own conversation) do **not** filter it.');
    const readme = flat('README.md');
    expect(readme).toContain('History reads the whole vault\'s repository, which is not partition-scoped');
    expect(readme).toContain('the `.git` directory itself covers every partition.');
  });
});

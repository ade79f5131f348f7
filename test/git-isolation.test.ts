import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { makeSandbox, cli, userGit, type Sandbox } from './helpers.js';

/**
 * [GIT-3][GIT-12] Isolation through the real CLI process: the user's global
 * config (core.hooksPath, fsmonitor, signing with a failing gpg, filters),
 * the repository's own config and hooks, .gitattributes filters, and a
 * parent that leaks GIT_DIR / GIT_INDEX_FILE / GIT_WORK_TREE /
 * GIT_CONFIG_PARAMETERS / GIT_CONFIG_COUNT into Knowledge's environment.
 * Nothing runs, nothing leaks, committed bytes are raw, no config changes.
 */
let sb: Sandbox;
let vault: string;
let markers: string;
beforeEach(() => {
  sb = makeSandbox();
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  vault = join(sb.dir, 'st', 'vault');
  markers = join(sb.dir, 'markers');
  mkdirSync(markers);
});
afterEach(() => sb.cleanup());

const HOOKS = [
  'applypatch-msg', 'pre-applypatch', 'post-applypatch', 'pre-commit', 'pre-merge-commit', 'prepare-commit-msg', 'commit-msg',
  'post-commit', 'pre-rebase', 'post-checkout', 'post-merge', 'pre-push', 'pre-receive', 'update', 'proc-receive', 'post-receive',
  'post-update', 'reference-transaction', 'push-to-checkout', 'pre-auto-gc', 'post-rewrite', 'sendemail-validate',
  'fsmonitor-watchman', 'p4-changelist', 'p4-prepare-changelist', 'p4-post-changelist', 'p4-pre-submit', 'post-index-change',
];

function script(name: string, body: string): string {
  const p = join(sb.dir, name);
  writeFileSync(p, `#!/bin/sh\ntouch "${markers}/${name}-$$"\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

describe('[GIT-12] nothing of the user\'s configuration runs, and nothing is written to it', () => {
  it('hooks, fsmonitor, filters, signing and leaked GIT_* variables: no program runs, bytes are raw', () => {
    // The user's repository, made before any hostile configuration exists.
    mkdirSync(vault, { recursive: true });
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    writeFileSync(join(vault, '.gitattributes'), '* filter=x text eol=crlf\n*.md diff=x\n');
    userGit(sb, vault, ['add', '.gitattributes']);
    userGit(sb, vault, ['commit', '-q', '-m', 'user: attributes']);

    const hookDirs = [join(sb.dir, 'global-hooks'), join(vault, '.git', 'hooks')];
    for (const d of hookDirs) {
      mkdirSync(d, { recursive: true });
      for (const h of HOOKS) {
        writeFileSync(join(d, h), `#!/bin/sh\ntouch "${markers}/hook-${h}-$$"\ncat >/dev/null 2>&1\nexit 1\n`);
        chmodSync(join(d, h), 0o755);
      }
    }
    const fsmonitor = script('fsmonitor', 'exit 1');
    const filter = script('filter', 'tr a-z A-Z');
    const gpg = script('gpg', 'exit 1');
    const editor = script('editor', 'exit 1');
    const globalConfig = join(sb.home, '.gitconfig');
    writeFileSync(globalConfig, [
      '[core]', `\thooksPath = ${hookDirs[0]}`, `\tfsmonitor = ${fsmonitor}`, '\tautocrlf = true', `\teditor = ${editor}`, `\tpager = ${editor}`,
      '[commit]', '\tgpgSign = true', '[gpg]', `\tprogram = ${gpg}`,
      '[filter "x"]', `\tclean = ${filter}`, `\tsmudge = ${filter}`, '\trequired = true',
      '[diff "x"]', `\ttextconv = ${filter}`,
      '[user]', '\tname = Global User', '\temail = global@example.com',
      '',
    ].join('\n'));
    // The repository's own config names programs too.
    for (const [k, v] of [['core.hooksPath', hookDirs[1]!], ['core.fsmonitor', fsmonitor], ['filter.x.clean', filter], ['filter.x.process', filter], ['commit.gpgSign', 'true'], ['gpg.program', gpg]] as Array<[string, string]>) {
      spawnSync('git', ['config', k, v], { cwd: vault, env: { ...sb.env, HOME: join(sb.dir, 'nowhere') } });
    }
    const repoConfig = readFileSync(join(vault, '.git', 'config'));
    const globalBefore = readFileSync(globalConfig);

    // A decoy repository the leaked variables point at.
    const decoy = join(sb.dir, 'decoy');
    mkdirSync(decoy);
    spawnSync('git', ['init', '-q', '-b', 'main', decoy], { env: sb.env });
    const decoyFiles = readdirSync(join(decoy, '.git')).sort();
    const leaked: NodeJS.ProcessEnv = {
      GIT_DIR: join(decoy, '.git'),
      GIT_WORK_TREE: decoy,
      GIT_INDEX_FILE: join(decoy, 'leaked-index'),
      GIT_OBJECT_DIRECTORY: join(decoy, '.git', 'objects'),
      GIT_CONFIG_PARAMETERS: `'core.hooksPath'='${hookDirs[0]}' 'core.fsmonitor'='${fsmonitor}'`,
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'core.hooksPath',
      GIT_CONFIG_VALUE_0: hookDirs[0],
      GIT_EXEC_PATH: join(sb.dir, 'nowhere'),
      GIT_EDITOR: editor,
      GIT_SSH_COMMAND: editor,
    };

    const crlf = Buffer.from('---\r\nkind: page\r\ntitle: Raw bytes\r\n---\r\nlower case, CRLF\r\n');
    writeFileSync(join(sb.dir, 'r.md'), crlf);
    const evidence = Buffer.from('evidence in lower case\r\n');
    writeFileSync(join(sb.dir, 'ev.txt'), evidence);
    const r = cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'r.md'], { env: leaked });
    expect(r.code, r.stderr).toBe(0);
    const receipt = JSON.parse(r.stdout);
    expect(receipt.git.state, JSON.stringify(receipt.git)).toBe('committed');

    // Checked before any command of the user's runs (their git would run these programs itself).
    expect(readdirSync(markers)).toEqual([]);
    expect(readFileSync(globalConfig).equals(globalBefore)).toBe(true);
    expect(readFileSync(join(vault, '.git', 'config')).equals(repoConfig)).toBe(true);
    expect(readdirSync(join(decoy, '.git')).sort()).toEqual(decoyFiles);

    // Raw bytes in history: no clean filter, no eol conversion [GIT-7].
    const plain = { ...sb.env, HOME: join(sb.dir, 'nowhere') };
    const blob = (rev: string) => spawnSync('git', ['cat-file', 'blob', rev], { cwd: vault, env: plain }).stdout as Buffer;
    const installed = readFileSync(join(vault, receipt.records[0].path));
    expect(blob(`${receipt.git.commit}:${receipt.records[0].path}`).equals(installed)).toBe(true);
    expect(installed.includes(Buffer.from('\r\n'))).toBe(true);
    expect(blob(`${receipt.git.commit}:${receipt.evidence[0].path}`).equals(evidence)).toBe(true);
    const commit = spawnSync('git', ['cat-file', 'commit', receipt.git.commit], { cwd: vault, env: plain, encoding: 'utf8' }).stdout;
    expect(commit).not.toContain('gpgsig');
    expect(commit).toMatch(/^committer Knowledge <knowledge@localhost> /m);
    expect(commit).toMatch(/^author Knowledge <knowledge@localhost> /m);
    // The checkpoint went to the vault's repository, on its branch.
    expect(spawnSync('git', ['rev-parse', 'main'], { cwd: vault, env: plain, encoding: 'utf8' }).stdout.trim()).toBe(receipt.git.commit);
  });

  it('a filter driver whose name holds "=" is blanked too when the index is written (a racily clean entry would run it)', () => {
    const put = (name: string, title: string) => writeFileSync(join(sb.dir, name), `---\nkind: page\ntitle: ${title}\n---\nAbout ${title}.\n`);
    put('a.md', 'Alpha');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'a.md']).stdout).git.state).toBe('committed');
    const prog = script('clean', 'cat');
    for (const name of ['a=b', 'plain']) userGit(sb, vault, ['config', `filter.${name}.clean`, prog]);
    writeFileSync(join(vault, '.gitattributes'), '*.txt filter=a=b\n*.dat filter=plain\n');
    writeFileSync(join(vault, 'user.txt'), 'user file\n');
    writeFileSync(join(vault, 'user.dat'), 'user data\n');
    // Staged with the working files newer than the index: racily clean, so every index write re-checks them.
    const later = new Date(Date.now() + 3_600_000);
    for (const f of ['user.txt', 'user.dat']) utimesSync(join(vault, f), later, later);
    userGit(sb, vault, ['add', '.gitattributes', 'user.txt', 'user.dat']); // (the user's own git runs the filters)
    for (const m of readdirSync(markers)) rmSync(join(markers, m));
    put('b.md', 'Beta');
    const r = cli(sb, ['publish', '--store', 'st', '--json', 'b.md']);
    expect(JSON.parse(r.stdout).git).toMatchObject({ state: 'committed' });
    expect(readdirSync(markers)).toEqual([]);
    expect(userGit(sb, vault, ['diff', '--cached', '--name-only']).trim().split('\n').sort()).toEqual(['.gitattributes', 'user.dat', 'user.txt']);
  });

  it('filter sections are blanked however .git/config lays them out: two headers on a line, carriage returns, an include behind another header, a dotted section with a subsection', () => {
    const put = (name: string, title: string) => writeFileSync(join(sb.dir, name), `---\nkind: page\ntitle: ${title}\n---\nAbout ${title}.\n`);
    put('a.md', 'Alpha');
    expect(JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', 'a.md']).stdout).git.state).toBe('committed');
    const prog = script('clean', 'cat');
    const config = join(vault, '.git', 'config');
    const original = readFileSync(config, 'utf8');
    const included = join(sb.dir, 'included.cfg');
    writeFileSync(included, `[filter "inc"]\n\tclean = ${prog}\n`);
    const layouts: Array<[string, string]> = [
      ['two', `[core] [filter "two"]\n\tclean = ${prog}\n`],
      ['cr', `[core]\r[filter "cr"]\r\tclean = ${prog}\n`],
      ['inc', `[core] [include]\n\tpath = ${included}\n`],
      ['dot.sub', `[filter.dot "sub"]\n\tclean = ${prog}\n`],
    ];
    layouts.forEach(([name, text], i) => {
      writeFileSync(config, original + text);
      // The user's own git reads the driver from that very layout.
      expect(userGit(sb, vault, ['config', `filter.${name}.clean`]).trim(), name).toBe(prog);
      writeFileSync(join(vault, '.git', 'info', 'attributes'), `*.txt filter=${name}\n`);
      writeFileSync(join(vault, `user-${name}.txt`), 'user file\n');
      // Staged with the working file newer than the index: racily clean, so every index write re-checks it.
      const later = new Date(Date.now() + 3_600_000);
      utimesSync(join(vault, `user-${name}.txt`), later, later);
      userGit(sb, vault, ['add', `user-${name}.txt`]); // (the user's own git runs the filter)
      for (const m of readdirSync(markers)) rmSync(join(markers, m));
      put(`b${i}.md`, `Beta ${name}`);
      const r = cli(sb, ['publish', '--store', 'st', '--json', `b${i}.md`]);
      expect(JSON.parse(r.stdout).git, name).toMatchObject({ state: 'committed' });
      expect(readdirSync(markers), name).toEqual([]);
    });
  });

  it('a `git replace` of the branch tip, grafts and a UTF-16 log encoding in the repository config change nothing Knowledge commits or reads [GIT-6][GIT-7]', () => {
    const put = (name: string, title: string) => writeFileSync(join(sb.dir, name), `---\nkind: page\ntitle: ${title}\n---\nAbout ${title}.\n`);
    const publish = (name: string, env: NodeJS.ProcessEnv = {}) => cli(sb, ['publish', '--store', 'st', '--json', name], { env });
    put('a.md', 'Alpha');
    put('b.md', 'Beta');
    expect(JSON.parse(publish('a.md').stdout).git.state).toBe('committed');
    const c1 = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    expect(JSON.parse(publish('b.md').stdout).git.state).toBe('committed');
    const c2 = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const files = (c: string) => userGit(sb, vault, ['--no-replace-objects', 'ls-tree', '-r', '--name-only', c]).trim().split('\n').filter((p) => p.endsWith('.md'));
    // The user replaces the tip by a commit with the first one's tree (hiding Beta in their own views), and grafts it.
    const r = userGit(sb, vault, ['commit-tree', '-p', c1, '-m', 'replacement', `${c1}^{tree}`]).trim();
    userGit(sb, vault, ['replace', c2, r]);
    writeFileSync(join(vault, '.git/info/grafts'), `${c2}\n`);
    userGit(sb, vault, ['config', 'i18n.logOutputEncoding', 'UTF-16']);
    userGit(sb, vault, ['config', 'i18n.commitEncoding', 'UTF-16']);
    put('c.md', 'Gamma');
    // Killed after the branch moved and before the receipt: the retry must find its own commit by its trailers.
    expect(publish('c.md', { KNOWLEDGE_CRASH_AT: 'after-update-ref' }).code).not.toBe(0);
    const c3 = userGit(sb, vault, ['--no-replace-objects', 'rev-parse', 'HEAD']).trim();
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    // Built on the real tip: all three pages, one commit each, none twice.
    expect(userGit(sb, vault, ['--no-replace-objects', 'rev-parse', 'HEAD']).trim()).toBe(c3);
    expect(files(c3)).toHaveLength(3);
    expect(userGit(sb, vault, ['--no-replace-objects', 'diff', '--name-status', c2, c3]).trim()).toMatch(/^A\t\S+\.md$/);
    expect(userGit(sb, vault, ['cat-file', 'commit', c3])).toContain(`\nparent ${c2}\n`);
    rmSync(join(vault, '.git/info/grafts')); // (the user's own rev-list honours it)
    expect(userGit(sb, vault, ['--no-replace-objects', 'rev-list', '--count', 'HEAD']).trim()).toBe('3');
    // Read back through the same log parsing: history and verify see every commit.
    const verify = JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout);
    expect(verify.ok, JSON.stringify(verify)).toBe(true);
    const id = JSON.parse(cli(sb, ['lookup', '--store', 'st', '--json', 'Beta']).stdout).record.id;
    expect(JSON.parse(cli(sb, ['history', '--store', 'st', '--json', id]).stdout).versions).toHaveLength(1);
    expect(userGit(sb, vault, ['--no-replace-objects', 'status', '--porcelain']).trim()).toBe('');
  });

  it('trailer configuration in the repository (separators, token renames) blinds git\'s %(trailers), not Knowledge: a crashed checkpoint is found and reused, history and verify read every commit [GIT-6][GIT-11]', () => {
    const put = (name: string, title: string) => writeFileSync(join(sb.dir, name), `---\nkind: page\ntitle: ${title}\n---\nAbout ${title}.\n`);
    const publish = (name: string, env: NodeJS.ProcessEnv = {}) => cli(sb, ['publish', '--store', 'st', '--json', name], { env });
    put('a.md', 'Alpha');
    expect(JSON.parse(publish('a.md').stdout).git.state).toBe('committed');
    userGit(sb, vault, ['config', 'trailer.separators', '#']);
    userGit(sb, vault, ['config', 'trailer.Knowledge-Batch.key', 'Other-Batch']);
    userGit(sb, vault, ['config', 'trailer.Knowledge-Actor.key', 'Other-Actor']);
    // What git itself now makes of a Knowledge commit's trailers: nothing.
    expect(userGit(sb, vault, ['log', '-1', '--format=%(trailers:key=Knowledge-Batch,valueonly)']).trim()).toBe('');
    put('b.md', 'Beta');
    // Killed after the branch moved and before the receipt: the retry must find its own commit by its trailers.
    expect(publish('b.md', { KNOWLEDGE_CRASH_AT: 'after-update-ref' }).code).not.toBe(0);
    const landed = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const scan = JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout);
    expect(scan.retried.map((x: { git: { state: string; commit?: string } }) => x.git)).toEqual([{ state: 'committed', commit: landed }]);
    // Reused, not committed twice.
    expect(userGit(sb, vault, ['rev-parse', 'HEAD']).trim()).toBe(landed);
    expect(userGit(sb, vault, ['rev-list', '--count', 'HEAD']).trim()).toBe('2');
    const verify = JSON.parse(cli(sb, ['verify', '--store', 'st', '--json']).stdout);
    expect(verify, JSON.stringify(verify)).toMatchObject({ ok: true, problems: [] });
    const id = JSON.parse(cli(sb, ['lookup', '--store', 'st', '--json', 'Beta']).stdout).record.id;
    const versions = JSON.parse(cli(sb, ['history', '--store', 'st', '--json', id]).stdout).versions;
    expect(versions).toHaveLength(1);
    expect(versions[0]).toMatchObject({ actor: 'operator' });
  });

  it('a partial clone\'s missing objects are never fetched: no transport runs, even one the repository\'s config allows (ext::, file://) [GIT-3][GIT-12]', () => {
    const remote = join(sb.dir, 'remote');
    mkdirSync(join(remote, 'private'), { recursive: true });
    userGit(sb, remote, ['init', '-q', '-b', 'main']);
    userGit(sb, remote, ['config', 'uploadpack.allowFilter', 'true']);
    userGit(sb, remote, ['config', 'uploadpack.allowAnySHA1InWant', 'true']);
    const rec = (body: string) => `---\nformat: knowledge-record-v1\nid: n1\nrevision: 1\nkind: page\ntitle: One\nrecorded_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\nscope: private\nlifecycle: active\n---\n${body}\n`;
    writeFileSync(join(remote, 'private/n.md'), rec('body one'));
    userGit(sb, remote, ['add', '-A']);
    userGit(sb, remote, ['commit', '-q', '-m', 'one']);
    writeFileSync(join(remote, 'private/n.md'), rec('body two'));
    userGit(sb, remote, ['commit', '-q', '-a', '-m', 'two']);
    // The vault is a blob-less clone: the first version's bytes are not here.
    userGit(sb, sb.dir, ['clone', '-q', '--filter=blob:none', `file://${remote}`, 'clone']);
    renameSync(join(sb.dir, 'clone', '.git'), join(vault, '.git'));
    mkdirSync(join(vault, 'private'), { recursive: true });
    renameSync(join(sb.dir, 'clone', 'private', 'n.md'), join(vault, 'private', 'n.md'));
    const missing = () => userGit(sb, vault, ['rev-list', '--objects', '--missing=print', '--all']).split('\n').filter((l) => l.startsWith('?'));
    expect(missing()).toHaveLength(1);
    expect(JSON.parse(cli(sb, ['scan', '--store', 'st', '--json']).stdout).baseline).toBe(true);

    const marker = join(markers, 'ext-ran');
    for (const [url, allow] of [[`ext::sh -c touch% ${marker}`, 'protocol.ext.allow'], [`file://${remote}`, 'protocol.file.allow']] as const) {
      userGit(sb, vault, ['config', 'remote.origin.url', url]);
      userGit(sb, vault, ['config', allow, 'always']);
      const h = JSON.parse(cli(sb, ['history', '--store', 'st', '--json', 'n1']).stdout);
      // Nothing was run or fetched for it, and the history says what it could not read, and why.
      expect(readdirSync(markers), url).toEqual([]);
      expect(missing(), url).toHaveLength(1);
      expect(h.git, url).toMatchObject({ state: 'pending', code: 'git-error' });
      expect(h.git.reason).toMatch(/partial clone/);
    }
  });

  it('no network, no remotes: a configured remote and url rewrite are never contacted [GIT-3]', () => {
    mkdirSync(vault, { recursive: true });
    userGit(sb, vault, ['init', '-q', '-b', 'main']);
    const ssh = script('ssh', 'exit 1');
    userGit(sb, vault, ['remote', 'add', 'origin', 'ssh://example.invalid/repo.git']);
    userGit(sb, vault, ['config', 'core.sshCommand', ssh]);
    userGit(sb, vault, ['config', 'remote.origin.pushurl', 'ssh://example.invalid/push.git']);
    writeFileSync(join(sb.dir, 'r.md'), '---\nkind: page\ntitle: Offline\n---\nx\n');
    const r = cli(sb, ['publish', '--store', 'st', '--json', 'r.md'], { env: { GIT_SSH: ssh, GIT_SSH_COMMAND: ssh } });
    expect(JSON.parse(r.stdout).git.state).toBe('committed');
    expect(readdirSync(markers)).toEqual([]);
    expect(userGit(sb, vault, ['for-each-ref', '--format=%(refname)'])).toBe('refs/heads/main\n');
  });
});

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { processStartTicks } from '../src/process.js';
import { openStore } from '../src/store/store.js';
import Database from 'better-sqlite3';
import { makeSandbox, cli, cliPath, userGit, canMountTmpfs, runUnshared, NO_UNPRIVILEGED, UNPRIVILEGED_NOTE, unprivilegedCli, type Sandbox } from './helpers.js';

const canMount = canMountTmpfs('the full-disk store test');

let sb: Sandbox;
beforeEach(() => { sb = makeSandbox(); });
afterEach(() => sb.cleanup());

const page = '---\nkind: page\ntitle: Hello\n---\nbody\n';

describe('[LAY-1] init creates the store layout', () => {
  it('creates vault/, vault.json, state.sqlite (WAL, synchronous=FULL, versioned schema) and registers the store', () => {
    const r = cli(sb, ['init', 'st', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    const store = join(sb.dir, 'st');
    expect(out.store).toBe(store);
    const manifest = JSON.parse(readFileSync(join(store, 'vault', 'vault.json'), 'utf8'));
    expect(manifest.format).toBe('knowledge-vault-v1');
    expect(manifest.vaultId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(manifest.createdAt)).not.toBeNaN();
    const db = new Database(join(store, 'state.sqlite'), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBeGreaterThanOrEqual(1);
    // A new store's pages are 16 KiB (db.ts PAGE_SIZE; BENCHMARKS.md "SQLite page size").
    expect(db.pragma('page_size', { simple: true })).toBe(16384);
    db.close();
    const reg = JSON.parse(readFileSync(join(sb.home, '.knowledge', 'registry.json'), 'utf8'));
    expect(reg.stores[store]).toMatchObject({ vaultId: manifest.vaultId, writesEnabled: true });
  });

  it('is idempotent and never changes the vault id', () => {
    cli(sb, ['init', 'st']);
    const a = readFileSync(join(sb.dir, 'st/vault/vault.json'), 'utf8');
    const r = cli(sb, ['init', 'st', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).created).toBe(false);
    expect(readFileSync(join(sb.dir, 'st/vault/vault.json'), 'utf8')).toBe(a);
  });
});

describe('[LAY-1] the store found where --store (or KNOWLEDGE_STORE) says', () => {
  it('KNOWLEDGE_STORE stands in for --store', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--json', 'a.md'], { env: { KNOWLEDGE_STORE: 'st' } });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ kind: 'publication', git: { state: 'committed' } });
    expect(JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout).total).toBe(1);
  });

  it('a vault.json that is not a Knowledge vault manifest (another format) is E_UNAVAILABLE, and nothing is written', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const manifest = join(sb.dir, 'st', 'vault', 'vault.json');
    const m = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, unknown>;
    writeFileSync(manifest, JSON.stringify({ ...m, format: 'something-else-v1' }));
    writeFileSync(join(sb.dir, 'a.md'), page);
    for (const args of [['publish', '--store', 'st', 'a.md'], ['scan', '--store', 'st'], ['list', '--store', 'st']]) {
      const r = cli(sb, args);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr, args[0]).toMatch(/^E_UNAVAILABLE: vault manifest \S+vault\.json is unreadable: not a knowledge vault manifest/);
    }
    expect(readdirSync(join(sb.dir, 'st', 'vault')).sort()).toEqual(['.knowledge-history', 'vault.json']);
  });
});

describe('[LAY-1] init and the command line refuse bad arguments with a stable code, writing nothing', () => {
  const entries = () => readdirSync(sb.dir).sort();

  it('a store path too long for SQLite to open its database is refused before anything is written (not E_INTERNAL and a half-made store)', () => {
    const deep = join(sb.dir, ...Array.from({ length: 5 }, (_, i) => String(i).repeat(100)));
    mkdirSync(deep, { recursive: true });
    const r = cli(sb, ['init', join(deep, 'st')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: cannot create the store .*: its state\.sqlite path is \d+ bytes long, and SQLite opens paths of at most 503 bytes; choose a shorter path/);
    expect(existsSync(join(deep, 'st'))).toBe(false);
    expect(existsSync(join(sb.home, '.knowledge', 'registry.json'))).toBe(false);
    // A store moved under such a path says why it cannot be opened.
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    renameSync(join(sb.dir, 'st'), join(deep, 'st'));
    const open = cli(sb, ['list', '--store', join(deep, 'st')]);
    expect(open.code).toBe(1);
    expect(open.stderr).toMatch(/^E_UNAVAILABLE: state\.sqlite of .* cannot be opened: its state\.sqlite path is \d+ bytes long.*move the store to a shorter path/);
  });

  it('an empty argument or option value (an unset shell variable) is a usage error, never the current directory', () => {
    const before = entries();
    for (const args of [['init', ''], ['init', '', '--json'], ['scan', '--store', ''], ['attach', '--store', 'st', '--root', '', 'f'], ['attach', '--store', 'st', '--media-type=', 'f']]) {
      const r = cli(sb, args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(/^E_USAGE: (an argument is empty|--\S+ needs a value)/);
    }
    expect(entries()).toEqual(before);
    expect(existsSync(join(sb.home, '.knowledge', 'registry.json'))).toBe(false);
  });

  it('no command at all is a usage error on stderr, as every other', () => {
    const r = cli(sb, []);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^E_USAGE: a command is needed\nusage:/);
  });

  it('an argument that is not UTF-8 is refused, not replaced by U+FFFD (which would name another path)', () => {
    const before = entries();
    const r = spawnSync('/bin/sh', ['-c', `exec "${process.execPath}" "${cliPath}" init "$(printf 'st-\\376')" --json`], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(2);
    // One line, then the usage, as every usage error (README: "E_USAGE: and the usage").
    expect(r.stderr).toMatch(/^E_USAGE: argument 2 is not valid UTF-8[^\n]*\nusage:\n {2}knowledge init DIR/);
    expect(r.stdout).toBe('');
    expect(entries()).toEqual(before);
    // U+FFFD itself, given as UTF-8, is an ordinary character.
    expect(cli(sb, ['init', 'st-\uFFFD']).code).toBe(0);
  });

  it('a path in the environment (KNOWLEDGE_HOME, HOME, KNOWLEDGE_STORE, KNOWLEDGE_GIT) that is not UTF-8 is refused as an argument is, not replaced by U+FFFD', () => {
    const before = entries();
    /** `knowledge ARGS` with the shell assignments `assign` (printf escapes make the bytes). */
    const withEnv = (assign: string, args: string) =>
      spawnSync('/bin/sh', ['-c', `${assign} exec "${process.execPath}" "${cliPath}" ${args}`], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
    for (const [assign, name] of [
      [`KNOWLEDGE_HOME="$(printf '${sb.dir}/h\\351')";`, 'KNOWLEDGE_HOME'],
      [`unset KNOWLEDGE_HOME; HOME="$(printf '${sb.dir}/h\\351')";`, 'HOME'], // the registry's default
      [`KNOWLEDGE_STORE="$(printf 'st\\351')"; export KNOWLEDGE_STORE;`, 'KNOWLEDGE_STORE'],
      [`KNOWLEDGE_GIT="$(printf '/usr/bin/git\\351')"; export KNOWLEDGE_GIT;`, 'KNOWLEDGE_GIT'],
    ]) {
      const r = withEnv(assign!, name === 'KNOWLEDGE_STORE' ? 'scan' : 'init st');
      expect(r.status, `${name}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^E_USAGE: the environment variable ${name} is not valid UTF-8[^\\n]*\\nusage:\\n`));
      expect(r.stdout).toBe('');
    }
    expect(entries()).toEqual(before); // no registry at h\uFFFD, no store
    // HOME is not used when KNOWLEDGE_HOME is set (Git never gets it); U+FFFD given as UTF-8 is an ordinary character.
    const ok = withEnv(`HOME="$(printf '/nowhere\\351')"; KNOWLEDGE_HOME='${sb.dir}/h\uFFFD';`, 'init st');
    expect(ok.status, ok.stderr).toBe(0);
    expect(existsSync(join(sb.dir, 'h\uFFFD', 'registry.json'))).toBe(true);
    // Nor is KNOWLEDGE_STORE when --store is given.
    const listed = spawnSync('/bin/sh', ['-c', `KNOWLEDGE_HOME='${sb.dir}/h\uFFFD'; export KNOWLEDGE_HOME; KNOWLEDGE_STORE="$(printf 'st\\351')"; export KNOWLEDGE_STORE; exec "${process.execPath}" "${cliPath}" list --store st`], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
    expect(listed.status, listed.stderr).toBe(0);
  });

  it('a current directory deleted before the run: what needs it is E_UNAVAILABLE, writing nothing; absolute paths work', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const store = join(sb.dir, 'st');
    const records = () => JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout).records.length as number;
    /** `knowledge ARGS` started in a directory that is removed just before (as `cd g && rmdir ../g && knowledge …`). */
    const inDeletedDir = (args: string[]) => {
      const r = spawnSync('/bin/sh', ['-c', 'mkdir gone && cd gone && rmdir ../gone && exec "$0" "$@"', process.execPath, cliPath, ...args],
        { cwd: sb.dir, env: sb.env, encoding: 'utf8', input: '' });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const gone = /^E_UNAVAILABLE: the current directory no longer exists \(it was deleted or moved away\): [^\n]*\n$/;
    const before = entries();
    for (const args of [
      ['list', '--store', 'st'],
      ['publish', '--store', 'st', join(sb.dir, 'a.md')],
      ['publish', '--store', store, 'a.md'],
      ['init', 'st2'],
      ['attach', '--store', store, join(sb.dir, 'a.md')], // its default root is the current directory
      ['mcp', '--store', store, '--agent', 'a1'], // so is the root knowledge_attach_file accepts files from
      ['demo'], // its default folder is ./.knowledge-demo
    ]) {
      const r = inDeletedDir(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(gone);
    }
    expect(inDeletedDir(['attach', '--store', store, join(sb.dir, 'a.md')]).stderr).toMatch(/give --root DIR\n$/);
    expect(entries()).toEqual(before);
    expect(records()).toBe(0);
    // Absolute paths everywhere need no current directory.
    const published = inDeletedDir(['publish', '--store', store, join(sb.dir, 'a.md'), '--json']);
    expect(published.code, published.stderr).toBe(0);
    expect(records()).toBe(1);
    const attached = inDeletedDir(['attach', '--store', store, '--root', sb.dir, join(sb.dir, 'a.md'), '--json']);
    expect(attached.code, attached.stderr).toBe(0);
    expect(JSON.parse(attached.stdout).kind).toBe('attachment');
    const made = inDeletedDir(['init', join(sb.dir, 'st2')]);
    expect(made.code, made.stderr).toBe(0);
    expect(existsSync(join(sb.dir, 'st2', 'vault', 'vault.json'))).toBe(true);
  });

  it('a path that cannot be a store, or a vault that is a file or a link, is E_VALIDATION, with nothing created or registered', () => {
    writeFileSync(join(sb.dir, 'afile'), 'x');
    const under = cli(sb, ['init', 'afile/sub']);
    expect(under.code).toBe(1);
    expect(under.stderr).toMatch(/^E_VALIDATION: cannot create the store \S+afile\/sub: ENOTDIR/);
    mkdirSync(join(sb.dir, 'vf'));
    writeFileSync(join(sb.dir, 'vf', 'vault'), 'x');
    expect(cli(sb, ['init', 'vf']).stderr).toMatch(/^E_VALIDATION: \S+vf\/vault is not a directory$/m);
    for (const target of ['empty-dir', 'full-dir', 'nowhere']) {
      mkdirSync(join(sb.dir, `vl-${target}`));
      if (target !== 'nowhere') mkdirSync(join(sb.dir, target));
      if (target === 'full-dir') writeFileSync(join(sb.dir, target, 'note.md'), 'x');
      symlinkSync(join(sb.dir, target), join(sb.dir, `vl-${target}`, 'vault'));
      const r = cli(sb, ['init', `vl-${target}`]);
      expect(r.code, target).toBe(1);
      expect(r.stderr, target).toMatch(/^E_VALIDATION: \S+\/vault is a symbolic link; a vault must be a folder of its own/);
      expect(readdirSync(join(sb.dir, `vl-${target}`)), target).toEqual(['vault']);
    }
    expect(readdirSync(join(sb.dir, 'empty-dir'))).toEqual([]);
    expect(existsSync(join(sb.home, '.knowledge', 'registry.json'))).toBe(false);
  });

  it('a KNOWLEDGE_HOME that cannot hold the registry is refused before the store is created', () => {
    writeFileSync(join(sb.dir, 'home-file'), 'x');
    const r = cli(sb, ['init', 'st'], { env: { KNOWLEDGE_HOME: join(sb.dir, 'home-file') } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: cannot keep the registry in \S+home-file \(KNOWLEDGE_HOME\): it is not a directory/);
    expect(existsSync(join(sb.dir, 'st'))).toBe(false);
  });

  it('a KNOWLEDGE_HOME under a file is refused the same way (E_UNAVAILABLE), before the store is created', () => {
    writeFileSync(join(sb.dir, 'home-file'), 'x');
    const r = cli(sb, ['init', 'st'], { env: { KNOWLEDGE_HOME: join(sb.dir, 'home-file', 'kh') } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: cannot keep the registry in \S+home-file\/kh \(KNOWLEDGE_HOME\): ENOTDIR/);
    expect(existsSync(join(sb.dir, 'st'))).toBe(false);
  });

  it.skipIf(NO_UNPRIVILEGED)(`a KNOWLEDGE_HOME this user may not write is refused (E_UNAVAILABLE) before the store is created ${UNPRIVILEGED_NOTE}`, () => {
    const home = sb.env.KNOWLEDGE_HOME!;
    mkdirSync(home);
    const run = unprivilegedCli(sb, 'the unwritable-KNOWLEDGE_HOME init test')!;
    chmodSync(home, 0o555);
    try {
      const r = run(['init', 'st', '--json']);
      expect(r.code, r.stdout).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^E_UNAVAILABLE: cannot keep the registry in ${home} \\(KNOWLEDGE_HOME\\): EACCES .*; set KNOWLEDGE_HOME to a folder this user can write\n$`));
      expect(readdirSync(home)).toEqual([]);
    } finally {
      chmodSync(home, 0o755);
    }
    expect(existsSync(join(sb.dir, 'st'))).toBe(false);
  });

  it.skipIf(!canMount)('a KNOWLEDGE_HOME on a read-only mount is refused (E_UNAVAILABLE) before the store is created, for root too', () => {
    mkdirSync(sb.env.KNOWLEDGE_HOME!);
    const k = `${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath)}`;
    const read = runUnshared(sb, [
      'set -u',
      `mount --bind "$KNOWLEDGE_HOME" "$KNOWLEDGE_HOME" && mount -o remount,bind,ro "$KNOWLEDGE_HOME" || exit 90`,
      `${k} init st >out 2>err; echo $? >code`,
      'exit 0',
    ]);
    expect(read('code').trim()).toBe('1');
    expect(read('err')).toMatch(/^E_UNAVAILABLE: cannot keep the registry in \S+ \(KNOWLEDGE_HOME\): EROFS /);
    expect(existsSync(join(sb.dir, 'st'))).toBe(false);
    expect(readdirSync(sb.env.KNOWLEDGE_HOME!)).toEqual([]);
  });

  it('init of a store whose state.sqlite is damaged says so instead of "exists"', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    for (const f of ['state.sqlite', 'state.sqlite-wal', 'state.sqlite-shm']) rmSync(join(sb.dir, 'st', f), { force: true });
    mkdirSync(join(sb.dir, 'st', 'state.sqlite'));
    const r = cli(sb, ['init', 'st', '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: store \S+ is damaged: its state.sqlite cannot be opened/);
  });

  it.skipIf(!canMount)('a store on a full disk is E_IO saying so, for reads too: not "unavailable", which sends people looking for a lost file', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const k = `${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath)}`;
    const read = runUnshared(sb, [
      'set -u',
      'mkdir m && mount -t tmpfs -o size=2m tmpfs m || exit 90',
      'cp -a st m/st || exit 91',
      'rm -f m/st/state.sqlite-wal m/st/state.sqlite-shm',
      'dd if=/dev/zero of=m/fill bs=4k >/dev/null 2>&1',
      `${k} list --store m/st >out 2>err; echo $? >code`,
      'rm m/fill',
      `${k} list --store m/st --json >out2 2>err2; echo $? >code2`,
      'exit 0',
    ]);
    expect(read('code').trim()).toBe('1');
    expect(read('err')).toMatch(/^E_IO: state.sqlite of \S+ cannot be opened: .*\(the disk is full: free space, then retry\)\n$/);
    expect(read('code2').trim(), read('err2')).toBe('0');
    expect(JSON.parse(read('out2')).records).toEqual([]);
  });

  it('a malformed number in the environment is named (E_VALIDATION), not taken for Git being unavailable', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--store', 'st', 'a.md', '--json'], { env: { KNOWLEDGE_GIT_TIMEOUT_MS: '30s' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_VALIDATION: KNOWLEDGE_GIT_TIMEOUT_MS must be a whole number from 1 to 2147483647, got "30s"/);
    // Past what a timer can hold, Node would fire it at once: every Git call would "time out".
    expect(cli(sb, ['publish', '--store', 'st', 'a.md'], { env: { KNOWLEDGE_GIT_TIMEOUT_MS: '99999999999' } }).stderr).toMatch(/^E_VALIDATION: KNOWLEDGE_GIT_TIMEOUT_MS must be a whole number from 1 to 2147483647/);
    expect(JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout).records).toEqual([]);
    expect(cli(sb, ['publish', '--store', 'st', 'a.md'], { env: { KNOWLEDGE_GIT_TIMEOUT_MS: '30000' } }).code).toBe(0);
  });

  it('a record on standard input is read only up to its limit: more is E_TOO_LARGE', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const big = cli(sb, ['publish', '--store', 'st', '-'], { input: page + 'x'.repeat(1024 * 1024) });
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(/^E_TOO_LARGE: record: standard input is more than 1048576 bytes/);
    const ok = cli(sb, ['publish', '--store', 'st', '-', '--json'], { input: page });
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).records).toHaveLength(1);
  });
});

describe('[LAY-1] a store created with 4 KiB SQLite pages (before 16 KiB became the default)', () => {
  it('keeps its page size and works: init again, publish, scan, search', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const file = join(sb.dir, 'st', 'state.sqlite');
    const old = new Database(file);
    old.pragma('journal_mode = DELETE');
    old.pragma('page_size = 4096');
    old.exec('VACUUM');
    old.pragma('journal_mode = WAL');
    expect(old.pragma('page_size', { simple: true })).toBe(4096);
    old.close();
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    writeFileSync(join(sb.dir, 'a.md'), '---\nkind: page\ntitle: Old pages\n---\nA body about parsnips.\n');
    const pub = cli(sb, ['publish', '--store', 'st', 'a.md', '--json']);
    expect(pub.code, pub.stderr).toBe(0);
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    const found = cli(sb, ['search', '--store', 'st', 'parsnips', '--json']);
    expect(found.code, found.stderr).toBe(0);
    expect(JSON.stringify(JSON.parse(found.stdout))).toContain('Old pages');
    const db = new Database(file, { readonly: true });
    expect(db.pragma('page_size', { simple: true })).toBe(4096);
    db.close();
  });
});

describe('[LAY-2] registry settings: --read-only', () => {
  it('refuses every write with E_READ_ONLY and still serves reads', () => {
    cli(sb, ['init', 'st', '--read-only']);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--store', 'st', 'a.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_READ_ONLY: /);
    // It says where the setting lives.
    expect(r.stderr).toContain(`writesEnabled: false in ${join(sb.home, '.knowledge', 'registry.json')}; set it to true there to allow writes`);
    expect(existsSync(join(sb.dir, 'st/vault/private'))).toBe(false);
    const act = cli(sb, ['activity', '--store', 'st', '--json']);
    expect(act.code).toBe(0);
    expect(JSON.parse(act.stdout)).toEqual([]);
  });

  it('holds whatever path reaches the store: a symbolic link to it is read-only too', () => {
    cli(sb, ['init', 'st', '--read-only']);
    symlinkSync(join(sb.dir, 'st'), join(sb.dir, 'link'));
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--store', 'link', 'a.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_READ_ONLY: /);
    expect(existsSync(join(sb.dir, 'st/vault/private'))).toBe(false);
  });

  it('follows the store when it is moved: still read-only at its new path, the error names the entry, and init there registers it read-only', () => {
    cli(sb, ['init', 'st']);
    const file = join(sb.home, '.knowledge', 'registry.json');
    const reg = JSON.parse(readFileSync(file, 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
    reg.stores[join(sb.dir, 'st')]!.writesEnabled = false;
    writeFileSync(file, JSON.stringify(reg));
    renameSync(join(sb.dir, 'st'), join(sb.dir, 'moved'));
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--store', 'moved', 'a.md']);
    expect(r.stderr).toMatch(/^E_READ_ONLY: /);
    expect(r.stderr).toContain(`writesEnabled: false in ${file}, under ${JSON.stringify(join(sb.dir, 'st'))}: the same store`);
    const init = cli(sb, ['init', 'moved', '--json']);
    expect(init.code, init.stderr).toBe(0);
    expect(JSON.parse(init.stdout)).toMatchObject({ created: false, writesEnabled: false });
    expect(JSON.parse(readFileSync(file, 'utf8')).stores[join(sb.dir, 'moved')]).toMatchObject({ writesEnabled: false });
    const again = cli(sb, ['publish', '--store', 'moved', 'a.md']);
    expect(again.stderr).toMatch(/^E_READ_ONLY: /);
    expect(existsSync(join(sb.dir, 'moved/vault/private'))).toBe(false);
  });

  it('init by the real path of a store set read-only under a path through a symbolic link registers it read-only too', () => {
    mkdirSync(join(sb.dir, 'real'));
    symlinkSync(join(sb.dir, 'real'), join(sb.dir, 'link'));
    cli(sb, ['init', 'link/st']);
    const file = join(sb.home, '.knowledge', 'registry.json');
    const reg = JSON.parse(readFileSync(file, 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
    reg.stores[join(sb.dir, 'link', 'st')]!.writesEnabled = false;
    writeFileSync(file, JSON.stringify(reg));
    const init = cli(sb, ['init', 'real/st', '--json']);
    expect(JSON.parse(init.stdout)).toMatchObject({ created: false, writesEnabled: false });
    writeFileSync(join(sb.dir, 'a.md'), page);
    expect(cli(sb, ['publish', '--store', 'real/st', 'a.md']).stderr).toMatch(/^E_READ_ONLY: /);
  });
});

describe('[LAY-2] read-only at every path of a vault id, whichever entry says so', () => {
  it('a store registered writable at its real path and then set read-only at a linked path refuses writes at both, as does a copy', () => {
    mkdirSync(join(sb.dir, 'real'));
    symlinkSync(join(sb.dir, 'real'), join(sb.dir, 'link'));
    expect(cli(sb, ['init', 'real/st']).code).toBe(0);
    expect(cli(sb, ['init', 'link/st']).code).toBe(0);
    const file = join(sb.home, '.knowledge', 'registry.json');
    const reg = JSON.parse(readFileSync(file, 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
    expect(Object.keys(reg.stores)).toEqual(expect.arrayContaining([join(sb.dir, 'real', 'st'), join(sb.dir, 'link', 'st')]));
    cpSync(join(sb.dir, 'real', 'st'), join(sb.dir, 'copy'), { recursive: true });
    expect(cli(sb, ['init', 'copy']).code).toBe(0);
    reg.stores = JSON.parse(readFileSync(file, 'utf8')).stores;
    reg.stores[join(sb.dir, 'link', 'st')]!.writesEnabled = false;
    writeFileSync(file, JSON.stringify(reg));
    writeFileSync(join(sb.dir, 'a.md'), page);
    for (const at of ['link/st', 'real/st', 'copy']) {
      const r = cli(sb, ['publish', '--store', at, 'a.md']);
      expect(r.stderr, at).toMatch(/^E_READ_ONLY: /);
      // Another path's entry is named (this path's own is where the message says to look).
      if (at !== 'link/st') expect(r.stderr, at).toContain(`under ${JSON.stringify(join(sb.dir, 'link', 'st'))}: the same store`);
    }
    expect(existsSync(join(sb.dir, 'real/st/vault/private'))).toBe(false);
    expect(existsSync(join(sb.dir, 'copy/vault/private'))).toBe(false);
  });
});

describe('[LAY-2] the registry changed by several processes at once', () => {
  function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<number | null> {
    return new Promise((done) => {
      const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: { ...sb.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
      child.on('close', done);
    });
  }

  it('every init and every agent launch keeps its entry: no store created read-only becomes writable, no agent unbound', async () => {
    expect(cli(sb, ['init', 'shared']).code).toBe(0);
    const n = 10;
    const codes = await Promise.all([
      ...Array.from({ length: n }, (_, i) => run(['init', `ro${i}`, '--read-only'])),
      // An MCP server binds its agent when it starts; with no client (stdin closed) it then ends.
      ...Array.from({ length: n }, (_, i) => run(['mcp', '--store', 'shared', '--agent', `racer${i}`])),
    ]);
    expect(codes.slice(0, n)).toEqual(Array(n).fill(0));
    const reg = JSON.parse(readFileSync(join(sb.home, '.knowledge', 'registry.json'), 'utf8')) as { stores: Record<string, { writesEnabled: boolean }>; agents: Record<string, { store: string }> };
    for (let i = 0; i < n; i++) {
      expect(reg.stores[join(sb.dir, `ro${i}`)], `ro${i}`).toMatchObject({ writesEnabled: false });
      expect(reg.agents[`racer${i}`], `racer${i}`).toEqual({ store: join(sb.dir, 'shared') });
    }
    expect(existsSync(join(sb.home, '.knowledge', 'registry.json.lock'))).toBe(false);
    writeFileSync(join(sb.dir, 'a.md'), page);
    for (let i = 0; i < n; i++) expect(cli(sb, ['publish', '--store', `ro${i}`, 'a.md']).stderr, `ro${i}`).toMatch(/^E_READ_ONLY: /);
  });

  it('a lock left by a process killed while changing the registry does not block the next change', () => {
    expect(cli(sb, ['init', 'one']).code).toBe(0);
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(join(sb.home, '.knowledge', 'registry.json.lock'), `${gone} -\n`);
    // Its staging files too (its lock's marker, its new registry.json before the rename); a live process's stay.
    for (const name of [`.registry.json.lock.${gone}.00aa11bb22cc.tmp`, `.registry.json.${gone}.33dd44ee55ff.tmp`, `.registry.json.lock.${process.pid}.66aa77bb88cc.tmp`]) {
      writeFileSync(join(sb.home, '.knowledge', name), 'x');
    }
    expect(cli(sb, ['init', 'two', '--read-only']).code).toBe(0);
    expect(readdirSync(join(sb.home, '.knowledge')).filter((n) => n.endsWith('.tmp'))).toEqual([`.registry.json.lock.${process.pid}.66aa77bb88cc.tmp`]);
    const reg = JSON.parse(readFileSync(join(sb.home, '.knowledge', 'registry.json'), 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
    expect(Object.keys(reg.stores).sort()).toEqual([join(sb.dir, 'one'), join(sb.dir, 'two')]);
    expect(existsSync(join(sb.home, '.knowledge', 'registry.json.lock'))).toBe(false);
  });
});

describe('[LAY-2] where the registry is: KNOWLEDGE_HOME, else HOME/.knowledge', () => {
  // Running as a uid without a passwd entry needs root (and setpriv), and such a uid.
  const noHomeSkip = process.getuid?.() !== 0 ? 'not root' : NO_UNPRIVILEGED ? 'no setpriv' : spawnSync('getent', ['passwd', '12345']).status === 0 ? 'uid 12345 has a passwd entry here' : null;
  if (noHomeSkip) console.log(`store.test.ts: skipping the no-home test: ${noHomeSkip}`);
  it.skipIf(noHomeSkip !== null)(`no HOME and a uid without a passwd entry: E_UNAVAILABLE naming HOME and KNOWLEDGE_HOME${noHomeSkip ? ` (SKIPPED: ${noHomeSkip})` : ''}`, () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const run = unprivilegedCli(sb, 'the no-home test', 12345)!;
    for (const args of [['list', '--store', 'st'], ['init', 'other']]) {
      const r = run(args, { cleanEnv: true, env: { PATH: process.env.PATH } });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/^E_UNAVAILABLE: no place for the registry: KNOWLEDGE_HOME and HOME are unset \(or empty\), and uid 12345 has no home directory in the user database; set KNOWLEDGE_HOME \(or HOME\) to an absolute path\n$/);
    }
    expect(existsSync(join(sb.dir, 'other'))).toBe(false);
  });

  it('a relative HOME or KNOWLEDGE_HOME is refused (E_VALIDATION) before anything is written, never taken from the working directory', () => {
    const before = readdirSync(sb.dir).sort();
    for (const env of [{ HOME: 'rel', KNOWLEDGE_HOME: undefined }, { KNOWLEDGE_HOME: 'kh' }]) {
      const r = cli(sb, ['init', 'st'], { env });
      expect(r.code, JSON.stringify(env)).toBe(1);
      expect(r.stderr, JSON.stringify(env)).toMatch(/^E_VALIDATION: (HOME|KNOWLEDGE_HOME)\b.* must be an absolute path, got "(rel|kh)"/);
    }
    expect(readdirSync(sb.dir).sort()).toEqual(before);
  });
});

describe('[LAY-2] a registry that cannot be read is never taken for none', () => {
  it.skipIf(NO_UNPRIVILEGED)(`a KNOWLEDGE_HOME that may not be searched (EACCES): writes are E_UNAVAILABLE, so a store set read-only there stays read-only; reads go on ${UNPRIVILEGED_NOTE}`, () => {
    // Made read-only in the registry (the operator's edit; the store itself was created writable).
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const home = sb.env.KNOWLEDGE_HOME!;
    const reg = JSON.parse(readFileSync(join(home, 'registry.json'), 'utf8')) as { stores: Record<string, { writesEnabled: boolean }> };
    reg.stores[join(sb.dir, 'st')]!.writesEnabled = false;
    writeFileSync(join(home, 'registry.json'), JSON.stringify(reg));
    writeFileSync(join(sb.dir, 'a.md'), page);
    expect(cli(sb, ['publish', '--store', 'st', 'a.md']).stderr).toMatch(/^E_READ_ONLY: /);
    const run = unprivilegedCli(sb, 'the unsearchable-registry test')!;
    // Root's folder of mode 700 as another user sees it; for the owner itself, readable but not searchable.
    chmodSync(home, process.getuid?.() === 0 ? 0o700 : 0o600);
    try {
      const pub = run(['publish', '--store', 'st', 'a.md', '--json']);
      expect(pub.code, pub.stdout).toBe(1);
      expect(pub.stderr).toMatch(new RegExp(`^E_UNAVAILABLE: registry ${home}/registry\\.json is unreadable: EACCES`));
      // Reading opens the store by its path with the settings it keeps (as before the registry existed for it).
      const list = run(['list', '--store', 'st', '--json']);
      expect(list.code, list.stderr).toBe(0);
      expect(JSON.parse(list.stdout)).toMatchObject({ total: 0 });
    } finally {
      chmodSync(home, 0o755);
    }
    expect(existsSync(join(sb.dir, 'st/vault/private'))).toBe(false);
    expect(existsSync(join(sb.dir, 'st/vault/.git'))).toBe(false);
  });
});

describe('[LAY-2] a store created read-only, reached through a registry that does not list it', () => {
  it('stays read-only (the store remembers how it was created); init there registers it as it is', () => {
    expect(cli(sb, ['init', 'st', '--read-only']).code).toBe(0);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const elsewhere = { KNOWLEDGE_HOME: join(sb.dir, 'other-home') };
    const r = cli(sb, ['publish', '--store', 'st', 'a.md'], { env: elsewhere });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_READ_ONLY: .*created with --read-only, and .*other-home\/registry\.json does not list it/);
    expect(existsSync(join(sb.dir, 'st/vault/private'))).toBe(false);
    expect(existsSync(join(sb.dir, 'st/vault/.git'))).toBe(false);
    // `init` without --read-only does not make it writable either: an existing store keeps its setting.
    const init = cli(sb, ['init', 'st', '--json'], { env: elsewhere });
    expect(JSON.parse(init.stdout)).toMatchObject({ created: false, writesEnabled: false });
    expect(cli(sb, ['publish', '--store', 'st', 'a.md'], { env: elsewhere }).stderr).toMatch(/^E_READ_ONLY: .*writesEnabled: false in/);
    // A store created writable is writable from any registry.
    expect(cli(sb, ['init', 'rw']).code).toBe(0);
    expect(cli(sb, ['publish', '--store', 'rw', 'a.md'], { env: elsewhere }).code).toBe(0);
  });
});

describe('[LAY-3] a store that lost a part is unavailable, never recreated', () => {
  for (const [what, rel] of [['vault directory', 'vault'], ['manifest', 'vault/vault.json'], ['database', 'state.sqlite']] as const) {
    it(`missing ${what}: E_UNAVAILABLE for writes and reads, nothing recreated`, () => {
      cli(sb, ['init', 'st']);
      rmSync(join(sb.dir, 'st', rel), { recursive: true, force: true });
      writeFileSync(join(sb.dir, 'a.md'), page);
      const w = cli(sb, ['publish', '--store', 'st', 'a.md']);
      expect(w.code).toBe(1);
      expect(w.stderr).toMatch(/^E_UNAVAILABLE: /);
      const r = cli(sb, ['activity', '--store', 'st']);
      expect(r.stderr).toMatch(/^E_UNAVAILABLE: /);
      const i = cli(sb, ['init', 'st']);
      expect(i.code).toBe(1);
      expect(i.stderr).toMatch(/^E_UNAVAILABLE: /);
      expect(existsSync(join(sb.dir, 'st', rel))).toBe(false);
    });
  }

  it('an init cut short after drawing its id (killed before its manifest) is finished by the next init, as it was asked', () => {
    const killed = cli(sb, ['init', 'st', '--read-only'], { env: { KNOWLEDGE_CRASH_AT: 'init-before-manifest' } });
    expect(killed.stderr).toMatch(/signal SIGKILL/);
    expect(existsSync(join(sb.dir, 'st', 'state.sqlite'))).toBe(true);
    expect(existsSync(join(sb.dir, 'st', 'vault', 'vault.json'))).toBe(false);
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'), { readonly: true });
    const drawn = db.prepare("SELECT value FROM meta WHERE key = 'vault_id'").pluck().get();
    db.close();
    // Not "incomplete, refusing to recreate it": it never was a store anyone used.
    const again = cli(sb, ['init', 'st', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ created: true, vaultId: drawn, writesEnabled: false });
    expect(JSON.parse(readFileSync(join(sb.dir, 'st', 'vault', 'vault.json'), 'utf8')).vaultId).toBe(drawn);
    expect(cli(sb, ['list', '--store', 'st', '--json']).code).toBe(0);
    // Complete now: losing its manifest again is [LAY-3]'s case, refused.
    rmSync(join(sb.dir, 'st', 'vault', 'vault.json'));
    expect(cli(sb, ['init', 'st']).stderr).toMatch(/^E_UNAVAILABLE: store .* is incomplete/);
  });

  it('a state.sqlite that is not Knowledge\'s (another program\'s database) is never touched by init', () => {
    mkdirSync(join(sb.dir, 'proj'));
    const theirs = new Database(join(sb.dir, 'proj', 'state.sqlite'));
    theirs.exec("CREATE TABLE important(x); INSERT INTO important VALUES ('keep me')");
    theirs.close();
    const r = cli(sb, ['init', 'proj']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: store .* is incomplete/);
    const after = new Database(join(sb.dir, 'proj', 'state.sqlite'), { readonly: true });
    expect(after.prepare('SELECT x FROM important').pluck().all()).toEqual(['keep me']);
    after.close();
  });

  it('a lost state.sqlite (vault and history there): every command says how to go on, and following it gives a store whose scan finds the history already holds the files', () => {
    cli(sb, ['init', 'st']);
    writeFileSync(join(sb.dir, 'a.md'), page);
    expect(cli(sb, ['publish', '--store', 'st', 'a.md']).code).toBe(0);
    rmSync(join(sb.dir, 'st', 'state.sqlite'));
    const registry = join(sb.home, '.knowledge', 'registry.json');
    const manifest = join(sb.dir, 'st', 'vault', 'vault.json');
    const hint = `restore state.sqlite from a backup taken together with this vault; without one, a new state for these files (their Git history kept; receipts, activity and the journal of earlier requests lost) is made by removing ${manifest} and this store's entry from ${registry}, then knowledge init ${join(sb.dir, 'st')}`;
    const scan = cli(sb, ['scan', '--store', 'st']);
    expect(scan.stderr.trim()).toBe(`E_UNAVAILABLE: store ${join(sb.dir, 'st')} is unavailable: missing state.sqlite; it is not recreated [LAY-3]: ${hint}`);
    const init = cli(sb, ['init', 'st']);
    expect(init.stderr.trim()).toBe(`E_UNAVAILABLE: store ${join(sb.dir, 'st')} is incomplete (missing state.sqlite); refusing to recreate it [LAY-3]: ${hint}`);
    expect(existsSync(join(sb.dir, 'st', 'state.sqlite'))).toBe(false);
    rmSync(manifest);
    const reg = JSON.parse(readFileSync(registry, 'utf8'));
    delete reg.stores[join(sb.dir, 'st')];
    writeFileSync(registry, JSON.stringify(reg));
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const again = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ baseline: true, added: [expect.stringMatching(/^private\/pages\//)], git: null });
    // Nothing committed again: the history already holds the file; the next publication goes on from it.
    expect(userGit(sb, join(sb.dir, 'st', 'vault'), ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
    writeFileSync(join(sb.dir, 'b.md'), page.replace(/title: .*/, 'title: After'));
    expect(cli(sb, ['publish', '--store', 'st', 'b.md']).code).toBe(0);
    expect(userGit(sb, join(sb.dir, 'st', 'vault'), ['rev-list', '--count', 'HEAD']).trim()).toBe('2');
  });

  it('a clone of a vault\'s repository taken for a store: the error says it is a vault, init refuses to nest a store in it, and the way it names works', () => {
    cli(sb, ['init', 'st']);
    writeFileSync(join(sb.dir, 'a.md'), page);
    expect(cli(sb, ['publish', '--store', 'st', 'a.md']).code).toBe(0);
    const clone = join(sb.dir, 'kb');
    expect(spawnSync('git', ['clone', '-q', join(sb.dir, 'st', 'vault'), clone], { env: sb.env }).status).toBe(0);
    const vaultHint = `it looks like a vault itself (a clone or copy of one: a Git repository holding a partition's pages/, claims/, relationships/ or evidence/ under private/ or conversations/); a store is the folder that holds a vault as vault/ beside its state.sqlite: to use this one, move it into a new folder as vault/ (mkdir STORE && mv ${clone} STORE/vault) and run knowledge init STORE`;
    const scan = cli(sb, ['scan', '--store', 'kb']);
    expect(scan.stderr).toContain(`E_UNAVAILABLE: no store at ${clone}: ${vaultHint}`);
    const init = cli(sb, ['init', 'kb']);
    expect(init.code).toBe(1);
    expect(init.stderr).toContain(`E_VALIDATION: ${clone} is not a store: ${vaultHint}`);
    expect(readdirSync(clone).sort()).toEqual(['.git', 'private']);
    // A repository that only has folders of those names is no vault: a store may be made there.
    const chats = join(sb.dir, 'chats');
    mkdirSync(join(chats, 'conversations', 'notes'), { recursive: true });
    mkdirSync(join(chats, 'private'));
    expect(spawnSync('git', ['init', '-q', chats], { env: sb.env }).status).toBe(0);
    expect(cli(sb, ['init', 'chats']).code).toBe(0);
    mkdirSync(join(sb.dir, 'st2'));
    renameSync(clone, join(sb.dir, 'st2', 'vault'));
    expect(cli(sb, ['init', 'st2']).code).toBe(0);
    const adopted = cli(sb, ['scan', '--store', 'st2', '--json']);
    expect(JSON.parse(adopted.stdout)).toMatchObject({ baseline: true, added: [expect.stringMatching(/^private\/pages\//)], git: null });
    expect(userGit(sb, join(sb.dir, 'st2', 'vault'), ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
  });

  it('a store removed as a whole is not recreated either; init says how to forget it on purpose', () => {
    cli(sb, ['init', 'st']);
    rmSync(join(sb.dir, 'st'), { recursive: true });
    const registry = join(sb.home, '.knowledge', 'registry.json');
    const i = cli(sb, ['init', 'st']);
    expect(i.code).toBe(1);
    expect(i.stderr.trim()).toMatch(new RegExp(`^E_UNAVAILABLE: store .* is incomplete .*\\[LAY-3\\]; if you removed it on purpose, remove its entry from ${registry} first$`));
    expect(existsSync(join(sb.dir, 'st'))).toBe(false);
    // Once its entry is gone, init creates a new store there.
    const reg = JSON.parse(readFileSync(registry, 'utf8'));
    delete reg.stores[join(sb.dir, 'st')];
    writeFileSync(registry, JSON.stringify(reg));
    expect(cli(sb, ['init', 'st']).code).toBe(0);
  });

  it('[LAY-3] a state.sqlite of another store put in place of its own: E_UNAVAILABLE for writes and reads, nothing written to the vault', () => {
    expect(cli(sb, ['init', 'a']).code).toBe(0);
    expect(cli(sb, ['init', 'b']).code).toBe(0);
    // B's database, checkpointed (its WAL folded in) so the one file holds all of it; A's WAL and shm go too.
    const bdb = new Database(join(sb.dir, 'b', 'state.sqlite'));
    bdb.pragma('wal_checkpoint(TRUNCATE)');
    bdb.close();
    for (const suffix of ['', '-wal', '-shm']) {
      rmSync(join(sb.dir, 'a', `state.sqlite${suffix}`), { force: true });
      if (existsSync(join(sb.dir, 'b', `state.sqlite${suffix}`))) copyFileSync(join(sb.dir, 'b', `state.sqlite${suffix}`), join(sb.dir, 'a', `state.sqlite${suffix}`));
    }
    const vaultA = join(sb.dir, 'a', 'vault');
    const snapshot = () => readdirSync(vaultA, { recursive: true, withFileTypes: true })
      .map((e) => { const p = join(e.parentPath, e.name); return `${p}:${e.isFile() ? readFileSync(p, 'base64') : 'dir'}`; })
      .sort();
    const before = snapshot();
    const idA = JSON.parse(readFileSync(join(vaultA, 'vault.json'), 'utf8')).vaultId as string;
    writeFileSync(join(sb.dir, 'a.md'), page);
    const w = cli(sb, ['publish', '--store', 'a', 'a.md']);
    expect(w.code, w.stdout).toBe(1);
    expect(w.stderr.trim()).toMatch(new RegExp(`^E_UNAVAILABLE: store .*: vault.json \\(${idA}\\) does not belong to state.sqlite`));
    const r = cli(sb, ['activity', '--store', 'a']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr.trim()).toMatch(/^E_UNAVAILABLE: .* does not belong to state.sqlite/);
    expect(snapshot()).toEqual(before);
  });

  it('a directory that never was a store is unavailable with a hint to init', () => {
    const r = cli(sb, ['activity', '--store', 'nowhere']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_UNAVAILABLE: no store .*knowledge init/);
    expect(existsSync(join(sb.dir, 'nowhere'))).toBe(false);
  });

  it('--store pointed at a vault (or a folder in it) names the store it belongs to, and init refuses to nest a store there', () => {
    expect(cli(sb, ['init', 'st']).code).toBe(0);
    const store = join(sb.dir, 'st');
    for (const dir of ['st/vault', 'st/vault/private/notes']) {
      const r = cli(sb, ['scan', '--store', dir]);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`E_UNAVAILABLE: no store at ${join(sb.dir, dir)}: it is inside the vault of the store ${store} (use --store ${store})`);
      const i = cli(sb, ['init', dir]);
      expect(i.code).toBe(1);
      expect(i.stderr).toMatch(new RegExp(`^E_VALIDATION: .* is inside the vault of the store ${store}: a store keeps its state.sqlite outside its vault`));
    }
    // Nothing was created inside the vault, and the store works as before.
    expect(existsSync(join(sb.dir, 'st/vault/state.sqlite'))).toBe(false);
    expect(existsSync(join(sb.dir, 'st/vault/vault'))).toBe(false);
    expect(existsSync(join(sb.dir, 'st/vault/private'))).toBe(false);
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    // A folder merely named vault, with no store around it, can still hold a new store.
    expect(cli(sb, ['init', 'other/vault']).code).toBe(0);
  });
});

describe('[LAY-4] one writer per store', () => {
  /** A real child process that opens the store as its writer and stays alive; resolves once it holds the lock. */
  async function lockHolder() {
    const holderScript = `
      import('${join(cliPath, '..', '..', 'dist', 'store', 'store.js')}').then((m) => {
        m.openStore(${JSON.stringify(join(sb.dir, 'st'))}, { write: true, command: 'test-holder' });
        process.stdout.write('held\\n');
        setInterval(() => {}, 1000);
      });`;
    const holder = spawn(process.execPath, ['--input-type=module', '-e', holderScript], { env: sb.env, stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((res) => holder.stdout!.once('data', () => res()));
    return holder;
  }

  it('a second writing process gets E_LOCKED naming the holder; a dead holder does not block', async () => {
    cli(sb, ['init', 'st']);
    const holder = await lockHolder();
    writeFileSync(join(sb.dir, 'a.md'), page);
    const r = cli(sb, ['publish', '--store', 'st', 'a.md']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^E_LOCKED: store is in use by pid ${holder.pid} .*test-holder`));
    holder.kill('SIGKILL');
    await new Promise((res) => holder.once('exit', res));
    const again = cli(sb, ['publish', '--store', 'st', 'a.md', '--json']);
    expect(again.code, again.stderr).toBe(0);
  });

  it('a holder is alive while its process holds an OS file lock: a crashed one under another host name (a restarted container) does not block, a live one blocks whatever its record says', async () => {
    cli(sb, ['init', 'st']);
    writeFileSync(join(sb.dir, 'a.md'), page);
    const forge = (host: string, pid: number, ticks: string | null) => {
      const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
      try {
        db.prepare(`INSERT INTO writer_lock(id, pid, start_ticks, host, command, acquired_at) VALUES (1, ?, ?, ?, 'knowledge serve', '2026-01-01T00:00:00.000Z')
          ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, start_ticks = excluded.start_ticks, host = excluded.host`).run(pid, ticks, host);
      } finally {
        db.close();
      }
    };
    // A Gateway killed in a container whose host name was container-a; this one is another.
    forge('container-a', 1, null);
    const afterCrash = cli(sb, ['publish', '--store', 'st', 'a.md', '--json']);
    expect(afterCrash.code, afterCrash.stderr).toBe(0);
    // A record naming a live process on this host that holds no file lock: a writer whose writer.lock was deleted
    // under it (this test's own process stands in). It still blocks; once it is gone, it does not.
    forge(hostname(), process.pid, processStartTicks(process.pid));
    expect(cli(sb, ['scan', '--store', 'st']).stderr).toMatch(new RegExp(`^E_LOCKED: store is in use by pid ${process.pid} on `));
    forge(hostname(), process.pid, '1');
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
    // And a live holder blocks whatever its record is made to say.
    const holder = await lockHolder();
    try {
      forge('container-a', 1, null);
      const blocked = cli(sb, ['scan', '--store', 'st']);
      expect(blocked.code).toBe(1);
      expect(blocked.stderr).toMatch(/^E_LOCKED: store is in use by /);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((res) => holder.once('exit', res));
    }
    const free = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(free.code, free.stderr).toBe(0);
  });

  it('an open as writer that fails after taking the lock keeps nothing: no handle on writer.lock or state.sqlite, no lock row', () => {
    cli(sb, ['init', 'st']);
    const staging = join(sb.dir, 'st', 'vault', '.knowledge-history', 'staging');
    rmSync(staging, { recursive: true, force: true });
    writeFileSync(staging, 'a file where the staging folder goes\n');
    const held = () => readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return /\/st\/(writer\.lock|state\.sqlite)/.test(readlinkSync(`/proc/self/fd/${fd}`));
      } catch {
        return false;
      }
    }).length;
    const before = held();
    for (let i = 0; i < 3; i++) expect(() => openStore(join(sb.dir, 'st'), { write: true, env: sb.env })).toThrow();
    expect(held()).toBe(before);
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'), { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) AS n FROM writer_lock').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });

  it('where writer.lock cannot be used, the record alone decides: another host\'s holder counts as alive', () => {
    cli(sb, ['init', 'st']);
    mkdirSync(join(sb.dir, 'st', 'writer.lock')); // a folder where the lock file goes: no OS lock can be taken
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
    try {
      db.prepare("INSERT INTO writer_lock(id, pid, start_ticks, host, command, acquired_at) VALUES (1, 1, NULL, 'other-host', 'knowledge serve', '2026-01-01T00:00:00.000Z')").run();
    } finally {
      db.close();
    }
    const blocked = cli(sb, ['scan', '--store', 'st']);
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toMatch(/^E_LOCKED: store is in use by pid 1 on other-host \(knowledge serve\)/);
    // Without the folder, the file lock says that holder is gone.
    rmSync(join(sb.dir, 'st', 'writer.lock'), { recursive: true });
    expect(cli(sb, ['scan', '--store', 'st', '--json']).code).toBe(0);
  });
});

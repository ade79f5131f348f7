/**
 * CLI start-up cost (issue 4: a scan is a CLI process; `--help` should start
 * fast): each command loads only the modules it needs. A module-load hook
 * records every module a real `knowledge` process loads.
 */
import { describe, expect, it, afterEach } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cli, cliPath, storeSandbox, type Sandbox } from './helpers.js';

const sandboxes: Sandbox[] = [];
afterEach(() => {
  for (const sb of sandboxes.splice(0)) sb.cleanup();
});

function sandbox(): Sandbox {
  const { sb } = storeSandbox();
  sandboxes.push(sb);
  return sb;
}

/** The module URLs (outside node:) a `knowledge ARGS` process loads. */
function loadedModules(sb: Sandbox, args: string[]): { code: number | null; modules: string[]; stderr: string } {
  const hooks = join(sb.dir, 'hooks.mjs');
  const register = join(sb.dir, 'register.mjs');
  const log = join(sb.dir, 'loaded.log');
  writeFileSync(hooks, `import { appendFileSync } from 'node:fs';
export async function load(url, ctx, next) { if (!url.startsWith('node:')) appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, ctx); }
`);
  writeFileSync(register, `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  writeFileSync(log, '');
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(register).href, cliPath, ...args], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
  const modules = readFileSync(log, 'utf8').split('\n').filter(Boolean);
  return { code: r.status, modules, stderr: r.stderr };
}

describe('CLI start-up loads only what the command needs', () => {
  it('--help and usage errors load no store, service or SQLite', () => {
    const sb = sandbox();
    for (const args of [['--help'], ['scan'], ['scan', '--store', 'st', '--help']]) {
      const r = loadedModules(sb, args);
      expect(r.code, r.stderr).toBe(args.includes('--help') ? 0 : 2);
      expect(r.modules.some((m) => m.endsWith('/dist/cli/main.js'))).toBe(true);
      for (const heavy of ['/dist/service.js', '/dist/store/store.js', 'better-sqlite3', '/node_modules/yaml/', '/dist/cli/render-read.js']) {
        expect(r.modules.filter((m) => m.includes(heavy)), `${args.join(' ')} loads ${heavy}`).toEqual([]);
      }
    }
  });

  it('COMMAND --help (or -h) prints that command\'s usage and runs nothing', () => {
    const sb = sandbox();
    const r = cli(sb, ['scan', '--store', 'st', '--help']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('usage:\n  knowledge scan    --store DIR [--partition ID] [--json]\n--store may be replaced by KNOWLEDGE_STORE.\n');
    expect(existsSync(join(sb.dir, 'st/vault/.git'))).toBe(false); // no scan ran (it would have made the repository)
    expect(cli(sb, ['demo', '-h']).stdout).toBe('usage:\n  knowledge demo [DIR] [--port N]\n');
    // After `--`, --help is an argument like any other; an unknown command is still a usage error.
    expect(cli(sb, ['lookup', '--store', 'st', '--json', '--', '--help']).stdout).toContain('"status": "missing"');
    expect(cli(sb, ['bogus', '--help']).code).toBe(2);
  });

  it('scan loads no Gateway, MCP, schema or read-side rendering code', () => {
    const sb = sandbox();
    const r = loadedModules(sb, ['scan', '--store', 'st', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.modules.some((m) => m.endsWith('/dist/scan/scan.js'))).toBe(true);
    for (const heavy of ['/dist/gateway/', '/dist/mcp/', '/node_modules/hono/', '/node_modules/@hono/', '@modelcontextprotocol', '/node_modules/zod/', '/dist/cli/render-read.js', '/dist/cli/render-scan.js']) {
      expect(r.modules.filter((m) => m.includes(heavy)), `scan loads ${heavy}`).toEqual([]);
    }
  });
});

describe('the launcher', () => {
  it('runs as an executable and starts Node with the V8 flags and malloc arenas the README names', () => {
    const sb = sandbox();
    // Started through its own shebang (`#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node …`), as `npx knowledge` does.
    // A preloaded module reports the flags Node was started with.
    const seen = join(sb.dir, 'exec-argv.json');
    const report = join(sb.dir, 'report.mjs');
    writeFileSync(report, `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(seen)}, JSON.stringify({ argv: process.execArgv, arenas: process.env.MALLOC_ARENA_MAX ?? null }));\n`);
    const r = spawnSync(cliPath, ['--help'], { cwd: sb.dir, env: { ...sb.env, NODE_OPTIONS: `--import=${pathToFileURL(report).href}` }, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('knowledge scan');
    expect(JSON.parse(readFileSync(seen, 'utf8'))).toEqual({ argv: ['--heap-growing-percent=20', '--max-semi-space-size=8'], arenas: '2' });
  });
});

describe('a reader that stops reading', () => {
  /** `knowledge ARGS` with its stdout a pipe whose reading end is closed before the command writes anything. */
  function withClosedOutput(sb: Sandbox, args: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.destroy(); // as `knowledge … | true` when `true` has already ended
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('ends quietly with the command\'s own status, its work done (EPIPE is not a crash)', async () => {
    const sb = sandbox();
    mkdirSync(join(sb.dir, 'st', 'vault', 'private', 'notes'), { recursive: true });
    writeFileSync(join(sb.dir, 'st', 'vault', 'private', 'notes', 'a.md'), '# A note\n');
    for (const args of [['scan', '--store', 'st', '--json'], ['scan', '--store', 'st'], ['list', '--store', 'st'], ['--help']]) {
      const r = await withClosedOutput(sb, args);
      expect(r.stderr, args.join(' ')).toBe('');
      expect(r.code, args.join(' ')).toBe(0);
    }
    // The first scan's baseline stands: the next one finds the note recorded.
    const again = cli(sb, ['scan', '--store', 'st', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ baseline: false, added: [], unchanged: 1 });
  });
});

describe('standard output that fails (a full disk, a descriptor not open for writing)', () => {
  /** `knowledge ARGS` with its stdout opened on `file` with `flags` ('w' on /dev/full: ENOSPC; 'r': EBADF). */
  function withFailingOutput(sb: Sandbox, args: string[], file: string, flags: string) {
    const fd = openSync(file, flags);
    try {
      return spawnSync(process.execPath, [cliPath, ...args], { cwd: sb.dir, env: sb.env, stdio: ['ignore', fd, 'pipe'], encoding: 'utf8' });
    } finally {
      closeSync(fd);
    }
  }

  it('is one E_IO line naming what was done, exit 3 (not 1, which means rejected): a retry reads the receipt, never publishes twice', () => {
    const sb = sandbox();
    writeFileSync(join(sb.dir, 'p.md'), '---\nkind: page\ntitle: Kept\n---\nbody\n');
    for (const [file, flags, cause] of [['/dev/full', 'w', 'ENOSPC'], ['/dev/null', 'r', 'EBADF']] as const) {
      const r = withFailingOutput(sb, ['publish', '--store', 'st', 'p.md', '--json'], file, flags);
      expect(r.status, r.stderr).toBe(3);
      expect(r.stderr.split('\n')).toHaveLength(2); // one line
      const m = /^E_IO: the answer could not be written to standard output \((\S+): .*\); the command itself completed: publication (pub-\S+) \(request \S+\) stands; knowledge receipt (pub-\S+) prints its receipt again/.exec(r.stderr);
      expect(m, r.stderr).not.toBeNull();
      expect(m![1]).toBe(cause);
      expect(m![3]).toBe(m![2]);
      const again = cli(sb, ['receipt', '--store', 'st', m![2]!, '--json']);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ kind: 'publication', publicationId: m![2] });
    }
    expect(JSON.parse(cli(sb, ['list', '--store', 'st', '--json']).stdout).records).toHaveLength(2);
    // A read: the same line, nothing to name.
    const list = withFailingOutput(sb, ['list', '--store', 'st'], '/dev/full', 'w');
    expect(list.status).toBe(3);
    expect(list.stderr).toMatch(/^E_IO: the answer could not be written to standard output \(ENOSPC: [^\n]*; the command itself completed: run it again for its answer\n$/);
    // A command that failed keeps its own status and error; the lost output is said after it.
    const bad = withFailingOutput(sb, ['show', '--store', 'st', 'no-such-record'], '/dev/full', 'w');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/^E_NOT_FOUND: /);
  });
});

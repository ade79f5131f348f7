/**
 * CLI start-up cost (issue 4: a scan is a CLI process; `--help` should start
 * fast): each command loads only the modules it needs. A module-load hook
 * records every module a real `knowledge` process loads.
 */
import { describe, expect, it, afterEach } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cliPath, storeSandbox, type Sandbox } from './helpers.js';

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
    for (const args of [['--help'], ['scan']]) {
      const r = loadedModules(sb, args);
      expect(r.code, r.stderr).toBe(args[0] === '--help' ? 0 : 2);
      expect(r.modules.some((m) => m.endsWith('/dist/cli/main.js'))).toBe(true);
      for (const heavy of ['/dist/service.js', '/dist/store/store.js', 'better-sqlite3', '/node_modules/yaml/', '/dist/cli/render-read.js']) {
        expect(r.modules.filter((m) => m.includes(heavy)), `${args.join(' ')} loads ${heavy}`).toEqual([]);
      }
    }
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
  it('runs as an executable and starts Node with the V8 flags the README names', () => {
    const sb = sandbox();
    // Started through its own shebang (`#!/usr/bin/env -S node …`), as `npx knowledge` does.
    // A preloaded module reports the flags Node was started with.
    const seen = join(sb.dir, 'exec-argv.json');
    const report = join(sb.dir, 'report.mjs');
    writeFileSync(report, `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(seen)}, JSON.stringify(process.execArgv));\n`);
    const r = spawnSync(cliPath, ['--help'], { cwd: sb.dir, env: { ...sb.env, NODE_OPTIONS: `--import=${pathToFileURL(report).href}` }, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('knowledge scan');
    expect(JSON.parse(readFileSync(seen, 'utf8'))).toEqual(['--heap-growing-percent=20', '--max-semi-space-size=8']);
  });
});

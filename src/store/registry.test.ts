import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { breakStaleLock, knowledgeHome } from './registry.js';
import { KnowledgeError } from '../errors.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('[LAY-2] removing a registry lock its dead holder left', () => {
  it('removes it only while it is still that holder\'s, and only under the breaker', () => {
    dir = mkdtempSync(join(tmpdir(), 'kn-reg-'));
    const lock = join(dir, 'registry.json.lock');
    writeFileSync(lock, '999999 1\n');
    breakStaleLock(lock, '999999 1\n');
    expect(existsSync(lock)).toBe(false);
    expect(existsSync(`${lock}.break`)).toBe(false);

    // Another process found the same dead holder first, removed its lock and took it: that live lock stays.
    writeFileSync(lock, `${process.pid} -\n`);
    breakStaleLock(lock, '999999 1\n');
    expect(existsSync(lock)).toBe(true);

    // Someone else is removing it right now (the breaker is taken): nothing is removed; try again later.
    writeFileSync(lock, '999999 1\n');
    writeFileSync(`${lock}.break`, '');
    breakStaleLock(lock, '999999 1\n');
    expect(existsSync(lock)).toBe(true);
    // A breaker left by a process killed while it held it (seconds old) is removed; the next try proceeds.
    const old = (Date.now() - 10_000) / 1000;
    utimesSync(`${lock}.break`, old, old);
    breakStaleLock(lock, '999999 1\n');
    expect(existsSync(`${lock}.break`)).toBe(false);
    breakStaleLock(lock, '999999 1\n');
    expect(existsSync(lock)).toBe(false);
  });
});

describe('[LAY-2] where the registry is (knowledgeHome)', () => {
  const codeOf = (env: NodeJS.ProcessEnv): string => {
    try {
      knowledgeHome(env);
      return 'none';
    } catch (err) {
      return err instanceof KnowledgeError ? `${err.code}: ${err.message}` : String(err);
    }
  };

  it('KNOWLEDGE_HOME, else HOME/.knowledge, each an absolute path (normalised)', () => {
    expect(knowledgeHome({ KNOWLEDGE_HOME: '/srv/kh/../kh2/', HOME: '/home/u' })).toBe('/srv/kh2');
    expect(knowledgeHome({ HOME: '/home/u' })).toBe('/home/u/.knowledge');
    expect(knowledgeHome({ KNOWLEDGE_HOME: '', HOME: '/home/u' })).toBe('/home/u/.knowledge');
  });

  it('a relative KNOWLEDGE_HOME or HOME is refused (E_VALIDATION), never taken relative to the working directory', () => {
    expect(codeOf({ KNOWLEDGE_HOME: 'kh', HOME: '/home/u' })).toMatch(/^E_VALIDATION: KNOWLEDGE_HOME must be an absolute path, got "kh"/);
    expect(codeOf({ KNOWLEDGE_HOME: './kh' })).toMatch(/^E_VALIDATION: KNOWLEDGE_HOME must be an absolute path/);
    expect(codeOf({ HOME: 'rel' })).toMatch(/^E_VALIDATION: HOME \(the registry is HOME\/\.knowledge unless KNOWLEDGE_HOME is set\) must be an absolute path, got "rel"/);
    // A relative HOME does not matter where KNOWLEDGE_HOME says where the registry is.
    expect(knowledgeHome({ KNOWLEDGE_HOME: '/srv/kh', HOME: 'rel' })).toBe('/srv/kh');
  });
});

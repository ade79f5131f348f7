import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { breakStaleLock } from './registry.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

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

import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { initStore, openStore } from '../store/store.js';
import { makeSandbox, type GitSandbox } from '../git/test-sandbox.js';
import { scanAhead } from './ahead.js';
import { endPrefetchWorkers, listingAhead, prefetchPartitions, PREFETCH_MIN_FILES } from './prefetch.js';

/**
 * [SCAN-4] The CLI's head start (ahead.ts): a listing is started only for a
 * rescan of PREFETCH_MIN_FILES+ recorded files with every partition recorded,
 * and the scan of exactly those folders takes it over.
 */
let sb: GitSandbox | null = null;
afterEach(() => {
  endPrefetchWorkers();
  sb?.cleanup();
  sb = null;
});
afterAll(() => endPrefetchWorkers());

const operator = { kind: 'operator' } as const;

function storeWith(recorded: Record<string, number>): { dir: string; vault: string } {
  sb = makeSandbox();
  const dir = join(sb.dir, 'st');
  const env = { ...sb.env, KNOWLEDGE_HOME: join(sb.dir, 'kh') };
  initStore(dir, { env });
  const store = openStore(dir, { write: true, env });
  const vault = store.paths.vault;
  const ins = store.db.prepare("INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES (?, ?, 1, '1', '1', 'x')");
  store.db.transaction(() => {
    for (const [p, n] of Object.entries(recorded)) {
      const pdir = p === 'private' ? 'private' : `conversations/${p.slice('conversation:'.length)}`;
      mkdirSync(join(vault, pdir, 'n'), { recursive: true });
      writeFileSync(join(vault, pdir, 'n', 'one.md'), '# one\n');
      for (let i = 0; i < n; i++) ins.run(`${pdir}/n/f-${i}.md`, p);
    }
  })();
  store.close();
  return { dir, vault };
}

describe('[SCAN-4] the CLI starts a large rescan\'s listing ahead', () => {
  it('starts it for a rescan of 10,000+ recorded files, and the scan of those folders takes it over', () => {
    const { dir, vault } = storeWith({ private: PREFETCH_MIN_FILES - 5, 'conversation:s1': 5 });
    scanAhead(dir, operator, undefined);
    if (availableParallelism() < 2) {
      console.log('one core: no worker threads, so no listing ahead (checked: none was started)');
      expect(listingAhead()).toBeNull();
      return;
    }
    const early = listingAhead();
    expect(early).not.toBeNull();
    expect(prefetchPartitions(vault, ['conversations/s1', 'private'])).toBe(early);
  });

  it('starts none for a small store, a partition needing its baseline, a partition it cannot scan, or no store at all', () => {
    const cases: Array<[Record<string, number>, string | undefined]> = [
      [{ private: PREFETCH_MIN_FILES - 1 }, undefined],
      [{ private: PREFETCH_MIN_FILES, 'conversation:s1': 0 }, undefined], // s1 has a folder and nothing recorded: a baseline
      [{ private: PREFETCH_MIN_FILES }, 'conversation:nope'], // E_NOT_FOUND for the scan itself
      [{ private: PREFETCH_MIN_FILES }, 'bad id!'],
    ];
    for (const [recorded, partition] of cases) {
      const { dir } = storeWith(recorded);
      expect(() => scanAhead(dir, operator, partition)).not.toThrow();
      expect(listingAhead()).toBeNull();
      sb?.cleanup();
      sb = null;
    }
    expect(() => scanAhead('/nonexistent/store', operator, undefined)).not.toThrow();
    expect(listingAhead()).toBeNull();
  });
});

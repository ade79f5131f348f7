import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { lstatSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { initStore, openStore, type Store } from '../store/store.js';
import { makeSandbox, writeFile, type GitSandbox } from '../git/test-sandbox.js';
import { observe, recheckMissing } from './observe.js';
import { endPrefetchWorkers } from './prefetch.js';
import type { ScanProgress } from './types.js';

/**
 * [SCAN-1, SCAN-4] A baseline's files are read by the prefetch workers
 * (prefetch.ts): what the scan stages and fingerprints must be exactly what
 * it would have read itself. A partition with recorded files is never read
 * ahead (its unchanged files must not be read at all).
 */
let sb: GitSandbox | null = null;
let store: Store | null = null;
afterEach(() => {
  store?.close();
  store = null;
  sb?.cleanup();
  sb = null;
});
afterAll(() => endPrefetchWorkers());

function fresh(files: number): { store: Store; vault: string } {
  sb = makeSandbox();
  const dir = join(sb.dir, 'st');
  const env = { ...sb.env, KNOWLEDGE_HOME: join(sb.dir, 'kh') };
  initStore(dir, { env });
  store = openStore(dir, { write: true, env });
  const vault = store.paths.vault;
  for (let i = 0; i < files; i++) writeFile(vault, `private/pages/d${i % 9}/n-${i}.md`, `# note ${i}\n${'text '.repeat(i % 50)}\n`);
  writeFile(vault, 'private/data/list.yaml', 'a: 1\n');
  return { store, vault };
}

const progress = (): ScanProgress => ({ phase: 'walk', seen: 0, expected: 0, hashed: 0 });

describe('[SCAN-4] a baseline read ahead by the prefetch workers', () => {
  it('stages exactly the bytes on disk with their hash and fingerprint; a partition with recorded files is not read ahead', () => {
    const { store: st, vault } = fresh(400);
    const seen = observe(st, 'scan-test-1', ['private'], progress());
    expect(seen.read).toHaveLength(401);
    if (availableParallelism() < 2) {
      console.log('one core: no prefetch workers, so nothing is read ahead (checked: none was)');
      expect(seen.readAhead).toBe(0);
    } else {
      expect(seen.readAhead).toBe(401);
    }
    const staged = st.db.prepare('SELECT bytes FROM scan_staging WHERE scan_id = ? AND path = ?').pluck();
    for (const f of seen.read) {
      const abs = join(vault, f.path);
      const bytes = readFileSync(abs);
      const s = lstatSync(abs, { bigint: true });
      expect((staged.get('scan-test-1', f.path) as Buffer).equals(bytes)).toBe(true);
      expect(f).toMatchObject({ sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length, mtimeNs: s.mtimeNs.toString(), ctimeNs: s.ctimeNs.toString(), ino: s.ino.toString() });
    }
    // Once the partition has recorded files, its scans read only what changed, on this thread.
    st.db.prepare("INSERT INTO vault_files(path, partition, size, mtime_ns, ino, sha256) VALUES ('private/data/list.yaml', 'private', 5, '0', '0', 'x')").run();
    const again = observe(st, 'scan-test-2', ['private'], progress());
    expect(again.readAhead).toBe(0);
    expect(again.read).toHaveLength(401);
  });
});

describe('[SCAN-4] folders whose digest matches are not compared file by file', () => {
  it('compares every recorded folder once, then only a folder that changed', () => {
    const { store: st, vault } = fresh(90);
    // Recorded as they are (what a scan's apply would write), with old mtimes so that nothing is racy.
    const ins = st.db.prepare('INSERT INTO vault_files(path, partition, size, mtime_ns, ctime_ns, ino, sha256) VALUES (?, ?, ?, ?, ?, ?, ?)');
    const record = () => {
      st.db.prepare('DELETE FROM vault_files').run();
      const seen = observe(st, 'scan-record', ['private'], progress());
      st.db.prepare('DELETE FROM scan_staging').run();
      for (const f of seen.read) ins.run(f.path, 'private', f.size, f.mtimeNs, f.ctimeNs, f.ino, f.sha256);
    };
    for (let i = 0; i < 90; i++) utimesSync(join(vault, `private/pages/d${i % 9}/n-${i}.md`), 1_700_000_000, 1_700_000_000);
    utimesSync(join(vault, 'private/data/list.yaml'), 1_700_000_000, 1_700_000_000);
    record();
    const first = observe(st, 'scan-a', ['private'], progress());
    expect(first).toMatchObject({ read: [], unchanged: 91, foldersCompared: 10 });
    const second = observe(st, 'scan-b', ['private'], progress());
    expect(second).toMatchObject({ read: [], unchanged: 91, foldersCompared: 0 });
    writeFileSync(join(vault, 'private/pages/d3/n-3.md'), '# note 3, edited\n');
    const third = observe(st, 'scan-c', ['private'], progress());
    expect(third.read.map((f) => f.path)).toEqual(['private/pages/d3/n-3.md']);
    expect(third).toMatchObject({ unchanged: 90, foldersCompared: 1 });
    st.db.prepare('DELETE FROM scan_staging').run();
  });
});

describe('[SCAN-1] files gone when read are looked for again, all together', () => {
  it('a recorded file back is read as known; a new file back is read as new; a new file still gone is no deletion', () => {
    sb = makeSandbox();
    const vault = sb.dir;
    writeFile(vault, 'private/known-back.md', 'k\n');
    writeFile(vault, 'private/new-back.md', 'n\n');
    const calls: Array<[string, boolean]> = [];
    const missing = recheckMissing(
      vault,
      ['private/known-back.md', 'private/known-gone.md', 'private/blocked/x.md'],
      ['private/new-back.md', 'private/new-gone.md'],
      ['private/blocked'],
      (path, wasKnown) => {
        calls.push([path, wasKnown]);
        return true;
      },
    );
    // Only a recorded file that stays gone is missing (a deletion); what is under a blocked path is kept.
    expect(missing).toEqual(['private/known-gone.md']);
    expect(calls.sort()).toEqual([['private/known-back.md', true], ['private/new-back.md', false]]);
  });
});

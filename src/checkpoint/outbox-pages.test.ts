import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { OutboxPages } from './outbox.js';
import type { DB } from '../store/db.js';

/**
 * Large chains read queued bytes a page at a time (outbox.ts): the right
 * bytes in any order of access, few queries in the order the drain reads.
 * Batch 3 is a scan's: its bytes stay where the scan staged them.
 */
const SCAN_BATCH = 3;

function outbox(files: Array<{ batch: number; path: string; bytes: Buffer | null }>): { db: DB; queries: () => number } {
  const real = new Database(':memory:');
  real.exec(`CREATE TABLE batches (batch_id INTEGER PRIMARY KEY, kind TEXT NOT NULL, ref_id TEXT NOT NULL);
    CREATE TABLE batch_files (batch_id INTEGER NOT NULL, path TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, bytes BLOB, PRIMARY KEY (batch_id, path));
    CREATE TABLE scan_staging (scan_id TEXT NOT NULL, path TEXT NOT NULL, bytes BLOB NOT NULL, PRIMARY KEY (scan_id, path));`);
  const batch = real.prepare('INSERT OR IGNORE INTO batches(batch_id, kind, ref_id) VALUES (?, ?, ?)');
  const ins = real.prepare('INSERT INTO batch_files(batch_id, path, deleted, bytes) VALUES (?, ?, ?, ?)');
  const stage = real.prepare("INSERT INTO scan_staging(scan_id, path, bytes) VALUES ('scan-x', ?, ?)");
  for (const f of files) {
    const scan = f.batch === SCAN_BATCH;
    batch.run(f.batch, scan ? 'scan' : 'publication', scan ? 'scan-x' : `pub-${f.batch}`);
    ins.run(f.batch, f.path, f.bytes === null ? 1 : 0, scan ? null : f.bytes);
    if (scan && f.bytes !== null) stage.run(f.path, f.bytes);
  }
  let n = 0;
  const db = {
    real,
    prepare: (sql: string) => {
      const st = real.prepare(sql);
      return { iterate: (...args: unknown[]) => (n++, st.iterate(...args)) };
    },
  } as unknown as DB;
  return { db, queries: () => n };
}

describe('OutboxPages', () => {
  it('returns each file\'s own bytes whatever the order of access', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.record({ batch: fc.integer({ min: 1, max: 3 }), path: fc.string({ minLength: 1, maxLength: 6 }), size: fc.integer({ min: 0, max: 3000 }) }), {
          selector: (f) => `${f.batch}\0${f.path}`,
          maxLength: 600,
        }),
        fc.array(fc.nat(), { maxLength: 900 }),
        (specs, picks) => {
          const files = specs.map((f, i) => ({ batch: f.batch, path: f.path, bytes: Buffer.alloc(f.size, i % 251) }));
          const { db } = outbox(files);
          const pages = new OutboxPages(db);
          if (files.length === 0) return;
          for (const k of picks) {
            const f = files[k % files.length]!;
            expect(pages.bytes(f.batch, f.path).equals(f.bytes!)).toBe(true);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('in path order, one query per page of 256 files, and a page stops at ~4 MiB', () => {
    const small = Array.from({ length: 1000 }, (_, i) => ({ batch: 7, path: `p/${String(i).padStart(4, '0')}.md`, bytes: Buffer.from(`file ${i}\n`) }));
    const a = outbox(small);
    const pages = new OutboxPages(a.db);
    for (const f of small) expect(pages.bytes(7, f.path).toString()).toBe(`file ${small.indexOf(f)}\n`);
    expect(a.queries()).toBe(Math.ceil(1000 / 256));

    const big = Array.from({ length: 12 }, (_, i) => ({ batch: 1, path: `big-${String(i).padStart(2, '0')}`, bytes: Buffer.alloc(1024 * 1024, i) }));
    const b = outbox(big);
    const bp = new OutboxPages(b.db);
    for (const f of big) expect(bp.bytes(1, f.path).equals(f.bytes)).toBe(true);
    expect(b.queries()).toBe(3); // 4 files of 1 MiB per page

    const staged = big.map((f) => ({ ...f, batch: SCAN_BATCH }));
    const c = outbox(staged);
    const cp = new OutboxPages(c.db);
    for (const f of staged) expect(cp.bytes(SCAN_BATCH, f.path).equals(f.bytes)).toBe(true);
    expect(c.queries()).toBe(3);
  });

  it('a queued file whose bytes are gone is an error, never an empty file', () => {
    const { db } = outbox([{ batch: SCAN_BATCH, path: 'a.md', bytes: Buffer.from('a') }, { batch: SCAN_BATCH, path: 'b.md', bytes: Buffer.from('b') }]);
    (db as unknown as { real: Database.Database }).real.prepare("DELETE FROM scan_staging WHERE path = 'b.md'").run();
    const pages = new OutboxPages(db);
    expect(() => pages.bytes(SCAN_BATCH, 'a.md')).toThrow(/queued batch 3 has lost the bytes of b\.md/);
  });
});

/**
 * Re-checking references [REC-3, SCAN-2]: the whole partition, or only named
 * records — with the same verdicts — and the named records are found by
 * their paths, never by reading the partition's records.
 */
import { afterEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { migrate, type DB } from '../store/db.js';
import { badReferencesSql, partitionRead, recheckReferences } from './references.js';

const opened: DB[] = [];
afterEach(() => {
  for (const db of opened.splice(0)) db.close();
});

const COLS = 'id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body';

function store(): DB {
  const db = new Database(':memory:');
  migrate(db);
  opened.push(db);
  const ins = db.prepare(`INSERT INTO records(${COLS}) VALUES (@id, @partition, @path, @kind, @id, 1, 'active', 'x', 't', 't', '[]', '[]', @meta, '')`);
  const rec = (id: string, kind: string, meta: object, partition = 'private') =>
    ins.run({ id, partition, path: `${partition === 'private' ? 'private' : `conversations/${partition}`}/pages/${id}.md`, kind, meta: JSON.stringify({ id, kind, ...meta }) });
  db.transaction(() => {
    for (let i = 0; i < 300; i++) rec(`p${i}`, 'page', { dependencies: i % 3 === 0 ? [`p${i + 1}`] : [] });
    rec('dep-bad', 'page', { dependencies: ['nowhere', 'p1'] });
    rec('rel-ok', 'relationship', { from: 'p1', to: 'p2' });
    rec('rel-bad', 'relationship', { from: 'p1', to: 'elsewhere' });
    rec('rel-cross', 'relationship', { from: 'p1', to: 'other' });
    rec('other', 'page', {}, 'sess-1');
    rec('cite-bad', 'page', { evidence: [{ source: 'src-missing' }] });
  })();
  return db;
}

const diagnostics = (db: DB) => db.prepare("SELECT path, reason FROM scan_diagnostics WHERE code = 'invalid-reference' ORDER BY path").all();

describe('[REC-3] references are re-checked for a partition or for named records', () => {
  it('the named records get exactly the verdicts a whole-partition check gives them', () => {
    const whole = store();
    expect(recheckReferences(whole, 'private')).toBe(4);
    const expected = diagnostics(whole);
    expect(expected.map((d) => (d as { path: string }).path)).toEqual([
      'private/pages/cite-bad.md', 'private/pages/dep-bad.md', 'private/pages/rel-bad.md', 'private/pages/rel-cross.md',
    ]);
    const named = store();
    const paths = ['private/pages/cite-bad.md', 'private/pages/dep-bad.md', 'private/pages/rel-bad.md', 'private/pages/rel-cross.md', 'private/pages/rel-ok.md', 'private/pages/p3.md'];
    expect(recheckReferences(named, 'private', paths)).toBe(4);
    expect(diagnostics(named)).toEqual(expected);
    // A named path that is fixed loses its diagnostic; the others keep theirs.
    named.prepare("UPDATE records SET meta = json_set(meta, '$.to', 'p2') WHERE id = 'rel-bad'").run();
    recheckReferences(named, 'private', ['private/pages/rel-bad.md']);
    expect(diagnostics(named)).toEqual(expected.filter((d) => (d as { path: string }).path !== 'private/pages/rel-bad.md'));
  });

  it('named records are looked up by path: the partition\'s records are never read for them', () => {
    const db = store();
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${badReferencesSql('paths')}`).all({ p: 'private', paths: '[]' }) as Array<{ detail: string }>).map((p) => p.detail);
    const records = plan.filter((d) => /\brecords\b/.test(d) && !/^SEARCH t /.test(d));
    expect(records).toEqual(['SEARCH records USING INDEX sqlite_autoindex_records_2 (path=?)']);
    // The whole-partition statements do read the partition (for contrast: the test can tell them apart).
    const whole = (db.prepare(`EXPLAIN QUERY PLAN ${badReferencesSql('partition-index')}`).all({ p: 'private' }) as Array<{ detail: string }>).map((p) => p.detail);
    expect(whole.some((d) => /^SEARCH records USING INDEX records_partition/.test(d))).toBe(true);
  });

  it('a whole partition is read once: by its index when it is a small share of the store, else by one pass over the table', () => {
    const db = store();
    const reads = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ p: 'private' }) as Array<{ detail: string }>)
      .map((p) => p.detail).filter((d) => /\brecords\b/.test(d) && !/^SEARCH t /.test(d));
    expect(reads(badReferencesSql('partition-index'))).toEqual([expect.stringMatching(/^SEARCH records USING INDEX records_partition\w* \(partition=\?\)$/)]);
    expect(reads(badReferencesSql('partition-scan'))).toEqual(['SCAN records']);
    // The fixture: 306 records in private, 1 in sess-1.
    expect(partitionRead(db, 'private')).toBe('partition-scan');
    expect(partitionRead(db, 'sess-1')).toBe('partition-index');
    // Both reads give the same verdicts.
    const viaScan = store();
    recheckReferences(viaScan, 'private');
    const viaIndex = store();
    // Another partition five times its size makes private a small share of the store.
    const fill = viaIndex.prepare(`INSERT INTO records(${COLS}) VALUES (?, 'sess-2', ?, 'page', ?, 1, 'active', 'x', 't', 't', '[]', '[]', '{}', '')`);
    viaIndex.transaction(() => {
      for (let i = 0; i < 1600; i++) fill.run(`f${i}`, `conversations/sess-2/pages/f${i}.md`, `f${i}`);
    })();
    expect(partitionRead(viaIndex, 'private')).toBe('partition-index');
    recheckReferences(viaIndex, 'private');
    expect(diagnostics(viaScan)).toHaveLength(4);
    expect(diagnostics(viaIndex)).toEqual(diagnostics(viaScan));
  });
});

/**
 * Migration 003 keeps the read indexes in step with `records` through
 * triggers, whoever writes the table (publications upsert, scans may
 * replace or delete) [READ-1].
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { migrate, type DB } from '../store/db.js';
import { lookupRecord } from './lookup.js';
import { searchRecords } from './search.js';
import { findBacklinks, requireVisible } from './record.js';
import { listRecords } from './inventory.js';
import { parseListQuery, parseSearchQuery } from './query.js';

let db: DB;
beforeEach(() => {
  db = new Database(':memory:');
  migrate(db);
});
afterEach(() => db.close());

interface Rec { id: string; partition?: string; title: string; aliases?: string[]; tags?: string[]; body?: string; meta?: Record<string, unknown>; updated?: string; kind?: string }

const UPSERT = `INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
  VALUES (@id, @partition, @path, @kind, @title, 1, 'active', 'x', @updated, @updated, @aliases, @tags, @meta, @body)
  ON CONFLICT(id) DO UPDATE SET title = excluded.title, aliases = excluded.aliases, body = excluded.body, meta = excluded.meta, updated_at = excluded.updated_at`;

function put(r: Rec, sql = UPSERT): void {
  db.prepare(sql).run({
    id: r.id,
    partition: r.partition ?? 'private',
    path: `private/pages/${r.id}.md`,
    kind: r.kind ?? 'page',
    title: r.title,
    updated: r.updated ?? '2024-01-01T00:00:00.000Z',
    aliases: JSON.stringify(r.aliases ?? []),
    tags: JSON.stringify(r.tags ?? []),
    meta: JSON.stringify(r.meta ?? {}),
    body: r.body ?? '',
  });
}

const hits = (query: string) => searchRecords(db, 'all', parseSearchQuery({ query })).results.map((h) => h.id);

describe('[READ-1] the FTS index follows the records table', () => {
  it('indexes inserts, reindexes updates and forgets deletes', () => {
    put({ id: 'a', title: 'Apples', body: 'crunchy fruit' });
    expect(hits('crunchy')).toEqual(['a']);
    put({ id: 'a', title: 'Apples', body: 'soft fruit' });
    expect(hits('crunchy')).toEqual([]);
    expect(hits('soft')).toEqual(['a']);
    db.prepare('DELETE FROM records WHERE id = ?').run('a');
    expect(hits('soft')).toEqual([]);
    expect((db.prepare('SELECT count(*) AS n FROM records_fts').get() as { n: number }).n).toBe(0);
  });

  it('INSERT OR REPLACE (no delete triggers) leaves exactly one index row', () => {
    const replace = UPSERT.replace('INSERT INTO', 'INSERT OR REPLACE INTO').replace(/ON CONFLICT[\s\S]*$/, '');
    put({ id: 'a', title: 'Old title', body: 'old words' }, replace);
    put({ id: 'a', title: 'New title', body: 'new words' }, replace);
    expect(hits('old')).toEqual([]);
    expect(hits('new')).toEqual(['a']);
    expect((db.prepare('SELECT count(*) AS n FROM records_fts').get() as { n: number }).n).toBe(1);
  });

  it('malformed JSON in aliases or meta never fails the write', () => {
    db.prepare(`INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
      VALUES ('b', 'private', 'p/b.md', 'page', 'Broken', 1, 'active', 'x', 't', 't', 'not json', '[]', '{nope', 'body words')`).run();
    expect(hits('body')).toEqual(['b']);
  });

  it('ranks title above aliases above body', () => {
    put({ id: 'body', title: 'One', body: 'zebra' });
    put({ id: 'alias', title: 'Two', aliases: ['zebra'] });
    put({ id: 'title', title: 'Zebra' });
    expect(hits('zebra')).toEqual(['title', 'alias', 'body']);
  });

  it('matches without diacritics and case', () => {
    put({ id: 'c', title: 'Crème brûlée' });
    expect(hits('creme BRULEE')).toEqual(['c']);
  });

  it('keeps frontmatter links for backlinks, replacing them on update', () => {
    put({ id: 'target', title: 'Target' });
    put({ id: 'dep', title: 'Dep', meta: { dependencies: ['target', 'target'] } });
    put({ id: 'rel', title: 'Rel', meta: { from: 'x', to: 'target' } });
    put({ id: 'wiki', title: 'Wiki', body: 'see [[target]]' });
    put({ id: 'prefix', title: 'Prefix', body: 'see [[target-2]] and target' });
    expect(findBacklinks(db, 'all', 'target').backlinks.map((b) => b.id).sort()).toEqual(['dep', 'rel', 'wiki']);
    put({ id: 'dep', title: 'Dep', meta: { dependencies: [] } });
    expect(findBacklinks(db, 'all', 'target').backlinks.map((b) => b.id).sort()).toEqual(['rel', 'wiki']);
  });

  it('backlinks from partitions the caller cannot read are not shown', () => {
    put({ id: 'target', title: 'Target' });
    put({ id: 'mine', title: 'Mine', meta: { dependencies: ['target'] } });
    put({ id: 'theirs', partition: 'conversation:B', title: 'Theirs', body: '[[target]]' });
    expect(findBacklinks(db, ['private', 'conversation:A'], 'target').backlinks.map((b) => b.id)).toEqual(['mine']);
  });

  it('orders the inventory by updated_at across timestamp precisions', () => {
    put({ id: 'whole', title: 'W', updated: '2024-01-01T00:00:00Z' });
    put({ id: 'half', title: 'H', updated: '2024-01-01T00:00:00.500Z' });
    put({ id: 'old', title: 'O', updated: '2023-12-31T23:59:59.999Z' });
    expect(listRecords(db, 'all', parseListQuery({})).records.map((r) => r.id)).toEqual(['half', 'whole', 'old']);
  });

  it('uses the ordering index for the inventory', () => {
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT r.id FROM records r ORDER BY strftime('%Y-%m-%dT%H:%M:%fZ', r.updated_at) DESC, r.id LIMIT 5`).all() as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join(' ')).toContain('records_updated');
  });

  it('duplicate ids listed by a scan are missing from lookup [REC-3]', () => {
    put({ id: 'dup', title: 'Twice' });
    expect(lookupRecord(db, 'all', 'dup').status).toBe('found');
    db.prepare("INSERT INTO duplicate_record_ids(id, path, partition, found_at) VALUES ('dup', 'private/pages/other.md', 'private', 't')").run();
    expect(lookupRecord(db, 'all', 'dup')).toEqual({ status: 'missing' });
    expect(lookupRecord(db, 'all', 'Twice')).toEqual({ status: 'missing' });
    // Reading it by id says why, even with its row still in records (defence in depth: scans drop such rows).
    expect(() => requireVisible(db, 'all', 'dup')).toThrow(/record id dup is claimed by more than one file; see the scan diagnostics \[REC-3\]/);
    db.prepare("DELETE FROM duplicate_record_ids WHERE id = 'dup'").run();
    expect(requireVisible(db, 'all', 'dup').id).toBe('dup');
  });
});

describe('[READ-1] lookup by a title holding characters that are words to the index but not letters or digits', () => {
  it('a title whose first word is a private-use character (a tokenizer character FTS5 keeps)', () => {
    put({ id: 'pu', title: '\uE000 Launch' });
    expect(lookupRecord(db, 'all', '\uE000 Launch')).toMatchObject({ status: 'found', record: { id: 'pu' } });
    expect(lookupRecord(db, 'all', '\uE000 launch')).toMatchObject({ status: 'found', record: { id: 'pu' } });
  });
});

describe('search snippets', () => {
  it('come from the body when a word matched there, else the aliases, else the title, with bold marks', () => {
    put({ id: 's1', title: 'Kettle', aliases: ['boiler'], body: 'Water **boils** at one hundred degrees in the kettle.' });
    const snip = (query: string) => searchRecords(db, 'all', parseSearchQuery({ query })).results[0]!.snippet;
    expect(snip('hundred')).toContain('one **hundred** degrees');
    expect(snip('boiler')).toBe('**boiler**');
    // A title-only match: the title, not the body's text that merely contains "**".
    put({ id: 's2', title: 'Unique heading', body: 'Text with **bold** but no match.' });
    expect(snip('heading')).toBe('Unique **heading**');
  });

  it('text holding the control characters U+0002 / U+0003 is never taken for a match mark', () => {
    put({ id: 'c1', title: 'Ctrl marker title', body: 'body has \u0002weird\u0003 bytes' });
    const snip = (query: string) => searchRecords(db, 'all', parseSearchQuery({ query })).results[0]!.snippet;
    expect(snip('marker')).toBe('Ctrl **marker** title');
    expect(snip('weird')).toBe('body has \u0002**weird**\u0003 bytes');
  });

  it('a caller restricted to some partitions gets no BM25 score, whose store-wide statistics would tell it of the others', () => {
    put({ id: 'mine', title: 'Mine', body: 'zeta word' });
    const scoreFor = (readable: 'all' | Array<'private'>) => searchRecords(db, readable, parseSearchQuery({ query: 'zeta' })).results[0]!.score;
    expect(scoreFor('all')).toBeGreaterThan(0);
    expect(scoreFor(['private'])).toBeUndefined();
    for (let i = 0; i < 3; i++) put({ id: `hidden${i}`, title: 'Other', body: 'zeta', partition: 'conversation:A' });
    expect(searchRecords(db, ['private'], parseSearchQuery({ query: 'zeta' })).results).toEqual([expect.not.objectContaining({ score: expect.anything() })]);
  });

  it('filters by kind, lifecycle and exact tag inside the index, and scopes partitions', () => {
    put({ id: 'f1', title: 'Filter me', tags: ['c++', 'ops'] });
    put({ id: 'f2', title: 'Filter me', tags: ['c'], kind: 'claim' });
    put({ id: 'f3', title: 'Filter me', partition: 'conversation:B' });
    const ids = (q: object, readable: 'all' | Array<'private' | `conversation:${string}`> = 'all') =>
      searchRecords(db, readable, parseSearchQuery({ query: 'filter', ...q })).results.map((r) => r.id).sort();
    expect(ids({})).toEqual(['f1', 'f2', 'f3']);
    expect(ids({ tag: 'c++' })).toEqual(['f1']);
    expect(ids({ tag: 'c' })).toEqual(['f2']);
    expect(ids({ kind: 'claim' })).toEqual(['f2']);
    expect(ids({ lifecycle: 'withdrawn' })).toEqual([]);
    expect(ids({}, ['private'])).toEqual(['f1', 'f2']);
    expect(ids({}, ['conversation:B'])).toEqual(['f3']);
    expect(ids({}, [])).toEqual([]);
    expect(listRecords(db, 'all', parseListQuery({ tag: 'c++' })).records.map((r) => r.id)).toEqual(['f1']);
    put({ id: 'f4', title: 'Other conversation', partition: 'conversation:B', tags: ['c++'] });
    expect(listRecords(db, 'all', parseListQuery({ tag: 'c++' })).records.map((r) => r.id).sort()).toEqual(['f1', 'f4']);
    expect(listRecords(db, ['private', 'conversation:A'], parseListQuery({ tag: 'c++' }))).toMatchObject({ total: 1, records: [{ id: 'f1' }] });
    expect(listRecords(db, 'all', parseListQuery({ tag: 'c++', partition: 'conversation:B' })).records.map((r) => r.id)).toEqual(['f4']);
    expect(listRecords(db, [], parseListQuery({ tag: 'c++' })).total).toBe(0);
  });
});

describe('migration 003 on a store that already has records', () => {
  it('indexes existing records, their links and facets when it runs', async () => {
    const { default: m001 } = await import('../store/migrations/001-core.js');
    const { default: m002 } = await import('../store/migrations/002-scans.js');
    const { default: m003 } = await import('../store/migrations/003-read.js');
    const old = new Database(':memory:');
    old.exec(m001);
    if (m002.trim()) old.exec(m002);
    const ins = old.prepare(`INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
      VALUES (?, 'private', ?, 'page', ?, 1, 'active', 'x', 't', 't', ?, ?, ?, ?)`);
    ins.run('old-1', 'p/1.md', 'Legacy title', '["Former name"]', '["kept"]', '{"dependencies":["old-2"]}', 'legacy body');
    ins.run('old-2', 'p/2.md', 'Second', '[]', '[]', '{}', 'links [[old-1]]');
    old.exec(m003);
    const prev = db;
    db = old;
    try {
      expect(hits('legacy')).toEqual(['old-1']);
      expect(lookupRecord(db, 'all', 'former NAME')).toMatchObject({ status: 'found', record: { id: 'old-1' } });
      expect(findBacklinks(db, 'all', 'old-2').backlinks.map((b) => b.id)).toEqual(['old-1']);
      expect(findBacklinks(db, 'all', 'old-1').backlinks.map((b) => b.id)).toEqual(['old-2']);
      expect(searchRecords(db, 'all', parseSearchQuery({ query: 'legacy', tag: 'kept' })).total).toBe(1);
    } finally {
      db = prev;
      old.close();
    }
  });
});

describe('inventory by tag at scale', () => {
  it('pages a large tagged set in updated_at order, the same as sorting it directly', () => {
    const insert = db.transaction(() => {
      for (let i = 0; i < 1500; i++) {
        const sec = String(i % 60).padStart(2, '0');
        const min = String(Math.floor(i / 60) % 60).padStart(2, '0');
        put({ id: `m${String(i).padStart(4, '0')}`, title: `Many ${i}`, tags: i % 5 === 0 ? ['other'] : ['many'], updated: `2024-01-01T00:${min}:${sec}${i % 2 ? '.5' : ''}Z` });
      }
    });
    insert();
    const all = (db.prepare("SELECT id, updated_at FROM records WHERE tags LIKE '%\"many\"%'").all() as Array<{ id: string; updated_at: string }>)
      .sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at) || (a.id < b.id ? -1 : 1))
      .map((r) => r.id);
    expect(all).toHaveLength(1200);
    const paged: string[] = [];
    let offset: number | null = 0;
    while (offset !== null) {
      const page = listRecords(db, 'all', parseListQuery({ tag: 'many', limit: 500, offset }));
      expect(page.total).toBe(1200);
      paged.push(...page.records.map((r) => r.id));
      offset = page.nextOffset;
    }
    expect(paged).toEqual(all);
    expect(listRecords(db, 'all', parseListQuery({ tag: 'other' })).total).toBe(300);
  });
});

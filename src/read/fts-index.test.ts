/**
 * Migration 003 keeps the read indexes in step with `records` through
 * triggers, whoever writes the table (publications upsert, scans may
 * replace or delete) [READ-1].
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { migrate, type DB } from '../store/db.js';
import { lookupRecord } from './lookup.js';
import { searchRecords } from './search.js';
import { MAX_BACKLINKS, findBacklinks, requireVisible } from './record.js';
import { listRecords } from './inventory.js';
import { columnPhrase, parseListQuery, parseSearchQuery } from './query.js';
import { bodyLinksTo } from './links.js';
import { SUMMARY_COLUMNS, UPDATED_ORDER, partitionClause, toSummary, whereSql, type SummaryRow } from './summary.js';
import type { PartitionId } from '../store/layout.js';
import type { RecordSummary } from './types.js';

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

/**
 * findBacklinks as it was before it paged inside SQLite: every backlink id
 * collected, every row read, sorted in JS by Date.parse(updated_at) then id.
 * The reference its answers must equal.
 */
function referenceBacklinks(readable: 'all' | PartitionId[], id: string): { backlinks: RecordSummary[]; total: number } {
  const scope = partitionClause(readable);
  const ids = new Set<string>();
  const fm = whereSql([{ sql: 'l.target_id = ?', params: [id] }, scope]);
  for (const r of db.prepare(`SELECT DISTINCT r.id FROM record_links l JOIN records r ON r.id = l.source_id ${fm.sql}`).all(...fm.params) as Array<{ id: string }>) ids.add(r.id);
  const phrase = columnPhrase('body', id);
  if (phrase !== null) {
    const w = whereSql([{ sql: 'records_fts MATCH ?', params: [phrase] }, { sql: 'instr(r.body, ?) > 0', params: [id] }, scope]);
    const rows = db.prepare(`SELECT r.id, r.body FROM records_fts JOIN records_fts_keys k ON k.n = records_fts.rowid JOIN records r ON r.id = k.id ${w.sql}`)
      .all(...w.params) as Array<{ id: string; body: string }>;
    for (const r of rows) if (bodyLinksTo(r.body, id)) ids.add(r.id);
  }
  ids.delete(id);
  const list = [...ids];
  const rows: SummaryRow[] = [];
  for (let i = 0; i < list.length; i += 500) {
    const chunk = list.slice(i, i + 500);
    rows.push(...(db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM records r WHERE r.id IN (${chunk.map(() => '?').join(', ')}) ORDER BY ${UPDATED_ORDER}`).all(...chunk) as SummaryRow[]));
  }
  const byUpdatedDesc = (a: RecordSummary, b: RecordSummary): number => {
    const ta = Date.parse(a.updatedAt);
    const tb = Date.parse(b.updatedAt);
    if (ta !== tb) return tb - ta;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  };
  const summaries = rows.map(toSummary).sort(byUpdatedDesc);
  return { backlinks: summaries.slice(0, MAX_BACKLINKS), total: summaries.length };
}

const INSERT = `INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
  VALUES (@id, @partition, @path, 'page', @id, 1, @lifecycle, 'x', @updated, @updated, '[]', '[]', @meta, @body)
  ON CONFLICT(id) DO UPDATE SET meta = excluded.meta, body = excluded.body, updated_at = excluded.updated_at, lifecycle = excluded.lifecycle`;

/**
 * Rows each statement hands to JS, and each statement that handed any (its
 * SQL and parameters), counted through a wrapper around `db`.
 */
function countingRows(inner: DB): { db: DB; rows: () => number; statements: Array<{ sql: string; params: unknown[] }> } {
  let rows = 0;
  const statements: Array<{ sql: string; params: unknown[] }> = [];
  const wrapStatement = (stmt: object, sql: string): object => {
    const proxy: object = new Proxy(stmt, {
      get(target, key) {
        const v = Reflect.get(target, key) as unknown;
        if (typeof v !== 'function') return v;
        const f = v as (...a: unknown[]) => unknown;
        if (key === 'all') return (...a: unknown[]) => { statements.push({ sql, params: a }); const r = f.apply(target, a) as unknown[]; rows += r.length; return r; };
        if (key === 'get') return (...a: unknown[]) => { statements.push({ sql, params: a }); const r = f.apply(target, a); if (r !== undefined) rows += 1; return r; };
        if (key === 'iterate') {
          return function* (...a: unknown[]) {
            statements.push({ sql, params: a });
            for (const r of f.apply(target, a) as Iterable<unknown>) { rows += 1; yield r; }
          };
        }
        if (key === 'pluck' || key === 'raw' || key === 'expand') return (...a: unknown[]) => { f.apply(target, a); return proxy; };
        return f.bind(target);
      },
    });
    return proxy;
  };
  const wrapped = new Proxy(inner, {
    get(target, key) {
      const v = Reflect.get(target, key) as unknown;
      if (key === 'prepare') return (sql: string) => wrapStatement(target.prepare(sql), sql);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: wrapped, rows: () => rows, statements };
}

describe('[READ-1] backlinks: a count and one page, whatever the number of backlinks', () => {
  const PARTITIONS = ['private', 'conversation:A', 'conversation:B'] as const;
  // Ties, and sub-millisecond digits SQLite's order key rounds where Date.parse truncates.
  const TIMES = ['2024-01-01T00:00:00Z', '2024-01-01T00:00:00.000Z', '2024-01-01T00:00:00.0004Z', '2024-01-01T00:00:00.0005Z', '2024-01-01T00:00:00.001Z',
    '2024-01-01T00:00:00.9996Z', '2024-01-01T00:00:01Z', '2023-12-31T23:59:59.999999999Z', '2025-06-01T10:00:00.5Z'];
  const PREFIXES = ['r', 'R', 'a-', 'z.', '0:', 'r_', 'hub-x'];
  const T = 'hub-x';
  const BODIES = ['', `see [[${T}]]`, `[[ ${T} ]]`, `[[${T}|the hub]]`, `mentions ${T} only`, `[[${T}-2]]`, `[[${T}]] and [[${T}]]`, 'x [[other]]', `[[${T}\n]]`, `[[[[${T}]]`];

  it('equals the reference (every backlink read and sorted) on random link graphs, for every reader', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2000 }),
        fc.integer(),
        fc.oneof(fc.constant<'all'>('all'), fc.subarray([...PARTITIONS] as PartitionId[])),
        (n, seed, readable) => {
          db.exec('DELETE FROM records');
          let x = seed >>> 0;
          const rand = (k: number): number => { x = (Math.imul(x, 1103515245) + 12345) >>> 0; return (x >>> 8) % k; };
          const pick = <V>(xs: readonly V[]): V => xs[rand(xs.length)]!;
          const ids: string[] = [];
          const ins = db.prepare(INSERT);
          const write = (id: string): void => {
            const meta: Record<string, unknown> = {};
            if (rand(10) < 6) meta.dependencies = rand(3) === 0 ? [T, T, 'other'] : [T];
            if (rand(10) === 0) meta.from = T;
            if (rand(10) === 0) meta.to = rand(2) === 0 ? T : 'other';
            ins.run({
              id, partition: pick(PARTITIONS), path: `p/${id}.md`, lifecycle: pick(['active', 'withdrawn', 'superseded']),
              updated: rand(3) === 0 ? new Date(Date.UTC(2024, 0, 1) + rand(100000) * 7).toISOString() : pick(TIMES),
              meta: JSON.stringify(meta), body: pick(BODIES),
            });
          };
          db.transaction(() => {
            if (rand(4) !== 0) write(T); // the record itself (may link to itself), or a dangling target
            for (let i = 0; i < n; i++) { const id = `${pick(PREFIXES)}${i}`; ids.push(id); write(id); }
            // Deleted records (their links go with them) and records rewritten since.
            for (const id of ids) if (rand(12) === 0) db.prepare('DELETE FROM records WHERE id = ?').run(id);
            for (const id of ids) if (rand(12) === 0) write(id);
          })();
          for (const id of [T, ids[0] ?? 'none']) {
            expect(findBacklinks(db, readable, id)).toEqual(referenceBacklinks(readable, id));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it('reads as many rows for 3600 backlinks as for 1800, walking the ordered index without sorting them', () => {
    const ins = db.prepare(INSERT);
    const seen: number[] = [];
    for (const n of [1800, 3600]) {
      db.exec('DELETE FROM records');
      db.transaction(() => {
        ins.run({ id: 'hub', partition: 'private', path: 'p/hub.md', lifecycle: 'active', updated: TIMES[0], meta: '{}', body: '' });
        for (let i = 0; i < n; i++) {
          // Half of them tie on updated_at; a few link from the body too.
          const updated = i % 2 === 0 ? '2024-05-05T05:05:05.000Z' : new Date(Date.UTC(2024, 0, 1) + i * 1000).toISOString();
          ins.run({ id: `r${String(i).padStart(5, '0')}`, partition: PARTITIONS[i % 3 === 0 ? 1 : 0]!, path: `p/r${i}.md`, lifecycle: 'active', updated,
            meta: JSON.stringify({ dependencies: ['hub'] }), body: i % 400 === 0 ? 'see [[hub]]' : '' });
        }
      })();
      for (const readable of ['all', ['private', 'conversation:B']] as Array<'all' | PartitionId[]>) {
        const c = countingRows(db);
        const got = findBacklinks(c.db, readable, 'hub');
        expect(got).toEqual(referenceBacklinks(readable, 'hub'));
        expect(got.total).toBe(readable === 'all' ? n : (n / 3) * 2);
        seen.push(c.rows());
        // The page's statement walks records_updated in order: no sort of the backlinks' rows.
        for (const s of c.statements.filter((st) => st.sql.includes('r.title'))) {
          const plan = db.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...s.params) as Array<{ parent: number; detail: string }>;
          const top = plan.filter((p) => p.parent === 0).map((p) => p.detail).join('\n');
          expect(top, s.sql).toMatch(/SCAN r USING INDEX records_updated/);
          expect(top, s.sql).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
        }
      }
    }
    // A count, the body links' candidates (n / 400: 5 then 9) and one page (and the row that ends it).
    expect(seen[0]).toBeLessThanOrEqual(1 + 5 + MAX_BACKLINKS + 1);
    expect(seen[2]! - seen[0]!).toBe(4);
    expect(seen[3]! - seen[1]!).toBeLessThanOrEqual(4);
  });
});

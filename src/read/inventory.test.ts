/**
 * [READ-1] The inventory's cursor: a walk by `nextCursor` lists each record
 * that stays unchanged throughout it exactly once, and none twice, whatever
 * is added, updated or deleted between its pages — on every path the
 * inventory takes (no filter, a column filter, a tag with few or with more
 * than a thousand records, tag and type together). Model-based: fast-check
 * draws the records, the page sizes and the writes between pages.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { migrate, type DB } from '../store/db.js';
import { KnowledgeError } from '../errors.js';
import { listRecords, pageQuery } from './inventory.js';
import { parseListQuery } from './query.js';
import type { ListQuery } from './types.js';
import { UPDATED_ORDER, afterClause } from './summary.js';

let db: DB;
beforeEach(() => {
  db = new Database(':memory:');
  migrate(db);
});
afterEach(() => db.close());

interface Rec { id: string; updated: string; tagged: boolean; claim: boolean }

const UPSERT = `INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
  VALUES (@id, 'private', @path, @kind, @id, 1, 'active', 'x', @updated, @updated, '[]', @tags, @meta, '')
  ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at, title = excluded.title || ' again'`;

function put(r: Rec): void {
  db.prepare(UPSERT).run({
    id: r.id,
    path: `private/pages/${r.id}.md`,
    kind: r.claim ? 'claim' : 'page',
    updated: r.updated,
    tags: JSON.stringify(r.tagged ? ['t'] : []),
    meta: JSON.stringify(r.claim ? { claim_kind: 'fact' } : {}),
  });
}

/** A small pool of instants, so that many records share one and the id decides. */
const instant = (i: number) => `2024-01-01T00:00:${String(i).padStart(2, '0')}Z`;

type Write = { op: 'delete' | 'touch' | 'bump' | 'add'; pick: number; tagged: boolean; claim: boolean };

const writeArb: fc.Arbitrary<Write> = fc.record({
  op: fc.constantFrom('delete', 'touch', 'bump', 'add'),
  pick: fc.nat(),
  tagged: fc.boolean(),
  claim: fc.boolean(),
});

const FILTERS: Array<{ name: string; q: ListQuery; matches: (r: Rec) => boolean }> = [
  { name: 'no filter', q: {}, matches: () => true },
  { name: 'a column filter', q: { kind: 'claim' }, matches: (r) => r.claim },
  { name: 'a tag', q: { tag: 't' }, matches: (r) => r.tagged },
  { name: 'a tag and a type', q: { tag: 't', type: 'fact' }, matches: (r) => r.tagged && r.claim },
];

/**
 * Walk the inventory by cursor with page sizes `limits` (cycled), applying
 * `writes` between pages; check what a cursor promises.
 */
function walkAndCheck(initial: Rec[], limits: number[], writes: Write[][], filter: (typeof FILTERS)[number]): void {
  const live = new Map<string, Rec>();
  for (const r of initial) {
    put(r);
    live.set(r.id, r);
  }
  const changed = new Set<string>();
  let clock = 100; // later than every initial instant
  let added = 0;
  const listed: string[] = [];
  let cursor: string | undefined;
  let prevKey: [string, string] | null = null;
  for (let page = 0; ; page++) {
    const limit = limits[page % limits.length]!;
    const result = listRecords(db, 'all', parseListQuery({ ...filter.q, limit, ...(cursor ? { cursor } : {}) }));
    expect(result.records.length).toBeLessThanOrEqual(limit);
    if (cursor) expect(result.nextOffset).toBeNull();
    expect(result.total).toBe([...live.values()].filter(filter.matches).length);
    for (const r of result.records) {
      // The order goes on from where the previous page stopped.
      const key: [string, string] = [new Date(r.updatedAt).toISOString(), r.id];
      if (prevKey) expect(key[0] < prevKey[0] || (key[0] === prevKey[0] && key[1] > prevKey[1])).toBe(true);
      prevKey = key;
      listed.push(r.id);
    }
    if (result.nextCursor === null) break;
    expect(result.records).toHaveLength(limit);
    cursor = result.nextCursor;
    expect(page).toBeLessThan(2000);
    for (const w of writes[page % Math.max(1, writes.length)] ?? []) {
      const ids = [...live.keys()];
      if (w.op === 'add' || ids.length === 0) {
        const r = { id: `new-${added++}`, updated: instant(59).replace(':59Z', `:59.${String(clock++).padStart(3, '0')}Z`), tagged: w.tagged, claim: w.claim };
        put(r);
        live.set(r.id, r);
        changed.add(r.id);
        continue;
      }
      const id = ids[w.pick % ids.length]!;
      const r = live.get(id)!;
      if (w.op === 'delete') {
        db.prepare('DELETE FROM records WHERE id = ?').run(id);
        live.delete(id);
        changed.add(id);
      } else if (w.op === 'bump') {
        // Updated: its updated_at is now the newest of all.
        const next = { ...r, updated: instant(59).replace(':59Z', `:59.${String(clock++).padStart(3, '0')}Z`) };
        put(next);
        live.set(id, next);
        changed.add(id);
      } else {
        // Rewritten with the same updated_at: it keeps its place.
        put(r);
      }
    }
  }
  expect(new Set(listed).size).toBe(listed.length);
  const mustSee = initial.filter((r) => filter.matches(r) && !changed.has(r.id)).map((r) => r.id).sort();
  const seen = new Set(listed);
  expect(mustSee.filter((id) => !seen.has(id))).toEqual([]);
}

const recsArb = (n: fc.Arbitrary<number>) =>
  n.chain((count) => fc.array(fc.record({ at: fc.integer({ min: 0, max: 4 }), tagged: fc.boolean(), claim: fc.boolean() }), { minLength: count, maxLength: count }))
    .map((rs) => rs.map((r, i) => ({ id: `rec-${String(i).padStart(4, '0')}`, updated: instant(r.at), tagged: r.tagged, claim: r.claim })));

describe('[READ-1] a cursor walk of the inventory beside writers', () => {
  for (const filter of FILTERS) {
    it(`lists every record left alone exactly once, none twice: ${filter.name}`, () => {
      fc.assert(
        fc.property(
          recsArb(fc.integer({ min: 0, max: 40 })),
          fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 4 }),
          fc.array(fc.array(writeArb, { maxLength: 4 }), { maxLength: 6 }),
          (initial, limits, writes) => {
            db.prepare('DELETE FROM records').run();
            walkAndCheck(initial, limits, writes, filter);
          },
        ),
        { numRuns: 60 },
      );
    });
  }

  it('lists every record left alone exactly once when a tag has more than a thousand records (the ordered-index path)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(writeArb, { maxLength: 8 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 150, max: 500 }),
        (writes, limit) => {
          db.prepare('DELETE FROM records').run();
          const initial = Array.from({ length: 1200 }, (_, i) => ({ id: `rec-${String(i).padStart(4, '0')}`, updated: instant(i % 5), tagged: i % 10 !== 0, claim: i % 3 === 0 }));
          walkAndCheck(initial, [limit], writes.map((ws) => ws.map((w) => ({ ...w, tagged: true }))), FILTERS[2]!);
        },
      ),
      { numRuns: 8 },
    );
  });

  it('an offset walk beside the same writes can skip a record (why the cursor exists)', () => {
    for (let i = 0; i < 6; i++) put({ id: `rec-${i}`, updated: instant(0), tagged: false, claim: false });
    const first = listRecords(db, 'all', parseListQuery({ limit: 3 }));
    expect(first.records.map((r) => r.id)).toEqual(['rec-0', 'rec-1', 'rec-2']);
    db.prepare("DELETE FROM records WHERE id = 'rec-0'").run();
    expect(listRecords(db, 'all', parseListQuery({ limit: 3, offset: 3 })).records.map((r) => r.id)).toEqual(['rec-4', 'rec-5']);
    expect(listRecords(db, 'all', parseListQuery({ limit: 3, cursor: first.nextCursor! })).records.map((r) => r.id)).toEqual(['rec-3', 'rec-4', 'rec-5']);
  });

  it('refuses a cursor with an offset, and anything that is not a cursor, with E_VALIDATION', () => {
    put({ id: 'a', updated: instant(1), tagged: false, claim: false });
    put({ id: 'b', updated: instant(0), tagged: false, claim: false });
    const cursor = listRecords(db, 'all', parseListQuery({ limit: 1 })).nextCursor!;
    expect(typeof cursor).toBe('string');
    const code = (q: unknown) => {
      try {
        parseListQuery(q);
        return 'none';
      } catch (err) {
        return err instanceof KnowledgeError ? err.code : String(err);
      }
    };
    expect(code({ cursor, offset: 1 })).toBe('E_VALIDATION');
    expect(code({ cursor, offset: 0 })).toBe('none');
    for (const bad of ['', 'not a cursor', '!!', Buffer.from('[1,2]').toString('base64url'), Buffer.from('["2024-01-01","a"]').toString('base64url'),
      Buffer.from('["2024-01-01T00:00:00.000Z",""]').toString('base64url'), Buffer.from('{').toString('base64url'), 'A'.repeat(2000), 42]) {
      expect(code({ cursor: bad })).toBe('E_VALIDATION');
    }
    // The last page has no next cursor; a cursor past every record gives an empty last page.
    const second = listRecords(db, 'all', parseListQuery({ limit: 1, cursor }));
    expect(second.records.map((r) => r.id)).toEqual(['b']);
    expect(second.nextCursor).toBeNull();
    db.prepare("DELETE FROM records WHERE id = 'b'").run();
    expect(listRecords(db, 'all', parseListQuery({ limit: 1, cursor }))).toEqual({ records: [], total: 1, nextOffset: null, nextCursor: null });
  });

  it('seeks the ordering index to the cursor instead of counting rows up to it', () => {
    const after = afterClause({ updatedKey: '2024-01-01T00:00:00.000Z', id: 'x' });
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT r.id FROM records r WHERE ${after.sql} ORDER BY ${UPDATED_ORDER} LIMIT 5`)
      .all(...after.params) as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join('\n')).toMatch(/USING (COVERING )?INDEX records_updated \(<expr><\?\)/);
  });
});

describe('[READ-1][SURF-3] the inventory of several partitions (an agent with a session)', () => {
  const PARTS = ['private', 'conversation:s1', 'conversation:s2'] as const;
  const rows = fc.uniqueArray(fc.record({ n: fc.nat({ max: 400 }), part: fc.constantFrom(...PARTS), at: fc.nat({ max: 5 }), claim: fc.boolean() }),
    { selector: (r) => r.n, maxLength: 60 });

  function fill(recs: Array<{ n: number; part: string; at: number; claim: boolean }>): void {
    const ins = db.prepare(`INSERT INTO records(id, partition, path, kind, title, revision, lifecycle, sha256, recorded_at, updated_at, aliases, tags, meta, body)
      VALUES (?, ?, ?, ?, ?, 1, 'active', 'x', ?, ?, '[]', '[]', '{}', '')`);
    for (const r of recs) {
      const id = `r${r.n}`;
      ins.run(id, r.part, `${r.part}/pages/${id}.md`, r.claim ? 'claim' : 'page', id, instant(r.at), instant(r.at));
    }
  }

  it('pages, by offset and by cursor, are the slices of every readable record in the order, with and without a column filter', () => {
    fc.assert(fc.property(rows, fc.subarray([...PARTS], { minLength: 2 }), fc.integer({ min: 1, max: 7 }), fc.boolean(), (recs, readable, limit, claimsOnly) => {
      db.exec('DELETE FROM records');
      fill(recs);
      const q = claimsOnly ? { kind: 'claim' as const } : {};
      // What every readable record is, in the order (updated_at descending, then id), as the operator's list sees it.
      const expected = listRecords(db, 'all', parseListQuery({ ...q, limit: 500 })).records
        .filter((r) => (readable as string[]).includes(r.partition)).map((r) => r.id);
      const byOffset: string[] = [];
      for (let offset = 0; offset < expected.length + limit; offset += limit) {
        const page = listRecords(db, readable, parseListQuery({ ...q, limit, offset }));
        expect(page.total).toBe(expected.length);
        byOffset.push(...page.records.map((r) => r.id));
      }
      expect(byOffset).toEqual(expected);
      const byCursor: string[] = [];
      let cursor: string | undefined;
      do {
        const page = listRecords(db, readable, parseListQuery({ ...q, limit, ...(cursor ? { cursor } : {}) }));
        byCursor.push(...page.records.map((r) => r.id));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(byCursor).toEqual(expected);
    }), { seed: 20261208, numRuns: 150 });
  });

  it('reads each partition in order from records_partition_updated, at most the page\'s rows, and merges them (no sort of all their records)', () => {
    const page = pageQuery(['private', 'conversation:s1'], null, [], null, 100, 0);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${page.sql}`).all(...page.params) as Array<{ detail: string }>).map((p) => p.detail);
    expect(plan).toContain('MERGE (UNION ALL)');
    expect(plan.filter((d) => d === 'SEARCH r USING INDEX records_partition_updated (partition=?)')).toHaveLength(2);
    // Each partition's read stops at the page's rows.
    expect(page.sql.match(/LIMIT \?\)/g)).toHaveLength(2);
    expect(page.params).toEqual(['private', 100, 'conversation:s1', 100, 100, 0]);
  });
});

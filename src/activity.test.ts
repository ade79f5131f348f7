/**
 * Activity's order and cursor (Appendix A, SURF-2; src/activity.ts): a walk
 * by entries' `cursor` lists every entry that existed when it began exactly
 * once, in one total order, whatever arrives between its pages — including
 * entries of every kind made in the same millisecond. Model-based: fast-check
 * draws the entries, the page sizes and the arrivals.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { migrate, type DB } from './store/db.js';
import { KnowledgeError } from './errors.js';
import { activityPage, activityQuery, activityStart, parseActivityCursor } from './activity.js';
import { encodeCursor } from './read/query.js';

let db: DB;
beforeEach(() => {
  db = new Database(':memory:');
  migrate(db);
});
afterEach(() => db.close());

type Kind = 'publication' | 'attachment' | 'scan';
const KINDS: Kind[] = ['publication', 'attachment', 'scan'];
const EMPTY_SCAN = JSON.stringify({ baseline: false, added: [], modified: [], deleted: [], renamed: [], diagnostics: [] });

let made = 0;
/** One entry of `kind` made at `at`; its id. */
function make(kind: Kind, at: string): string {
  const id = `${kind.slice(0, 3)}-${made++}`;
  if (kind === 'publication') {
    db.prepare(`INSERT INTO publications(publication_id, request_id, request_hash, partition, actor, status, created_at, plan)
      VALUES (?, ?, 'h', 'private', 'agent', 'journaled', ?, '{}')`).run(id, `req-${id}`, at);
  } else if (kind === 'attachment') {
    db.prepare(`INSERT INTO attachments(attachment_id, request_id, request_hash, partition, actor, filename, attribution, sha256, size, state, received, created_at, updated_at)
      VALUES (?, ?, 'h', 'private', 'agent', 'f.txt', 'a', 'x', 10, 'receiving', 0, ?, ?)`).run(id, `req-${id}`, at, at);
  } else {
    db.prepare(`INSERT INTO scans(scan_id, partition, caller, created_at, batch_id, receipt) VALUES (?, 'private', 'operator', ?, NULL, ?)`).run(id, at, EMPTY_SCAN);
  }
  return id;
}

/** A small pool of instants, so that many entries share one. */
const instant = (i: number) => `2026-01-01T00:00:0${i}.000Z`;

const page = (limit: number, offset = 0, cursor?: string) => activityPage(db, limit, offset, activityStart(offset, cursor));

describe('[SURF-2] Activity by cursor', () => {
  it('a cursor walk lists every entry there was when it began exactly once, newest first, whatever arrives meanwhile', () => {
    const entryArb = fc.record({ kind: fc.constantFrom(...KINDS), at: fc.integer({ min: 0, max: 3 }) });
    fc.assert(fc.property(
      fc.array(entryArb, { maxLength: 40 }),
      fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 5 }),
      fc.array(fc.array(entryArb, { maxLength: 3 }), { maxLength: 8 }),
      (initial, limits, arrivals) => {
        db.exec('DELETE FROM publications; DELETE FROM attachments; DELETE FROM scans;');
        const before = initial.map((e) => make(e.kind, instant(e.at)));
        // Each page: the entries after the previous page's last one, in the order the whole list has.
        const whole = page(500).map((e) => e.id);
        expect(new Set(whole)).toEqual(new Set(before));
        const listed: string[] = [];
        let cursor: string | undefined;
        for (let n = 0; ; n++) {
          const limit = limits[n % limits.length]!;
          const got = page(limit + 1, 0, cursor);
          const shown = got.slice(0, limit);
          listed.push(...shown.map((e) => e.id));
          if (got.length <= limit) break;
          cursor = shown[shown.length - 1]!.cursor;
          // Arrivals at any instant (a clock may go back): later or earlier than the cursor.
          for (const a of arrivals[n % Math.max(1, arrivals.length)] ?? []) make(a.kind, instant(a.at));
          expect(n).toBeLessThan(500);
        }
        expect(new Set(listed).size).toBe(listed.length);
        const seen = new Set(listed);
        expect(before.filter((id) => !seen.has(id))).toEqual([]);
        // Without arrivals the walk is exactly the whole list, in its order.
        if (arrivals.every((a) => a.length === 0)) expect(listed).toEqual(whole);
      },
    ), { numRuns: 150 });
  });

  it('orders entries of one millisecond by kind (publications, attachments, scans), then the newest row first; offset pages are slices of it', () => {
    const p1 = make('publication', instant(1));
    const s1 = make('scan', instant(1));
    const a1 = make('attachment', instant(1));
    const p2 = make('publication', instant(1));
    const old = make('scan', instant(0));
    const newest = make('attachment', instant(2));
    const order = [newest, p2, p1, a1, s1, old];
    expect(page(10).map((e) => e.id)).toEqual(order);
    for (let k = 0; k < order.length; k++) {
      expect(page(2, k).map((e) => e.id)).toEqual(order.slice(k, k + 2));
      expect(page(2, 0, page(10)[k]!.cursor).map((e) => e.id)).toEqual(order.slice(k + 1, k + 3));
    }
  });

  it('an offset page is the same slice of the whole order whatever kind crowds the entries before it', () => {
    fc.assert(fc.property(
      fc.array(fc.record({ kind: fc.constantFrom(...KINDS), at: fc.integer({ min: 0, max: 3 }) }), { maxLength: 30 }),
      fc.integer({ min: 1, max: 6 }),
      (entries, limit) => {
        db.exec('DELETE FROM publications; DELETE FROM attachments; DELETE FROM scans;');
        // The model: newest first, then by kind, then the newest made first.
        const model = entries.map((e, i) => ({ id: make(e.kind, instant(e.at)), at: e.at, rank: KINDS.indexOf(e.kind), i }))
          .sort((a, b) => b.at - a.at || a.rank - b.rank || b.i - a.i).map((e) => e.id);
        expect(page(500).map((e) => e.id)).toEqual(model);
        for (let offset = 0; offset <= model.length; offset++) {
          expect(page(limit, offset).map((e) => e.id), `limit ${limit} offset ${offset}`).toEqual(model.slice(offset, offset + limit));
        }
      },
    ), { numRuns: 100 });
  });

  it('an offset walk shows an entry twice when one arrives between its pages (why the cursor exists)', () => {
    for (let i = 0; i < 4; i++) make('publication', instant(1));
    const first = page(2);
    make('scan', instant(3));
    expect(page(2, 2).map((e) => e.id)).toContain(first[1]!.id);
    expect(page(2, 0, first[1]!.cursor).map((e) => e.id).filter((id) => first.some((e) => e.id === id))).toEqual([]);
  });

  it('refuses a cursor with an offset, and anything that is not an entry\'s cursor, with E_VALIDATION', () => {
    make('publication', instant(1));
    const cursor = page(1)[0]!.cursor;
    const code = (f: () => unknown) => {
      try {
        f();
        return 'none';
      } catch (err) {
        return err instanceof KnowledgeError ? err.code : String(err);
      }
    };
    expect(code(() => activityStart(1, cursor))).toBe('E_VALIDATION');
    expect(code(() => activityStart(0, cursor))).toBe('none');
    // An empty cursor is not an entry's cursor either (not "from the newest").
    expect(code(() => activityStart(0, ''))).toBe('E_VALIDATION');
    for (const bad of ['', 'x y', '!!', encodeCursor(['2026-01-01T00:00:00.000Z', 3, 1]), encodeCursor(['2026-01-01T00:00:00.000Z', 0]),
      encodeCursor(['', 0, 1]), encodeCursor(['2'.repeat(65), 0, 1]), encodeCursor(['2026-01-01T00:00:00.000Z', 0, 1.5]), encodeCursor(['2026-01-01T00:00:00.000Z', '0', 1]), 'a'.repeat(2000)]) {
      expect(code(() => parseActivityCursor(bad)), bad).toBe('E_VALIDATION');
    }
    // A place's instant may be up to 64 characters (a cursor names it, whatever the row holds).
    expect(parseActivityCursor(encodeCursor(['2'.repeat(64), 2, 1]))).toEqual({ createdAt: '2'.repeat(64), rank: 2, rowid: 1 });
    // The last entry's cursor gives an empty page.
    expect(page(5, 0, cursor)).toEqual([]);
  });

  it('reads each kind\'s places newest first from its created_at index alone, never sorting or reading a whole table', () => {
    for (const kind of KINDS) {
      for (const after of [undefined, ...[0, 1, 2].map((rank) => ({ createdAt: instant(1), rank, rowid: 5 }))]) {
        const q = activityQuery(kind, 5, after);
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.params) as Array<{ detail: string }>).map((p) => p.detail).join('\n');
        expect(plan, `${kind} ${JSON.stringify(after)}`).toMatch(/USING COVERING INDEX (publications|attachments|scans)_created/);
        expect(plan, `${kind} ${JSON.stringify(after)}`).not.toMatch(/TEMP B-TREE/);
      }
    }
  });
});

import { describe, expect, it } from 'vitest';
import { committedPaths, isEmptyPlan, isRacy, isUnchanged, planScan } from './plan.js';
import { knownEntry, msFromNs } from './known.js';
import type { HashedFile, MissingFile } from './types.js';

const h = (path: string, sha256: string, knownSha256: string | null = null, recordId: string | null = null): HashedFile => ({ path, sha256, knownSha256, recordId });
const m = (path: string, sha256: string, recordId: string | null = null): MissingFile => ({ path, sha256, recordId });

describe('isUnchanged [SCAN-4]: metadata decides, contents are not read', () => {
  const known = knownEntry(10, '1700000000123456789', '1700000000223456789', '42', false);
  const st = { size: 10, mtimeMs: msFromNs('1700000000123456789'), ctimeMs: msFromNs('1700000000223456789'), ino: 42 };
  it('same size, mtime, ctime and inode is unchanged', () => expect(isUnchanged(known, st)).toBe(true));
  it('a new file is not', () => expect(isUnchanged(undefined, st)).toBe(false));
  it('another size is not', () => expect(isUnchanged(known, { ...st, size: 11 })).toBe(false));
  it('another mtime is not', () => expect(isUnchanged(known, { ...st, mtimeMs: msFromNs('1700000000124456789') })).toBe(false));
  it('another inode (save by rename) is not', () => expect(isUnchanged(known, { ...st, ino: 43 })).toBe(false));
  it('another ctime (an edit that put the old mtime back) is not', () => expect(isUnchanged(known, { ...st, ctimeMs: msFromNs('1700000001223456789') })).toBe(false));
  it('a row recorded without a ctime (before migration 009) is read again', () => expect(isUnchanged(knownEntry(10, '1700000000123456789', null, '42', false), st)).toBe(false));
  it('a racy entry is read again even when everything matches', () => expect(isUnchanged(knownEntry(10, '1700000000123456789', '1700000000223456789', '42', true), st)).toBe(false));
});

describe('isRacy: fingerprints taken in the same clock tick as an edit are not trusted', () => {
  const now = 1_700_000_000_000_000_000n;
  const old = String(now - 10_000_000_000n);
  it('times long before the scan are trusted', () => expect(isRacy(now, old, old)).toBe(false));
  it('an mtime just before the scan is racy', () => expect(isRacy(now, String(now - 1_000_000n), old)).toBe(true));
  it('a ctime just before the scan is racy, whatever the mtime (`touch -r`, `cp -p`)', () => expect(isRacy(now, old, String(now - 1_000_000n))).toBe(true));
  it('an mtime after the scan started is racy', () => expect(isRacy(now, String(now + 5n), old)).toBe(true));
  it('whole-second timestamps get a two-second window', () => {
    expect(isRacy(now, String(now - 1_000_000_000n), old)).toBe(true);
    expect(isRacy(now, String(now - 3_000_000_000n), old)).toBe(false);
    expect(isRacy(now, old, String(now - 1_000_000_000n))).toBe(true);
  });
});

describe('planScan [SCAN-1]: classify by path, pair the rest into renames', () => {
  it('a path that exists before and after is an edit, however it was saved', () => {
    const plan = planScan([h('private/a.md', 'new', 'old')], []);
    expect(plan).toEqual({ added: [], modified: ['private/a.md'], deleted: [], renamed: [], touched: [] });
  });

  it('same bytes as recorded (touch) is only a fingerprint refresh', () => {
    const plan = planScan([h('private/a.md', 'same', 'same')], []);
    expect(plan.touched).toEqual(['private/a.md']);
    expect(isEmptyPlan(plan)).toBe(true);
  });

  it('new and gone files with identical bytes are a rename, also across folders and in letter case only', () => {
    const plan = planScan(
      [h('private/b/moved.md', 's1'), h('private/foo.md', 's2'), h('private/brand-new.md', 's3')],
      [m('private/a/moved.md', 's1'), m('private/Foo.md', 's2'), m('private/gone.md', 's4')],
    );
    expect(plan.renamed).toEqual([
      { from: 'private/a/moved.md', to: 'private/b/moved.md' },
      { from: 'private/Foo.md', to: 'private/foo.md' },
    ]);
    expect(plan.added).toEqual(['private/brand-new.md']);
    expect(plan.deleted).toEqual(['private/gone.md']);
  });

  it('identical copies pair by file name first', () => {
    const plan = planScan([h('private/x/one.md', 's'), h('private/x/two.md', 's')], [m('private/two.md', 's'), m('private/one.md', 's')]);
    expect(plan.renamed).toEqual([
      { from: 'private/one.md', to: 'private/x/one.md' },
      { from: 'private/two.md', to: 'private/x/two.md' },
    ]);
  });

  it('a file moved under its own name keeps it, though another new file of the same bytes sorts first', () => {
    // A/x.md moved to x.md while A.md gets the same bytes: x.md is the move, A.md is new.
    const plan = planScan([h('private/A.md', 's'), h('private/x.md', 's')], [m('private/A/x.md', 's')]);
    expect(plan.renamed).toEqual([{ from: 'private/A/x.md', to: 'private/x.md' }]);
    expect(plan.added).toEqual(['private/A.md']);
    // The same folder before any other folder, whatever the order of the new files.
    const byFolder = planScan([h('private/a/new1.md', 's'), h('private/b/new2.md', 's')], [m('private/b/old.md', 's'), m('private/c/old2.md', 's')]);
    expect(byFolder.renamed).toEqual([{ from: 'private/c/old2.md', to: 'private/a/new1.md' }, { from: 'private/b/old.md', to: 'private/b/new2.md' }]);
  });

  it('a record renamed and edited pairs by its id when the id is unambiguous', () => {
    const plan = planScan([h('private/new-name.md', 'v2', null, 'rec-1'), h('private/other.md', 'v9', null, 'rec-2'), h('private/twin.md', 'v8', null, 'rec-2')],
      [m('private/old-name.md', 'v1', 'rec-1'), m('private/gone.md', 'v7', 'rec-2')]);
    // Its bytes changed too, which the rename says: a receipt's reader cannot tell it from the lists otherwise.
    expect(plan.renamed).toEqual([{ from: 'private/old-name.md', to: 'private/new-name.md', edited: true }]);
    expect(plan.added).toEqual(['private/other.md', 'private/twin.md']);
    expect(plan.deleted).toEqual(['private/gone.md']);
  });

  it('committedPaths writes new bytes for added, modified and rename targets and deletes the rest', () => {
    const plan = planScan([h('private/a.md', 'n', 'o'), h('private/c.md', 'x'), h('private/d.md', 'r')], [m('private/b.md', 'r'), m('private/e.md', 'q')]);
    expect(committedPaths(plan)).toEqual({ write: ['private/a.md', 'private/c.md', 'private/d.md'], remove: ['private/b.md', 'private/e.md'] });
  });

  it('nothing observed is an empty plan', () => {
    expect(isEmptyPlan(planScan([], []))).toBe(true);
  });
});

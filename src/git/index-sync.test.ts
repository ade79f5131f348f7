import { describe, expect, it } from 'vitest';
import { intentToAddPaths, parseFilterSections, parseLsFiles, planIndexUpdate, type Entry, type IndexJob } from './index-sync.js';

const e = (oid: string, mode = '100644'): Entry => ({ mode, oid: oid.repeat(40).slice(0, 40) });
const A = e('a');
const B = e('b');
const C = e('c');
const USER = e('f');
const ZERO = '0'.repeat(40);

function job(over: Partial<IndexJob> = {}): IndexJob {
  return { paths: ['p.md'], objectFormat: 'sha1', before: [], base: 'T', reusedSteps: [], newSteps: [], ...over };
}
function plan(j: IndexJob, trees: Record<string, Record<string, Entry>>, user: Record<string, Entry>, conflicted: string[] = []) {
  return planIndexUpdate({
    job: j,
    trees: new Map(Object.entries(trees).map(([c, t]) => [c, new Map(Object.entries(t))])),
    user: new Map(Object.entries(user)),
    conflicted: new Set(conflicted),
  });
}

describe('planIndexUpdate [GIT-10]', () => {
  it.each([
    ['the user index still at the base moves to the final entry', { T: { 'p.md': A } }, { 'p.md': A }, [new Map([['p.md', B]])], [`100644 ${B.oid}\tp.md\0`], 0],
    ['an entry at an intermediate commit of the chain moves to the final entry', { T: { 'p.md': A } }, { 'p.md': B }, [new Map([['p.md', B]]), new Map([['p.md', C]])], [`100644 ${C.oid}\tp.md\0`], 0],
    ['an entry the user staged is left alone', { T: { 'p.md': A } }, { 'p.md': USER }, [new Map([['p.md', B]])], [], 1],
    ['an entry already final is not rewritten', { T: { 'p.md': A } }, { 'p.md': B }, [new Map([['p.md', B]])], [], 0],
    ['a new file absent from the index is added', { T: {} }, {}, [new Map([['p.md', B]])], [`100644 ${B.oid}\tp.md\0`], 0],
    ['a deletion removes the entry', { T: { 'p.md': A } }, { 'p.md': A }, [new Map<string, Entry | null>([['p.md', null]])], [`0 ${ZERO}\tp.md\0`], 0],
    ['a file the user removed from the index stays removed when it existed at the base', { T: { 'p.md': A } }, {}, [new Map([['p.md', B]])], [], 1],
    ['a path no new commit touches ends at the base entry', { T: { 'p.md': A } }, { 'p.md': A }, [new Map([['q.md', B]])], [], 0],
  ] as const)('%s', (_name, trees, user, newSteps, lines, skipped) => {
    const p = plan(job({ newSteps: newSteps as never }), trees as never, user as never);
    expect(p.lines).toEqual(lines);
    expect(p.skipped).toBe(skipped);
    expect(p.updated).toBe(lines.length);
  });

  it('an unresolved conflict on a path is never touched', () => {
    const p = plan(job({ newSteps: [new Map([['p.md', B]])] }), { T: { 'p.md': A } }, {}, ['p.md']);
    expect(p).toEqual({ lines: [], written: [], updated: 0, skipped: 1 });
  });

  it('a path git refuses in any index (git~1/…, committed by an older Knowledge) is left out, not written', () => {
    const j = job({ paths: ['git~1/x.md', 'p.md'], newSteps: [new Map([['git~1/x.md', B], ['p.md', B]])] });
    const p = plan(j, { T: {} }, {});
    expect(p).toEqual({ lines: [`100644 ${B.oid}\tp.md\0`], written: ['p.md'], updated: 1, skipped: 1 });
  });

  it('after a crash, entries of the reused commits and of their parent all count as Knowledge\'s', () => {
    // Parent P had A; reused commits set B then C; the user moved the tip T (C) on;
    // a new commit sets p.md to A again.
    const j = job({ before: ['P'], base: 'T', reusedSteps: [new Map([['p.md', B]]), new Map([['p.md', C]])], newSteps: [new Map([['p.md', e('d')]])] });
    for (const user of [A, B, C]) {
      expect(plan(j, { P: { 'p.md': A }, T: { 'p.md': C } }, { 'p.md': user }).lines).toEqual([`100644 ${e('d').oid}\tp.md\0`]);
    }
    expect(plan(j, { P: { 'p.md': A }, T: { 'p.md': C } }, { 'p.md': USER }).skipped).toBe(1);
  });

  it('a resync with no new commits ends at the base (the last recorded commit)', () => {
    const j = job({ before: ['P'], base: 'L', reusedSteps: [new Map([['p.md', B]])] });
    expect(plan(j, { P: { 'p.md': A }, L: { 'p.md': B } }, { 'p.md': A }).lines).toEqual([`100644 ${B.oid}\tp.md\0`]);
  });

  it('uses 64-digit zero ids for deletions in sha256 repositories', () => {
    const long = { mode: '100644', oid: 'a'.repeat(64) };
    const p = planIndexUpdate({
      job: job({ objectFormat: 'sha256', newSteps: [new Map([['p.md', null]])] }),
      trees: new Map([['T', new Map([['p.md', long]])]]),
      user: new Map([['p.md', long]]),
      conflicted: new Set(),
    });
    expect(p.lines).toEqual([`0 ${'0'.repeat(64)}\tp.md\0`]);
  });

  it('a mode change alone counts as a different entry', () => {
    const p = plan(job({ newSteps: [new Map([['p.md', B]])] }), { T: { 'p.md': A } }, { 'p.md': e('a', '100755') });
    expect(p.skipped).toBe(1);
  });
});

describe('parseFilterSections', () => {
  it.each([
    ['[core]\n\tbare = false\n', []],
    ['[filter "lfs"]\n\tclean = git-lfs clean\n[filter "x y"]\n\tsmudge = cat\n', ['lfs', 'x y']],
    ['[filter "q\\"uote"]\n', ['q"uote']],
    ['[Filter.Old]\n\tclean = cat\n', ['old']],
    ['  [filter "indented"] clean = cat\n', ['indented']],
    // Several headers on one line: git reads every one.
    ['[core] [filter "evil"]\n\tclean = evil\n', ['evil']],
    ['[core]\tbare = false [filter "not-a-header"]\n', []],
    // A dotted section with a subsection: git reads filter.a.b.clean, the driver `a.b` (found by review).
    ['[filter.A "b"]\n\tclean = evil\n', ['a.b']],
  ])('%j -> %j', (text, want) => {
    expect([...(parseFilterSections(text) ?? ['<null>'])]).toEqual(want);
  });
  it.each([
    '[include]\n\tpath = other\n', '[includeIf "gitdir:/x/"]\n\tpath = y\n', '[weird section\n',
    // Headers git reads where a line-by-line reading would not (found by review: the filter ran).
    '[core] [include]\n\tpath = /tmp/inc.cfg\n', '[core]\r[filter "evil"]\r\tclean = evil\n', '\uFEFF[filter "bom"]\n\tclean = x\n',
  ])('asks git when the file includes others or cannot be read as git reads it: %j', (text) => {
    expect(parseFilterSections(text)).toBeNull();
  });
});

describe('intentToAddPaths', () => {
  it('reads the intent-to-add flag of each entry from ls-files -z --debug, whatever the path holds', () => {
    const block = (flags: string) => `  ctime: 0:0\n  mtime: 0:0\n  dev: 0\tino: 0\n  uid: 0\tgid: 0\n  size: 0\tflags: ${flags}\n`;
    const out = Buffer.from(`staged.md\0${block('0')}ita.md\0${block('20004000')}odd\nname flags: 20000000.md\0${block('4000')}ext.md\0${block('60000000')}`);
    expect(intentToAddPaths(out)).toEqual(['ita.md', 'ext.md']);
    expect(intentToAddPaths(Buffer.alloc(0))).toEqual([]);
  });
});

describe('parseLsFiles: `ls-files -s -v -z` entries, conflicts and the user\'s flags', () => {
  it('reads the tag of each entry: S skip-worktree, lower case assume-unchanged; unmerged stages are conflicts', () => {
    const oid = 'a'.repeat(40);
    const out = Buffer.from([`H 100644 ${oid} 0\tp.md`, `S 100644 ${oid} 0\ts.md`, `h 100644 ${oid} 0\th.md`, `s 100755 ${oid} 0\tsh.md`, `M 100644 ${oid} 1\tc.md`, `M 100644 ${oid} 2\tc.md`, `H 100644 ${oid} 0\tother.md`, ''].join('\0'));
    const r = parseLsFiles(out, new Set(['p.md', 's.md', 'h.md', 'sh.md', 'c.md']));
    expect([...r.entries.keys()]).toEqual(['p.md', 's.md', 'h.md', 'sh.md']);
    expect(r.entries.get('sh.md')).toEqual({ mode: '100755', oid });
    expect([...r.conflicted]).toEqual(['c.md']);
    expect(Object.fromEntries(r.flags)).toEqual({
      's.md': { skipWorktree: true, assumeUnchanged: false },
      'h.md': { skipWorktree: false, assumeUnchanged: true },
      'sh.md': { skipWorktree: true, assumeUnchanged: true },
    });
  });
});

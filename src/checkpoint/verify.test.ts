import { describe, expect, it } from 'vitest';
import { checkAgainWhileMoving, checkStore, numberRanges, type BatchFact, type FileFact, type RepoFacts, type VerifyReport } from './verify.js';
import { Trailers } from '../git/trailers.js';

/** The pure half of `knowledge verify`: rows and repository facts in, coded problems out. */
const V = 'vault-1';
const c = (n: number) => String(n).repeat(40).slice(0, 40);
const blob = (n: number) => `b${n}`.padEnd(40, '0');

function batch(id: number, over: Partial<BatchFact> = {}): BatchFact {
  return { batchId: id, kind: 'publication', refId: `pub-${id}`, state: 'committed', commit: c(id), ...over };
}
function file(id: number, over: Partial<FileFact> = {}): FileFact {
  return { batchId: id, path: `p/${id}.md`, deleted: false, blobOid: blob(id), hasBytes: false, ...over };
}
function tr(pairs: Array<[string, string]>): Trailers {
  const t = new Trailers();
  for (const [k, v] of pairs) t.add(k, v);
  return t;
}
/** A linear history with commits 3, 2, 1 (newest first), each carrying its trailers and bytes. */
function repo(ids = [1, 2, 3]): RepoFacts {
  const order = [...ids].reverse().map(c);
  const trailers = new Map(ids.map((id) => [c(id), tr([['Knowledge-Batch', `${V}/${id}`], ['Knowledge-Publication', `pub-${id}`]])]));
  const blobs = new Map<string, string | null>(ids.map((id) => [`${c(id)}:p/${id}.md`, blob(id)]));
  return { order, trailers, existing: new Set(), blobs };
}
const run = (batches: BatchFact[], files: FileFact[], r: RepoFacts | null = repo()) =>
  checkStore({ vaultId: V, batches, files, publications: batches.map((b) => ({ publicationId: b.refId, status: 'acknowledged', batchId: b.batchId })), repo: r });
const codes = (x: ReturnType<typeof run>) => x.problems.map((p) => p.code);

describe('checkStore', () => {
  const ok = [batch(1), batch(2), batch(3)];
  const okFiles = [file(1), file(2), file(3)];

  it('a consistent store has no problems and compares every file', () => {
    const r = run(ok, okFiles);
    expect(r.problems).toEqual([]);
    expect(r.checkedFiles).toBe(3);
  });

  it.each([
    ['commit-missing', () => run([batch(1), batch(2, { commit: 'f'.repeat(40) }), batch(3)], okFiles)],
    ['not-on-branch', () => { const r = repo(); r.existing.add('e'.repeat(40)); return run([batch(1), batch(2), batch(3, { commit: 'e'.repeat(40) })], okFiles, r); }],
    ['bytes-mismatch', () => run(ok, [file(1), file(2, { blobOid: blob(9) }), file(3)])],
    ['bytes-mismatch', () => run(ok, [file(1), file(2, { deleted: true, blobOid: null }), file(3)])],
    ['wrong-commit', () => { const r = repo(); r.trailers.set(c(2), tr([['Knowledge-Batch', `${V}/2`], ['Knowledge-Publication', 'pub-other']])); return run(ok, okFiles, r); }],
    ['duplicate-commit', () => { const r = repo(); r.order.unshift('d'.repeat(40)); r.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', `${V}/2`], ['Knowledge-Publication', 'pub-2']])); return run(ok, okFiles, r); }],
    ['unknown-batch', () => { const r = repo(); r.order.unshift('d'.repeat(40)); r.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', `${V}/7`]])); return run(ok, okFiles, r); }],
    ['unrecorded-commit', () => run([batch(1), batch(2), batch(3, { state: 'queued', commit: null })], [file(1), file(2), file(3, { hasBytes: true })])],
    ['queue-order', () => run([batch(1), batch(2, { state: 'queued', commit: null }), batch(3)], [file(1), file(2, { hasBytes: true }), file(3)], repo([1, 3]))],
    ['bytes-missing', () => run([batch(1), batch(2), batch(3), batch(4, { state: 'queued', commit: null })], [...okFiles, file(4, { hasBytes: false, blobOid: null })])],
    ['history-order', () => run([batch(1, { commit: c(2) }), batch(2, { commit: c(1) }), batch(3)], okFiles)],
  ])('%s', (code, make) => {
    expect(codes(make())).toContain(code);
  });

  it('ignores trailers of another vault and files recorded without a blob id', () => {
    const r = repo();
    r.order.unshift('d'.repeat(40));
    r.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', 'other-vault/2']]));
    const x = run(ok, [file(1), file(2, { blobOid: null }), file(3)], r);
    expect(x.problems).toEqual([]);
    expect(x.filesWithoutBlobId).toBe(1);
  });

  it('a commit is a batch\'s only with its publication, scan or attachment too: a number another batch took is unknown-batch, not a duplicate', () => {
    // Batch 2 of another publication (a restored older state.sqlite numbered again, or another copy of the vault).
    const r = repo();
    r.order.unshift('d'.repeat(40));
    r.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', `${V}/2`], ['Knowledge-Publication', 'pub-beta']]));
    const x = run(ok, okFiles, r);
    expect(x.problems).toEqual([expect.objectContaining({ code: 'unknown-batch', batchId: 2, commit: 'd'.repeat(40) }), expect.objectContaining({ code: 'state-behind-history', batchId: 2 })]);
    expect(x.problems[0]!.message).toBe(`commit ${'d'.repeat(40)} names batch 2 (Knowledge-Publication: pub-beta), which this store never queued; this store's batch 2 is publication pub-2, so knowledge resume does not record this commit`);
    // Only a Knowledge-Batch trailer: no batch's either.
    const bare = repo();
    bare.order.unshift('e'.repeat(40));
    bare.trailers.set('e'.repeat(40), tr([['Knowledge-Batch', `${V}/2`]]));
    expect(codes(run(ok, okFiles, bare))).toEqual(['unknown-batch']);
    // Batch 3 still waiting while another batch 3 is on the branch: not unrecorded-commit (resume would not record it).
    const q = repo();
    q.trailers.set(c(3), tr([['Knowledge-Batch', `${V}/3`], ['Knowledge-Scan', 'scan-9']]));
    expect(codes(run([batch(1), batch(2), batch(3, { state: 'queued', commit: null })], [file(1), file(2), file(3, { hasBytes: true })], q))).toEqual(['unknown-batch', 'state-behind-history']);
  });

  it('state-behind-history: checkpoints of this vault the store never queued are said once, with their batch numbers; a bare copied trailer is not one', () => {
    // The store knows batches 1-2 (an older state.sqlite); the branch holds 1-5 and a hand-made trailer for 9.
    const r = repo([1, 2, 3, 4, 5]);
    r.order.unshift('d'.repeat(40));
    r.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', `${V}/9`]]));
    const x = run([batch(1), batch(2)], [file(1), file(2)], r);
    expect(codes(x)).toEqual(['unknown-batch', 'unknown-batch', 'unknown-batch', 'unknown-batch', 'state-behind-history']);
    const behind = x.problems.find((p) => p.code === 'state-behind-history')!;
    expect(behind.batchId).toBe(5);
    expect(behind.message).toMatch(/^the branch holds 3 checkpoints of this vault that state\.sqlite never queued \(batches 3-5\): was an older state\.sqlite restored/);
    const bare = repo();
    bare.order.unshift('d'.repeat(40));
    bare.trailers.set('d'.repeat(40), tr([['Knowledge-Batch', `${V}/9`]]));
    expect(codes(run(ok, okFiles, bare))).toEqual(['unknown-batch']);
  });

  it('numberRanges shows runs as ranges', () => {
    expect(numberRanges([7, 2, 5, 6, 2])).toBe('2, 5-7');
    expect(numberRanges([4])).toBe('4');
  });

  it('a receipt naming another batch is receipt-mismatch', () => {
    const x = checkStore({ vaultId: V, batches: ok, files: okFiles, publications: [{ publicationId: 'pub-1', status: 'acknowledged', batchId: 2 }], repo: repo() });
    expect(codes(x)).toEqual(['receipt-mismatch']);
  });
});

describe('verify beside a writer: a problem that a checkpoint in progress explains is checked again', () => {
  const report = (ok: boolean, tip: string, committed: number): VerifyReport => ({
    ok,
    store: '/s',
    branch: 'refs/heads/main',
    tip,
    batches: { total: 5, committed, queued: 5 - committed },
    checked: { commits: committed, files: 0, filesWithoutBlobId: 0 },
    problems: ok ? [] : [{ code: 'unrecorded-commit', message: 'batch 5 is on the branch but recorded as queued' }],
  });
  const sequence = (...reports: VerifyReport[]) => {
    let calls = 0;
    return { check: async () => reports[Math.min(calls++, reports.length - 1)]!, calls: () => calls };
  };

  it('a problem gone on the second look (the checkpoint was recorded meanwhile) is not reported', async () => {
    const s = sequence(report(false, 'a', 4), report(true, 'a', 5));
    expect(await checkAgainWhileMoving(s.check, 1)).toMatchObject({ ok: true });
    expect(s.calls()).toBe(2);
  });

  it('a problem that stays while nothing moved is real: reported after one more look', async () => {
    const s = sequence(report(false, 'a', 4), report(false, 'a', 4), report(true, 'a', 4));
    expect(await checkAgainWhileMoving(s.check, 1)).toMatchObject({ ok: false });
    expect(s.calls()).toBe(2);
  });

  it('while the branch or the batches keep moving, it looks again, at most three times in all', async () => {
    const s = sequence(report(false, 'a', 3), report(false, 'b', 4), report(false, 'c', 5), report(true, 'c', 5));
    expect(await checkAgainWhileMoving(s.check, 1)).toMatchObject({ ok: false, tip: 'c' });
    expect(s.calls()).toBe(3);
    const ok = sequence(report(true, 'a', 5));
    expect(await checkAgainWhileMoving(ok.check, 1)).toMatchObject({ ok: true });
    expect(ok.calls()).toBe(1);
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GitRunner } from './runner.js';
import { commitChain } from './checkpoint.js';
import { buildChainStream, chainModes, modesDependOnFileMode, writeChainStream } from './commit-stream.js';
import { committedChain as committed, makeBatch, makeSandbox, ugit, ugitRaw, userRepo, writeFile, type GitSandbox } from './test-sandbox.js';
import type { BatchForCommit } from './types.js';

let sb: GitSandbox | undefined;
afterEach(() => {
  sb?.cleanup();
  sb = undefined;
});
const runner = new GitRunner();

const versions = (n: number, from = 1): BatchForCommit[] =>
  Array.from({ length: n }, (_, i) =>
    makeBatch({
      batchId: from + i,
      refId: `pub-${from + i}`,
      createdAt: new Date(Date.UTC(2024, 4, 1, 12, 0, from + i)).toISOString(),
      changes: [
        { path: 'notes/a.md', bytes: Buffer.from(`version ${from + i}\n`) },
        { path: `notes/only-${from + i}.md`, bytes: Buffer.from(`${from + i}\n`) },
      ],
    }),
  );
function batchCommits(vault: string): Array<{ commit: string; batch: string }> {
  return ugit(sb!, vault, ['log', '--reverse', '--format=%H %(trailers:key=Knowledge-Batch,valueonly,separator=)', 'main'])
    .trim().split('\n').map((l) => l.split(' ')).filter((p) => p[1]).map(([commit, batch]) => ({ commit: commit!, batch: batch! }));
}

describe('writeChainStream', () => {
  it('writes exactly the bytes of buildChainStream, in bounded writes, waiting for each', async () => {
    const big = versions(3).map((b, i) => ({ ...b, changes: Array.from({ length: 400 }, (_, k) => ({ path: `d/${i}/${k}.md`, bytes: Buffer.alloc(2000, 97 + (k % 26)) })) }));
    const plan = { ref: 'refs/knowledge/checkpoint', from: 'c'.repeat(40), executable: new Set<string>(), fileMode: true };
    const writes: Buffer[] = [];
    let inFlight = 0;
    await writeChainStream(big, plan, async (chunk) => {
      expect(inFlight).toBe(0); // the next write waits for this one
      inFlight++;
      writes.push(chunk);
      await new Promise((r) => setTimeout(r, 1));
      inFlight--;
    });
    expect(Buffer.concat(writes).equals(buildChainStream(big, plan))).toBe(true);
    expect(writes.length).toBeGreaterThan(4);
    for (const w of writes) expect(w.length).toBeLessThan(256 * 1024 + 4096);
  });
});

describe('buildChainStream', () => {
  it('chains commits with one mark each; only the first names a parent; one get-mark per commit', () => {
    const s = buildChainStream(versions(3), { ref: 'refs/knowledge/checkpoint', from: 'b'.repeat(40), executable: new Set(), fileMode: true }).toString('latin1');
    expect(s.match(/^commit refs\/knowledge\/checkpoint$/gm)).toHaveLength(3);
    expect(s.match(/^from /gm)).toEqual(['from ']);
    expect(s).toContain(`from ${'b'.repeat(40)}\n`);
    expect(s.endsWith('get-mark :1\nget-mark :2\nget-mark :3\ndone\n')).toBe(true);
    expect(s).toContain('Knowledge-Batch: v-1/2\n');
  });

  it('is the same stream however the queue is cut: chain of one equals the single-batch stream', () => {
    const [b] = versions(1);
    const plan = { ref: 'r', from: null, executable: new Set<string>(), fileMode: true };
    expect(buildChainStream([b!], plan).equals(buildChainStream([b!], plan))).toBe(true);
  });

  it('a deletion drops the executable bit for a later re-creation in the same chain', () => {
    const bs = [
      makeBatch({ batchId: 1, changes: [{ path: 'run.sh', bytes: Buffer.from('1') }] }),
      makeBatch({ batchId: 2, changes: [{ path: 'run.sh', bytes: null }] }),
      makeBatch({ batchId: 3, changes: [{ path: 'run.sh', bytes: Buffer.from('3') }] }),
    ];
    expect(chainModes(bs, new Set(['run.sh']), true).map((m) => m.get('run.sh'))).toEqual(['100755', null, '100644']);
  });

  it('a change that knows its executable bit sets the mode where the repository records the bit, and only there', () => {
    const ch = (batchId: number, path: string, exec?: boolean) => makeBatch({ batchId, changes: [{ path, bytes: Buffer.from(String(batchId)), ...(exec === undefined ? {} : { exec }) }] });
    const bs = [ch(1, 'a.md', true), ch(2, 'a.md'), ch(3, 'a.md', false), ch(4, 'b.md', false), ch(5, 'b.md')];
    const modes = (fileMode: boolean, exec: Set<string>) => chainModes(bs, exec, fileMode).map((m, i) => m.get(i < 3 ? 'a.md' : 'b.md'));
    // core.fileMode=true: the bit as read; unknown (an older batch) keeps what the path had.
    expect(modes(true, new Set())).toEqual(['100755', '100755', '100644', '100644', '100644']);
    expect(modes(true, new Set(['b.md']))).toEqual(['100755', '100755', '100644', '100644', '100644']);
    // core.fileMode=false: the bit on disk means nothing, as for git add; a path keeps its mode.
    expect(modes(false, new Set())).toEqual(['100644', '100644', '100644', '100644', '100644']);
    expect(modes(false, new Set(['a.md', 'b.md']))).toEqual(['100755', '100755', '100755', '100755', '100755']);
    expect(modesDependOnFileMode(bs, new Set())).toBe(true);
    expect(modesDependOnFileMode([ch(1, 'a.md', false), ch(2, 'c.md')], new Set(['c.md']))).toBe(false);
    expect(modesDependOnFileMode([ch(1, 'a.md', false)], new Set(['a.md']))).toBe(true);
  });

  it('a chain gives every path the mode the same batches committed one at a time would, and the config matters only where modesDependOnFileMode says (property)', () => {
    const paths = ['a.md', 'b.md', 'c.yaml'];
    const change = fc.record({
      path: fc.constantFrom(...paths),
      deleted: fc.boolean(),
      exec: fc.option(fc.boolean(), { nil: undefined }),
    });
    const batchesArb = fc.array(fc.uniqueArray(change, { selector: (c) => c.path, minLength: 1 }), { minLength: 1, maxLength: 6 });
    fc.assert(fc.property(batchesArb, fc.subarray(paths), fc.boolean(), (spec, startExec, fileMode) => {
      const bs = spec.map((changes, i) => makeBatch({
        batchId: i + 1,
        changes: changes.map((c) => ({ path: c.path, bytes: c.deleted ? null : Buffer.from('x'), ...(c.exec === undefined ? {} : { exec: c.exec }) })),
      }));
      const whole = chainModes(bs, new Set(startExec), fileMode);
      // One at a time: each batch from the modes the branch has after the one before.
      let exec = new Set(startExec);
      bs.forEach((b, i) => {
        const one = chainModes([b], exec, fileMode)[0]!;
        expect(whole[i]).toEqual(one);
        exec = new Set(exec);
        for (const [p, m] of one) {
          if (m === '100755') exec.add(p);
          else exec.delete(p);
        }
      });
      // Where every change knows its bit and the repository records it, the mode is the bit.
      if (fileMode) {
        bs.forEach((b, i) => {
          for (const c of b.changes) if (c.bytes !== null && c.exec !== undefined) expect(whole[i]!.get(c.path)).toBe(c.exec ? '100755' : '100644');
        });
      }
      if (!modesDependOnFileMode(bs, new Set(startExec))) expect(chainModes(bs, new Set(startExec), !fileMode)).toEqual(whole);
    }), { numRuns: 300 });
  });
});

describe('commitChain [GIT-5][GIT-7]', () => {
  it('commits each batch of a chain as its own commit, in order, with its own bytes', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const out = committed(await commitChain(runner, vault, versions(4)));
    expect(out.commits.map((c) => c.batchId)).toEqual([1, 2, 3, 4]);
    expect(out.commits[0]!.parent).toBe(tip);
    for (let i = 1; i < 4; i++) expect(out.commits[i]!.parent).toBe(out.commits[i - 1]!.commit);
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(out.commits[3]!.commit);
    expect(batchCommits(vault)).toEqual(out.commits.map((c) => ({ commit: c.commit, batch: `v-1/${c.batchId}` })));
    for (const c of out.commits) {
      expect(ugit(sb, vault, ['show', `${c.commit}:notes/a.md`])).toBe(`version ${c.batchId}\n`);
      // Exactly its own paths changed [GIT-7].
      expect(ugit(sb, vault, ['diff-tree', '--no-commit-id', '--name-only', '-r', c.commit]).trim().split('\n').sort())
        .toEqual(c.batchId === 1 ? ['notes/a.md', 'notes/only-1.md'] : ['notes/a.md', `notes/only-${c.batchId}.md`]);
      expect(ugit(sb, vault, ['log', '-1', '--format=%ct', c.commit]).trim()).toBe(String(Date.UTC(2024, 4, 1, 12, 0, c.batchId) / 1000));
    }
    // Blob ids computed in-process equal git's.
    expect(out.steps[3]!.get('notes/a.md')!.oid).toBe(ugit(sb, vault, ['rev-parse', `${out.commits[3]!.commit}:notes/a.md`]).trim());
    // The branch moved once: one reflog entry for the whole chain.
    expect(ugit(sb, vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n')[0]).toBe('knowledge: checkpoint');
    expect(ugit(sb, vault, ['reflog', 'show', '--format=%gs', 'refs/heads/main']).trim().split('\n')).toHaveLength(2);
    const idx = await out.finishIndex();
    expect(idx).toEqual({ ok: true, updated: 5, skipped: 0 });
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('');
    expect(ugit(sb, vault, ['fsck', '--strict', '--no-dangling']).trim()).toBe('');
  });

  it('reuses the landed part of a chain after a crash before it was recorded, and commits only the rest [GIT-6]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const indexBefore = readFileSync(join(vault, '.git/index'));
    const first = committed(await commitChain(runner, vault, versions(3))); // landed, never recorded
    await first.finishIndex(false); // as if killed before the new index was written (its lock gone too)
    writeFileSync(join(vault, '.git/index'), indexBefore);
    // The retry is cut differently: batches 1..5 in one go.
    const again = committed(await commitChain(runner, vault, versions(5), { lastKnownCommit: tip }));
    expect(again.commits.slice(0, 3)).toEqual(first.commits.map((c) => ({ ...c, reused: true })));
    expect(again.commits.slice(3).map((c) => c.reused)).toEqual([false, false]);
    expect(again.commits[3]!.parent).toBe(first.commits[2]!.commit);
    expect(batchCommits(vault).map((b) => b.batch)).toEqual(['v-1/1', 'v-1/2', 'v-1/3', 'v-1/4', 'v-1/5']);
    // The user's index still sat at the old tip: the chain's one index update
    // (made under Knowledge's index lock) brings every path to the final entry.
    expect(await again.finishIndex()).toMatchObject({ ok: true, skipped: 0 });
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('');
  });

  it('a whole chain already landed is reused without writing anything', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const first = committed(await commitChain(runner, vault, versions(2)));
    await first.finishIndex();
    const packs = ugit(sb, vault, ['count-objects', '-v']);
    const again = committed(await commitChain(runner, vault, versions(2), { lastKnownCommit: tip }));
    expect(again.commits.map((c) => [c.commit, c.reused])).toEqual(first.commits.map((c) => [c.commit, true]));
    expect(ugit(sb, vault, ['count-objects', '-v'])).toBe(packs);
  });

  it('finds a landed chain even when the store knows no earlier commit', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const first = committed(await commitChain(runner, vault, versions(3)));
    await first.finishIndex();
    writeFile(vault, 'user.md', 'user\n');
    ugit(sb, vault, ['add', 'user.md']);
    ugit(sb, vault, ['commit', '-q', '-m', 'user after the chain']);
    const again = committed(await commitChain(runner, vault, versions(4), { lastKnownCommit: null }));
    expect(again.commits.slice(0, 3).map((c) => c.commit)).toEqual(first.commits.map((c) => c.commit));
    // The new batch is built on the user's commit (the current tip).
    expect(again.commits[3]!.parent).toBe(ugit(sb, vault, ['rev-parse', 'main~1']).trim());
    expect(batchCommits(vault).map((b) => b.batch)).toEqual(['v-1/1', 'v-1/2', 'v-1/3', 'v-1/4']);
  });

  it('a rebuilt chain after a crash before the branch moved is byte-identical, cut either way', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    class Crash extends Error {}
    let written = '';
    await expect(commitChain(runner, vault, versions(3), { testHooks: { beforeUpdateRef: (c) => { written = c; throw new Crash(); } } })).rejects.toBeInstanceOf(Crash);
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tip);
    const a = committed(await commitChain(runner, vault, versions(2), { lastKnownCommit: tip }));
    await a.finishIndex();
    const b = committed(await commitChain(runner, vault, versions(1, 3), { lastKnownCommit: a.commits[1]!.commit }));
    expect(b.commits[0]!.commit).toBe(written);
  });

  it('an unmerged index is pending and nothing is written', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'c.md': 'base\n' });
    const blob = (t: string) => ugit(sb!, vault, ['hash-object', '-w', '--stdin'], t).trim();
    ugit(sb, vault, ['update-index', '--index-info'], `0 ${'0'.repeat(40)}\tc.md\n100644 ${blob('ours\n')} 2\tc.md\n100644 ${blob('theirs\n')} 3\tc.md\n`);
    const tip = ugit(sb, vault, ['rev-parse', 'main']).trim();
    const out = await commitChain(runner, vault, versions(2));
    expect(out).toMatchObject({ state: 'pending', code: 'unmerged' });
    expect(ugit(sb, vault, ['rev-parse', 'main']).trim()).toBe(tip);
  });

  it('git disappearing mid-way is unavailable, not a repository problem [GIT-14]', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb);
    const r = new GitRunner();
    expect((await r.detect()).ok).toBe(true); // cached positive detection
    (r as unknown as { gitPath: string }).gitPath = join(sb.dir, 'gone', 'git');
    const out = await commitChain(r, vault, versions(1));
    expect(out.state).toBe('unavailable');
  });
});

describe('user index after a chain [GIT-10]', () => {
  it('keeps staged and unstaged user work; moves only Knowledge paths', async () => {
    sb = makeSandbox();
    const vault = userRepo(sb, 'vault', { 'notes/a.md': 'user base\n', 'mine.md': 'm0\n' });
    writeFile(vault, 'mine.md', 'm1 staged\n');
    ugit(sb, vault, ['add', 'mine.md']);
    writeFileSync(join(vault, 'mine.md'), 'm2 unstaged\n');
    // The working files as Knowledge installed them (the last version of each).
    for (const b of versions(3)) for (const c of b.changes) writeFile(vault, c.path, c.bytes!);
    const out = committed(await commitChain(runner, vault, versions(3)));
    await out.finishIndex();
    expect(ugit(sb, vault, ['diff', '--cached', '--name-only'])).toBe('mine.md\n');
    expect(ugit(sb, vault, ['diff', '--name-only'])).toBe('mine.md\n');
    expect(ugit(sb, vault, ['status', '--porcelain'])).toBe('MM mine.md\n');
    expect(readFileSync(join(vault, 'mine.md'), 'utf8')).toBe('m2 unstaged\n');
    expect(ugitRaw(sb, vault, ['ls-files', '-s', 'notes/only-3.md']).stdout.toString()).toMatch(/^100644 /);
  });
});

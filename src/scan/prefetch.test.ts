import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { MessageChannel } from 'node:worker_threads';
import { spawnSync } from 'node:child_process';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { endPrefetchWorkers, listingAhead, prefetchAhead, prefetchPartitions, PrefetchedFs, stopListingAhead } from './prefetch.js';
import { directFs, walkPartition, type WalkFs, type WalkStat } from './walk.js';
import type { ReadOutcome } from './read.js';

/**
 * The walk over the workers' listings (prefetch.ts) must be the walk over
 * the file system itself: same files, same stats, same diagnostics and
 * blocked paths, in the same order [SCAN-1, SCAN-4].
 */
let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});
afterAll(() => endPrefetchWorkers());

function walkLog(vault: string, pdir: string, fs: WalkFs, onFile?: (p: string, st: WalkStat) => unknown): string[] {
  const log: string[] = [];
  walkPartition(vault, pdir, {
    files: (dir, files) => {
      log.push(`folder ${dir} ${files.length}`);
      for (const { name, st } of files) {
        onFile?.(`${dir}/${name}`, st);
        log.push(`file ${dir}/${name} ${st.size} ${st.mtimeMs} ${st.ctimeMs} ${st.ino}`);
      }
    },
    diagnostic: (d) => log.push(`diag ${d.code} ${d.path} ${d.reason}`),
    blocked: (p) => log.push(`blocked ${p}`),
  }, fs);
  return log;
}

function tree(): string {
  dir = mkdtempSync(join(tmpdir(), 'kn-prefetch-'));
  const vault = join(dir, 'vault');
  const put = (rel: string, text: string | Buffer = `# ${rel}\n`) => {
    mkdirSync(join(vault, rel, '..'), { recursive: true });
    writeFileSync(join(vault, rel), text);
  };
  for (let s = 0; s < 40; s++) for (let i = 0; i < 25; i++) put(`private/pages/${s.toString(16).padStart(2, '0')}/p-${s}-${i}.md`, 'x'.repeat(i));
  put('private/top.md');
  put('private/notes/deep/er/still.yaml');
  put('private/.obsidian/workspace.md');
  put('private/pages/00/.hidden.md');
  put('private/pages/00/backup.md~');
  put('private/pages/00/picture.png');
  put('private/evidence/ab/src-1.yaml');
  put('private/evidence/ab/src-1/original.md');
  put('private/evidence/old-src/original.md');
  // Another repository's work tree (a submodule): neither walked nor listed below itself.
  put('private/ext/.git/HEAD', 'ref: refs/heads/main\n');
  put('private/ext/note.md');
  put('private/ext/sub/deeper.md');
  mkdirSync(join(vault, 'private', 'empty'), { recursive: true });
  symlinkSync('/etc/hostname', join(vault, 'private', 'pages', '01', 'link.md'));
  symlinkSync(join(vault, 'private', 'notes'), join(vault, 'private', 'linked-dir'));
  spawnSync('mkfifo', [join(vault, 'private', 'pages', '02', 'pipe.md')]);
  writeFileSync(Buffer.concat([Buffer.from(join(vault, 'private', 'pages', '03') + '/bad-'), Buffer.from([0xff, 0xfe]), Buffer.from('.md')]), 'odd name\n');
  writeFileSync(join(vault, 'private', 'pages', '03', 'ok-\uFFFD.md'), 'a real replacement character\n');
  mkdirSync(join(vault, 'conversations', 'sess-1', 'pages'), { recursive: true });
  put('conversations/sess-1/pages/c.md');
  put('conversations/sess-3/.git/HEAD', 'ref: refs/heads/main\n'); // a partition that is a repository of its own
  put('conversations/sess-3/pages/d.md');
  return vault;
}

describe('prefetched walk', () => {
  it('sees exactly what the plain walk sees, in the same order, for every partition', async () => {
    const vault = tree();
    for (const pdir of ['private', 'conversations/sess-1']) {
      const fs = prefetchPartitions(vault, [pdir]);
      expect(fs).toBeInstanceOf(PrefetchedFs);
      const direct = walkLog(vault, pdir, directFs);
      expect(direct.length).toBeGreaterThan(pdir === 'private' ? 1000 : 0);
      expect(walkLog(vault, pdir, fs!)).toEqual(direct);
      expect(fs!.directReads).toBe(0); // every folder the walk opened came from the workers
      fs!.finish();
      expect(fs!.size).toBe(0); // and they sent nothing the walk did not use
    }
    const all = walkLog(vault, 'private', directFs).join('\n');
    for (const want of ['diag symlink private/pages/01/link.md', 'diag special-file private/pages/02/pipe.md', 'diag invalid-name private/pages/03/bad-\\xff\\xfe.md', 'file private/pages/03/ok-\uFFFD.md']) {
      expect(all).toContain(want);
    }
    expect(all).not.toContain('.obsidian');
    expect(all).not.toContain('original.md');
    expect(all).toContain('diag nested-repository private/ext ');
    expect(all).not.toContain('private/ext/');
    const own = prefetchPartitions(vault, ['conversations/sess-3'])!;
    const ownLog = walkLog(vault, 'conversations/sess-3', own);
    expect(ownLog).toEqual(walkLog(vault, 'conversations/sess-3', directFs));
    expect(ownLog.join('\n')).toMatch(/^diag nested-repository conversations\/sess-3 /);
    expect(ownLog.join('\n')).not.toContain('d.md');
    own.finish();
    expect(own.size).toBe(0);
  });

  it('reads a baseline ahead: every Markdown and YAML file comes with exactly its bytes, hash and fingerprint, and the walk is unchanged', () => {
    const vault = tree();
    for (const pdir of ['private', 'conversations/sess-1']) {
      const fs = prefetchPartitions(vault, [pdir], [pdir])!;
      const direct = walkLog(vault, pdir, directFs);
      const reads = new Map<string, ReadOutcome>();
      expect(walkLog(vault, pdir, fs, (p, st) => st.preread && reads.set(p, st.preread))).toEqual(direct);
      const files = direct.filter((l) => l.startsWith('file ')).map((l) => l.split(' ')[1]!);
      expect(files.length).toBeGreaterThan(0);
      // Every file the walk hands over was read ahead (the .png is not a scanned name, so the walk never lists it),
      // but for a name showing U+FFFD: it may stand for bytes that are not UTF-8, so the walk looks at it itself.
      const plainNames = files.filter((p) => !p.includes('\uFFFD'));
      expect(plainNames.length).toBe(files.length - (pdir === 'private' ? 1 : 0));
      expect([...reads.keys()].sort()).toEqual([...plainNames].sort());
      expect(fs.prereads).toBe(plainNames.length);
      for (const path of plainNames) {
        const r = reads.get(path)!;
        const abs = join(vault, path);
        const bytes = readFileSync(abs);
        const st = lstatSync(abs, { bigint: true });
        expect(r).toMatchObject({ kind: 'ok', size: bytes.length, mtimeNs: st.mtimeNs.toString(), ino: st.ino.toString() });
        if (r.kind !== 'ok') continue;
        expect(r.bytes.equals(bytes)).toBe(true);
        expect(r.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
      }
    }
    // Without read-ahead, nothing is read.
    const plain = prefetchPartitions(vault, ['private'])!;
    walkLog(vault, 'private', plain);
    expect(plain.prereads).toBe(0);
  });

  it('reading ahead pauses while what was sent is not taken: the rest is only listed, for the walk to read', () => {
    const vault = tree();
    const fs = prefetchPartitions(vault, ['private'], ['private'], 1)!;
    fs.finish(); // every listing sent, none taken: after its first file, each worker is over the limit
    const direct = walkLog(vault, 'private', directFs);
    let prereads = 0;
    expect(walkLog(vault, 'private', fs, (_p, st) => st.preread && prereads++)).toEqual(direct);
    expect(prereads).toBeGreaterThan(0);
    expect(prereads).toBeLessThanOrEqual(4); // one per worker at most
    expect(direct.filter((l) => l.startsWith('file ')).length).toBeGreaterThan(1000);
  });

  it('a file changed after it was read ahead is handed over as it was read: bytes and fingerprint of one moment', () => {
    const vault = tree();
    const fs = prefetchPartitions(vault, ['private'], ['private'])!;
    fs.finish();
    const path = 'private/pages/00/p-0-3.md';
    const before = lstatSync(join(vault, path), { bigint: true });
    writeFileSync(join(vault, path), 'changed after the read, and longer\n');
    let seen: ReadOutcome | undefined;
    walkLog(vault, 'private', fs, (p, st) => {
      if (p === path) seen = st.preread;
    });
    // The old bytes with the old size and mtime: the next scan sees a different fingerprint and reads it again.
    expect(seen).toMatchObject({ kind: 'ok', size: 3, mtimeNs: before.mtimeNs.toString() });
    expect(seen?.kind === 'ok' && seen.bytes.toString()).toBe('xxx');
  });

  it('answers as the workers saw the folders; a folder asked again, or not listed, comes from the file system', async () => {
    const vault = tree();
    const fs = prefetchPartitions(vault, ['private'])!;
    fs.finish(); // every listing taken before the change below
    expect(fs.size).toBeGreaterThan(40);
    writeFileSync(join(vault, 'private', 'pages', '00', 'later.md'), 'later\n');
    const log = walkLog(vault, 'private', fs);
    // The listing of pages/00 was taken before later.md existed (as if the walk had passed it): the next scan sees it.
    expect(log.some((l) => l.startsWith('file private/pages/00/p-0-1.md 1 '))).toBe(true);
    expect(log.some((l) => l.startsWith('file private/pages/00/later.md'))).toBe(false);
    expect(fs.readdir(join(vault, 'private', 'pages', '00')).map((e) => e.name)).toContain('later.md');
    expect(fs.directReads).toBe(1);
  });

  it('errors the workers met are raised with their codes, as the file system would', () => {
    const vault = '/nonexistent-vault';
    const fs = new PrefetchedFs([
      { abs: `${vault}/private`, code: null, names: 'locked\0a.md\0gone.md', types: new Uint8Array([2, 1, 1]), stats: new Float64Array([0, 0, 0, 0, 0, 1, 5, 1000, 1500, 42, -1, 0, 0, 0, 0]), errors: null },
      { abs: `${vault}/private/locked`, code: 'EACCES', names: '', types: null, stats: null, errors: null },
    ]);
    expect(walkLog(vault, 'private', fs)).toEqual([]); // the partition folder itself is looked at directly: absent
    const entries = fs.readdir(`${vault}/private`);
    expect(entries.map((e) => [e.name, e.isFile(), e.isDirectory()])).toEqual([['locked', false, true], ['a.md', true, false], ['gone.md', true, false]]);
    expect(fs.lstat(`${vault}/private/a.md`, entries[1])).toMatchObject({ size: 5, mtimeMs: 1000, ctimeMs: 1500, ino: 42 });
    expect(fs.lstat(`${vault}/private/gone.md`, entries[2])).toBeUndefined();
    expect(() => fs.readdir(`${vault}/private/locked`)).toThrow(expect.objectContaining({ code: 'EACCES' }));
  });

  it('a partition folder that is a symlink is never followed by the workers either', () => {
    const vault = tree();
    const outside = join(dir, 'outside');
    mkdirSync(join(outside, 'deep'), { recursive: true });
    writeFileSync(join(outside, 'deep', 'secret.md'), 'outside the vault\n');
    mkdirSync(join(vault, 'conversations', 'sess-2', '..'), { recursive: true });
    symlinkSync(outside, join(vault, 'conversations', 'sess-2'));
    expect(prefetchPartitions(vault, ['conversations/sess-2'])).toBeNull();
    const fs = prefetchPartitions(vault, ['conversations/sess-2', 'conversations/sess-1'])!;
    fs.finish();
    expect(fs.size).toBeGreaterThan(0);
    expect(walkLog(vault, 'conversations/sess-2', fs)).toEqual(['diag symlink conversations/sess-2 the partition folder is a symbolic link; it is not followed', 'blocked conversations/sess-2']);
    for (const l of [...(fs as unknown as { listings: Map<string, unknown> }).listings.keys()]) expect(l).not.toContain('sess-2');
  });

  it('works in a process started with --input-type=module: the workers do not inherit its flags', () => {
    const vault = tree();
    const dist = new URL('../../dist/scan/', import.meta.url).href;
    const code = `const { prefetchPartitions } = await import('${dist}prefetch.js');
      const { walkPartition } = await import('${dist}walk.js');
      const fs = prefetchPartitions(${JSON.stringify(vault)}, ['private'], ['private']);
      let files = 0;
      walkPartition(${JSON.stringify(vault)}, 'private', { files: (_d, f) => { files += f.length; }, diagnostic: () => {}, blocked: () => {} }, fs);
      console.log(JSON.stringify({ files, directReads: fs.directReads, prereads: fs.prereads }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const files = walkLog(vault, 'private', directFs).filter((l) => l.startsWith('file ')).length;
    // A worker that failed to start would leave the walk to the file system; one that could not
    // evaluate the reader (read.ts, compiled) would read nothing ahead.
    expect(JSON.parse(r.stdout)).toEqual({ files, directReads: 0, prereads: files - 1 }); // all but ok-\uFFFD.md, see above
  });

  it('a listing started ahead is taken over by the scan of exactly those folders, and stopped otherwise', () => {
    const vault = tree();
    prefetchAhead(vault, ['private']);
    const early0 = listingAhead();
    const taken = prefetchPartitions(vault, ['private'])!;
    expect(taken).toBe(early0);
    expect(listingAhead()).toBeNull();
    expect(walkLog(vault, 'private', taken)).toEqual(walkLog(vault, 'private', directFs));
    expect(taken.directReads).toBe(0);
    // Taken once: the next scan starts its own.
    expect(prefetchPartitions(vault, ['private'])).not.toBe(taken);
    const stopped = (fs: PrefetchedFs) => (fs as unknown as { open: number; signal: Int32Array }).open === 0 && Atomics.load((fs as unknown as { signal: Int32Array }).signal, 1) === 1;
    for (const other of [
      () => prefetchPartitions(vault, ['private', 'conversations/sess-1']), // other folders
      () => prefetchPartitions(vault, ['private'], ['private']), // a baseline reads ahead: not in an early listing
      () => prefetchPartitions(`${vault}/`, ['private']), // another vault path
    ]) {
      prefetchAhead(vault, ['private']);
      const early = listingAhead()!;
      expect(early).toBeInstanceOf(PrefetchedFs);
      expect(stopped(early)).toBe(false);
      const fs = other()!;
      expect(fs).not.toBe(early);
      expect(walkLog(vault, 'private', fs)).toEqual(walkLog(vault, 'private', directFs));
      expect(stopped(early)).toBe(true);
      expect(listingAhead()).toBeNull();
    }
  });

  it('a listing nobody will take is stopped: its workers list no more folders and go on to the next job', () => {
    dir = mkdtempSync(join(tmpdir(), 'kn-prefetch-'));
    const vault = join(dir, 'vault');
    const total = 2000;
    for (let i = 0; i < total; i++) mkdirSync(join(vault, 'private', `f${i}`), { recursive: true });
    mkdirSync(join(vault, 'other', 'a'), { recursive: true });
    mkdirSync(join(vault, 'other', 'b'), { recursive: true });
    const listed = (fs: PrefetchedFs) => Atomics.load((fs as unknown as { signal: Int32Array }).signal, 2);
    const workers = Math.min(4, availableParallelism());
    // A worker checks the stop before each folder and counts a folder before listing it, so once
    // the stop is set each worker lists at most the one folder it had already begun. How far the
    // workers got before the stop depends on the machine's load (a busy CI box once let them list
    // half of 400 folders first), so the bound is taken from the count at the stop, not guessed.
    // A listing that ended before the stop landed proves nothing: tried again, a few times.
    let atStop = 0;
    let early: PrefetchedFs | null = null;
    for (let attempt = 0; attempt < 5; attempt++) {
      prefetchAhead(vault, ['private']);
      early = listingAhead()!;
      stopListingAhead();
      atStop = listed(early);
      if (atStop < total) break;
      console.log(`listing of ${total} folders ended before its stop landed (attempt ${attempt + 1}); trying again`);
    }
    expect(atStop).toBeLessThan(total);
    // The workers take jobs in turn: once a later listing has all its answers, the stopped one has ended.
    const next = prefetchPartitions(vault, ['other'])!;
    next.finish();
    expect(listed(next)).toBe(3); // other, other/a, other/b
    expect(listed(early!)).toBeLessThanOrEqual(atStop + workers);
    expect(listed(early!)).toBeLessThan(total);
  });

  it('a worker that never answers holds the walk up for the stall limit only, then the file system answers', () => {
    const vault = tree();
    const { port1, port2 } = new MessageChannel();
    const fs = new PrefetchedFs([], [port1], new Int32Array(new SharedArrayBuffer(4)), 300);
    const t0 = performance.now();
    const log = walkLog(vault, 'conversations/sess-1', fs);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(log).toEqual(walkLog(vault, 'conversations/sess-1', directFs));
    expect(fs.directReads).toBe(2); // both folders, after giving up once
    port2.close();
  });
});

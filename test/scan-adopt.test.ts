/**
 * A vault that comes without its state (a `git clone` of it adopted by
 * `knowledge init`, an older state.sqlite restored) holds retained evidence
 * and descriptors the store has no `sources` row for. A scan adopts such a
 * source when its descriptor and original agree (scan/adopt.ts), so its
 * citations are valid again and the same bytes given again are that source;
 * a descriptor whose original is missing or altered is a diagnostic, not a
 * source, and is looked at again by later scans. Real CLI processes, except
 * the agent's scan (agents scan through the core call only).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { cli, dropScanCounts, makeSandbox, unprivilegedCli, UNPRIVILEGED_NOTE, userGit, userGitRaw, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';

let sb: Sandbox;
beforeEach(() => {
  sb = makeSandbox('kn-adopt-');
  const r = cli(sb, ['init', 'st']);
  if (r.code !== 0) throw new Error(r.stderr);
});
afterEach(() => sb.cleanup());

const claimMd = (title: string) => `---\nkind: claim\nclaim_kind: fact\ntitle: ${title}\n---\nclaim body\n`;

function write(name: string, text: string): string {
  writeFileSync(join(sb.dir, name), text);
  return name;
}

function json(r: { code: number | null; stdout: string; stderr: string }): any { // eslint-disable-line @typescript-eslint/no-explicit-any
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

/** Publish a claim citing `evidence` (a file of the sandbox) into the first store; its record id and source. */
function published(title: string, evidence: string, partition = 'private'): { id: string; sourceId: string; path: string; descriptorPath: string } {
  const r = json(cli(sb, ['publish', '--store', 'st', '--partition', partition, '--evidence', evidence, write(`${title}.md`, claimMd(title)), '--json']));
  const e = r.evidence[0];
  return { id: r.records[0].id, sourceId: e.sourceId, path: e.path, descriptorPath: e.path.replace(/\/[^/]+$/, '.yaml') };
}

/** The first store's vault cloned into a new store `kb2`, adopted by `knowledge init` (its state is not carried). */
function cloneStore(): string {
  mkdirSync(join(sb.dir, 'kb2'));
  userGit(sb, sb.dir, ['clone', '-q', join(sb.dir, 'st', 'vault'), join(sb.dir, 'kb2', 'vault')]);
  expect(cli(sb, ['init', 'kb2']).code).toBe(0);
  // Past the racy window (100 ms, scan/plan.ts isRacy): the first scan's fingerprints are trusted by the next.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150);
  return join(sb.dir, 'kb2', 'vault');
}

const scan = (...args: string[]) => json(cli(sb, ['scan', '--store', 'kb2', ...args, '--json']));

function sources(store: string): Array<Record<string, unknown>> {
  const db = new Database(join(sb.dir, store, 'state.sqlite'), { readonly: true });
  try {
    return db.prepare('SELECT partition, source_id, sha256, size, media_type, path, descriptor_path, in_history, attributions, created_at, descriptor FROM sources ORDER BY partition, source_id').all() as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
}

describe('[SCAN-1, REC-3] a scan adopts retained evidence the store does not know', () => {
  it('a clone adopted by init: its first scan adopts the source, the claim shows it, and the same bytes published or attached again are that source', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault2 = cloneStore();

    const first = scan();
    expect(first.diagnostics).toEqual([]); // no invalid-reference for the claim's citation
    expect(first.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    // The row a publication makes, created when the descriptor says the original was retained.
    const [mine] = sources('st');
    const [adopted] = sources('kb2');
    const { attributions: a1, ...row1 } = mine!;
    const { attributions: a2, ...row2 } = adopted!;
    expect(row2).toEqual(row1);
    expect((row2.descriptor as Buffer).equals(readFileSync(join(vault2, c.descriptorPath)))).toBe(true);
    expect(JSON.parse(a2 as string)).toEqual([{ attribution: JSON.parse(a1 as string)[0].attribution, scanId: first.scanId, at: row1.created_at }]);

    const shown = cli(sb, ['show', '--store', 'kb2', c.id]);
    expect(shown.stdout).not.toMatch(/unknown source/);
    expect(shown.stdout).toContain(`evidence ${c.sourceId}  ${c.path}  14 bytes  text/plain`);
    // A rescan reads nothing and adopts nothing more.
    const again = scan();
    expect(again).toMatchObject({ hashed: 0, diagnostics: [] });
    expect(again.adopted).toBeUndefined();

    // The same bytes as evidence of another claim: that source, no copy, no E_CONFLICT.
    const other = json(cli(sb, ['publish', '--store', 'kb2', '--evidence', 'ev.txt', write('other.md', claimMd('Other')), '--json']));
    expect(other.evidence[0]).toMatchObject({ sourceId: c.sourceId, path: c.path });
    // And attached: one more attribution of that source.
    const att = json(cli(sb, ['attach', '--store', 'kb2', '--root', sb.dir, 'ev.txt', '--json']));
    expect(att).toMatchObject({ sourceId: c.sourceId, path: c.path, newSource: false });
    // Its commit: one the branch holds with exactly those bytes (no batch of this store carried them).
    expect(att.git.state).toBe('committed');
    expect(att.git.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(userGit(sb, vault2, ['rev-parse', `${att.git.commit}:${c.path}`]).trim()).toBe(userGit(sb, vault2, ['hash-object', join(vault2, c.path)]).trim());
    expect(json(cli(sb, ['receipt', '--store', 'kb2', att.attachmentId, '--json'])).git).toEqual(att.git);
    const after = sources('kb2');
    expect(after).toHaveLength(1);
    expect(JSON.parse(after[0]!.attributions as string)).toHaveLength(3);
    expect(scan().diagnostics).toEqual([]);
  });

  it('the scan reports its adopt phase, original by original, to a progress bar', async () => {
    write('a.txt', 'evidence a\n');
    write('b.txt', 'evidence b\n');
    published('A', 'a.txt');
    published('B', 'b.txt');
    cloneStore();
    const seen: string[] = [];
    const svc = KnowledgeService.open(join(sb.dir, 'kb2'), { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
    try {
      const r = await svc.scan({ caller: { kind: 'operator' }, onProgress: (p) => { if (p.phase === 'adopt') seen.push(`${p.adopting!.done}/${p.adopting!.of}`); } });
      expect(r.adopted).toHaveLength(2);
    } finally {
      svc.close();
    }
    expect(seen).toEqual(['0/2', '1/2']);
  });

  it('a descriptor whose original is missing or altered is a diagnostic, not a source; the original put back is adopted by the next scan', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault2 = cloneStore();
    const original = join(vault2, c.path);
    renameSync(original, join(sb.dir, 'kept.txt'));

    const unadopted = (r: { diagnostics: Array<{ path: string; code: string; reason: string }> }) => r.diagnostics.filter((d) => d.code === 'unadopted-source');
    const citation = (r: { diagnostics: Array<{ path: string; code: string; reason: string }> }) => r.diagnostics.filter((d) => d.code === 'invalid-reference');
    const missing = scan();
    expect(missing.adopted).toBeUndefined();
    expect(unadopted(missing)).toEqual([{ path: c.descriptorPath, code: 'unadopted-source', reason: `not adopted as a source of private: its retained original ${c.path} is missing; put the original back and scan again (or move the descriptor away)` }]);
    expect(citation(missing)).toHaveLength(1); // the claim still cites an unknown source
    expect(sources('kb2')).toEqual([]);
    expect(cli(sb, ['show', '--store', 'kb2', c.id]).stdout).toMatch(/\(unknown source\)/);

    // Altered: other bytes of the same size, then of another size.
    writeFileSync(original, 'evidence TEXT\n');
    const altered = scan();
    expect(altered.hashed).toBe(0); // the scan itself reads no file: the standing diagnostic is looked at again
    expect(unadopted(altered)).toEqual([{ path: c.descriptorPath, code: 'unadopted-source', reason: `not adopted as a source of private: its retained original ${c.path} does not hold the bytes its descriptor names (edited or replaced?); put the original back and scan again (or move the descriptor away)` }]);
    writeFileSync(original, 'my own notes on it\n');
    expect(unadopted(scan())[0]!.reason).toMatch(/its retained original \S+ holds 19 bytes, not the 14 its descriptor names/);
    expect(sources('kb2')).toEqual([]);
    // Publishing those bytes is still refused: the paths hold files the store has no source for.
    expect(cli(sb, ['publish', '--store', 'kb2', '--evidence', 'ev.txt', write('other.md', claimMd('Other'))]).stderr).toMatch(/^E_CONFLICT: .* has no source .* run `knowledge scan`/m);

    // A descriptor edited by hand to name other bytes is not a descriptor of its source.
    rmSync(original);
    renameSync(join(sb.dir, 'kept.txt'), original);
    const descriptor = readFileSync(join(vault2, c.descriptorPath), 'utf8');
    writeFileSync(join(vault2, c.descriptorPath), descriptor.replace(/sha256: [0-9a-f]{64}/, `sha256: ${'a'.repeat(64)}`));
    const edited = scan();
    expect(edited.modified).toEqual([c.descriptorPath]);
    expect(unadopted(edited)[0]!.reason).toBe(`not adopted as a source of private: its descriptor has a sha256 that is not the one of ${c.sourceId}; fix it or move it away, then scan again`);
    expect(sources('kb2')).toEqual([]);

    // The descriptor as it was and the original back: adopted, and the diagnostics go.
    writeFileSync(join(vault2, c.descriptorPath), descriptor);
    const back = scan();
    expect(back.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    expect(back.diagnostics).toEqual([]);
    expect(cli(sb, ['show', '--store', 'kb2', c.id]).stdout).not.toMatch(/unknown source/);
  });

  it(`an original the scan may not read is a diagnostic, and the scan goes on ${UNPRIVILEGED_NOTE}`, () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault2 = cloneStore();
    const run = unprivilegedCli(sb, 'an unreadable original');
    if (!run) return;
    chmodSync(join(vault2, c.path), 0o000);
    const r = run(['scan', '--store', 'kb2', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const receipt = JSON.parse(r.stdout);
    expect(receipt.added).toContain(c.descriptorPath);
    expect(receipt.adopted).toBeUndefined();
    expect(receipt.diagnostics.filter((d: { code: string }) => d.code === 'unadopted-source')).toEqual([
      { path: c.descriptorPath, code: 'unadopted-source', reason: expect.stringMatching(/^not adopted as a source of private: its retained original cannot be read: EACCES/) },
    ]);
    chmodSync(join(vault2, c.path), 0o644);
    const back = run(['scan', '--store', 'kb2', '--json']);
    expect(JSON.parse(back.stdout).adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
  });

  it('an older state.sqlite restored: the next scan adopts the sources published since', () => {
    const state = join(sb.dir, 'st', 'state.sqlite');
    const saved = (suffix: string) => [`${state}${suffix}`, join(sb.dir, `saved.sqlite${suffix}`)] as const;
    for (const suffix of ['', '-wal', '-shm']) if (existsSync(saved(suffix)[0])) copyFileSync(...saved(suffix));
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    for (const suffix of ['', '-wal', '-shm']) {
      rmSync(saved(suffix)[0], { force: true });
      if (existsSync(saved(suffix)[1])) copyFileSync(saved(suffix)[1], saved(suffix)[0]);
    }
    expect(sources('st')).toEqual([]);
    const r = json(cli(sb, ['scan', '--store', 'st', '--json']));
    expect(r.diagnostics).toEqual([]);
    expect(r.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    expect(cli(sb, ['show', '--store', 'st', c.id]).stdout).toContain(`evidence ${c.sourceId}  ${c.path}`);
  });

  it('a store whose scans recorded the descriptor before scans adopted sources: the upgrade has the next scan read it again and adopt it', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    cloneStore();
    expect(scan().adopted).toHaveLength(1);
    // As a Knowledge before migration 021 left it: the descriptor recorded as a file (not racy), no source.
    const db = new Database(join(sb.dir, 'kb2', 'state.sqlite'));
    db.prepare('DELETE FROM sources').run();
    db.prepare('UPDATE vault_files SET racy = 0').run();
    dropScanCounts(db); // 023
    db.pragma('user_version = 20');
    db.close();
    const r = scan();
    expect(r.hashed).toBe(1); // the descriptor alone
    expect(r.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    expect(scan()).toMatchObject({ hashed: 0, diagnostics: [] });
  });

  it('a scan adopts only in the partitions it walks: --partition, and an agent\'s scan of private and its own conversation', async () => {
    const p = (write('p.txt', 'private evidence\n'), published('Private', 'p.txt'));
    const s1 = (write('s1.txt', 'evidence of s1\n'), published('One', 's1.txt', 'conversation:s1'));
    const s2 = (write('s2.txt', 'evidence of s2\n'), published('Two', 's2.txt', 'conversation:s2'));
    cloneStore();

    const one = scan('--partition', 'conversation:s1');
    expect(one.adopted).toEqual([{ sourceId: s1.sourceId, path: s1.path }]);
    expect(sources('kb2').map((s) => s.source_id)).toEqual([s1.sourceId]);

    // An agent of session s1 may scan private and conversation:s1, never conversation:s2.
    const svc = KnowledgeService.open(join(sb.dir, 'kb2'), { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
    try {
      const mine = await svc.scan({ caller: { kind: 'agent', agentId: 'bot', session: 's1' } });
      expect(mine.partitions).toEqual(['conversation:s1', 'private']);
      expect(mine.adopted).toEqual([{ sourceId: p.sourceId, path: p.path }]);
    } finally {
      svc.close();
    }
    expect(sources('kb2').map((s) => [s.partition, s.source_id])).toEqual([['conversation:s1', s1.sourceId], ['private', p.sourceId]]);
    expect(cli(sb, ['show', '--store', 'kb2', p.id]).stdout).toContain(`evidence ${p.sourceId}  ${p.path}`);

    const all = scan();
    expect(all.adopted).toEqual([{ sourceId: s2.sourceId, path: s2.path }]);
    expect(all.diagnostics).toEqual([]);
  });
});

describe('[PUB-2, ATT-2, GIT-9] Knowledge\'s own unfinished work is not adopted: recovery or resume finishes it', () => {
  const vault = () => join(sb.dir, 'st', 'vault');
  const scanSt = (run = (args: string[]) => cli(sb, args)) => json(run(['scan', '--store', 'st', '--json']));
  const unadopted = (r: { diagnostics: Array<{ code: string }> }) => r.diagnostics.filter((d) => d.code === 'unadopted-source');

  it('an attachment killed before its acknowledgement: a scan leaves its source to it, and resume commits the original', () => {
    write('f.txt', 'some notes\n');
    const killed = cli(sb, ['attach', '--store', 'st', 'f.txt', '--json'], { env: { KNOWLEDGE_CRASH_AT: 'attach-before-acknowledge' } });
    expect(killed.code, killed.stderr).toBeNull();
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'), { readonly: true });
    const attId = db.prepare('SELECT attachment_id FROM attachments').pluck().get() as string;
    db.close();

    const r = scanSt();
    expect(r.adopted).toBeUndefined();
    expect(unadopted(r)).toEqual([{ path: expect.stringMatching(/^private\/evidence\/[0-9a-f]{2}\/src-[0-9a-f]{24}\.yaml$/), code: 'unadopted-source',
      reason: `not adopted as a source of private: attachment ${attId} installed it and is not finished: \`knowledge resume ${attId}\` finishes it` }]);
    expect(sources('st')).toEqual([]);

    const done = json(cli(sb, ['resume', '--store', 'st', attId, '--json']));
    expect(done).toMatchObject({ newSource: true, inHistory: true, git: { state: 'committed' } });
    // Its commit holds the original, exactly [GIT-9]; nothing of the source is left out of history.
    expect(userGit(sb, vault(), ['rev-parse', `${done.git.commit}:${done.path}`]).trim()).toBe(userGit(sb, vault(), ['hash-object', join(vault(), done.path)]).trim());
    expect(userGit(sb, vault(), ['status', '--porcelain', '--', 'private/evidence'])).toBe('');
    expect(JSON.parse(sources('st')[0]!.attributions as string)).toEqual([expect.objectContaining({ attachmentId: attId })]);
    // The diagnostic goes with the next scan.
    expect(unadopted(scanSt())).toEqual([]);
  });

  it(`a publication killed after its install whose recovery fails: a scan leaves its source to it, and the retry completes ${UNPRIVILEGED_NOTE}`, () => {
    write('ev.txt', 'ev bytes\n');
    const rid = '55555555-5555-4555-8555-555555555555';
    const args = ['publish', '--store', 'st', '--request-id', rid, '--evidence', 'ev.txt', write('c.md', claimMd('C')), '--json'];
    const killed = cli(sb, args, { env: { KNOWLEDGE_CRASH_AT: 'after-install' } });
    expect(killed.code, killed.stderr).toBeNull();
    const run = unprivilegedCli(sb, 'a publication whose recovery fails');
    if (!run) return;
    // Its record's file gone and its folder not writable: the recovery of every writer's open fails (EACCES), the
    // publication stays journaled, its evidence installed.
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'), { readonly: true });
    const pubId = db.prepare('SELECT publication_id FROM publications').pluck().get() as string;
    const recordPath = db.prepare("SELECT path FROM journal_files WHERE path LIKE 'private/claims/%'").pluck().get() as string;
    db.close();
    rmSync(join(vault(), recordPath));
    const folder = join(vault(), recordPath, '..');
    chmodSync(folder, 0o555);
    try {
      const r = scanSt(run);
      expect(r.adopted).toBeUndefined();
      expect(unadopted(r)).toEqual([{ path: expect.stringMatching(/^private\/evidence\//), code: 'unadopted-source',
        reason: `not adopted as a source of private: publication ${pubId} retains it and is not finished: \`knowledge resume ${pubId}\` finishes it` }]);
      expect(sources('st')).toEqual([]);
    } finally {
      chmodSync(folder, 0o777);
    }
    const done = json(run(args));
    expect(done.publicationId).toBe(pubId); // acknowledged (its commit waits: the repository is root's, dubious to this user)
    expect(JSON.parse(sources('st')[0]!.attributions as string)).toEqual([expect.objectContaining({ publicationId: pubId })]);
    expect(unadopted(scanSt(run))).toEqual([]);
  });

  it('a publication whose new source was recorded meanwhile (adopted by a scan before adoption left it alone) completes as one more attribution', () => {
    write('ev.txt', 'ev bytes\n');
    const rid = '66666666-6666-4666-8666-666666666666';
    const args = ['publish', '--store', 'st', '--request-id', rid, '--evidence', 'ev.txt', write('c.md', claimMd('C')), '--json'];
    expect(cli(sb, args, { env: { KNOWLEDGE_CRASH_AT: 'after-install' } }).code).toBeNull();
    // The row an adopting scan made of the installed files (as a Knowledge before this fix did, with the recovery failing).
    const db = new Database(join(sb.dir, 'st', 'state.sqlite'));
    const plan = JSON.parse(db.prepare('SELECT plan FROM publications').pluck().get() as string) as { sources: Array<Record<string, unknown>> };
    const s = plan.sources[0]!;
    db.prepare(`INSERT INTO sources(partition, source_id, sha256, size, media_type, path, descriptor_path, in_history, attributions, created_at, descriptor)
      VALUES ('private', ?, ?, ?, ?, ?, ?, 1, ?, '2026-01-01T00:00:00.000Z', NULL)`)
      .run(s.sourceId, s.sha256, s.size, s.mediaType, s.path, s.descriptorPath, JSON.stringify([{ attribution: '', scanId: 'scan-x', at: '2026-01-01T00:00:00.000Z' }]));
    db.close();
    const done = json(cli(sb, args));
    expect(done.git.state).toBe('committed');
    expect(JSON.parse(sources('st')[0]!.attributions as string)).toEqual([
      { attribution: '', scanId: 'scan-x', at: '2026-01-01T00:00:00.000Z' },
      expect.objectContaining({ publicationId: done.publicationId }),
    ]);
  });
});

describe('[GIT-9] an adopted source\'s original is in history, and the commit named for it holds it', () => {
  /** A second store, not a clone: `kb3`, with a note scanned so its branch exists. */
  function freshStore(): string {
    expect(cli(sb, ['init', 'kb3']).code).toBe(0);
    const vault3 = join(sb.dir, 'kb3', 'vault');
    mkdirSync(join(vault3, 'private'), { recursive: true });
    writeFileSync(join(vault3, 'private', 'n.md'), '# note\n');
    expect(json(cli(sb, ['scan', '--store', 'kb3', '--json'])).git.state).toBe('committed');
    return vault3;
  }
  const holds = (vault: string, commit: string, path: string) =>
    expect(userGit(sb, vault, ['rev-parse', `${commit}:${path}`]).trim()).toBe(userGit(sb, vault, ['hash-object', join(vault, path)]).trim());

  it('a source folder copied there by hand (the E_CONFLICT remedy): the adopting scan commits its descriptor and original', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault3 = freshStore();
    mkdirSync(join(vault3, c.path, '..'), { recursive: true });
    copyFileSync(join(sb.dir, 'st', 'vault', c.descriptorPath), join(vault3, c.descriptorPath));
    copyFileSync(join(sb.dir, 'st', 'vault', c.path), join(vault3, c.path));

    const r = json(cli(sb, ['scan', '--store', 'kb3', '--json']));
    expect(r.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    expect(r.git.state).toBe('committed');
    holds(vault3, r.git.commit, c.descriptorPath);
    holds(vault3, r.git.commit, c.path);
    expect(userGit(sb, vault3, ['log', '-1', '--format=%s', r.git.commit]).trim()).toBe('External edits in private: 1 added, 1 adopted');
    expect(userGit(sb, vault3, ['status', '--porcelain', '--', 'private/evidence'])).toBe('');
    // The same bytes published, then attached: that source, and commits that hold its original.
    const p = json(cli(sb, ['publish', '--store', 'kb3', '--evidence', 'ev.txt', write('other.md', claimMd('Other')), '--json']));
    expect(p.evidence[0]).toMatchObject({ sourceId: c.sourceId, inHistory: true });
    holds(vault3, p.git.commit, c.path);
    const att = json(cli(sb, ['attach', '--store', 'kb3', '--root', sb.dir, 'ev.txt', '--json']));
    expect(att).toMatchObject({ newSource: false, git: { state: 'committed', commit: r.git.commit } });
  });

  it('a source kept out of history copied there by hand: the adopting scan commits its descriptor and the .gitignore beside the original, not the original', () => {
    write('pic.png', 'not much of a picture\n');
    const c = published('Pic', 'pic.png');
    const vault3 = freshStore();
    const dir = join(c.path, '..');
    mkdirSync(join(vault3, dir), { recursive: true });
    copyFileSync(join(sb.dir, 'st', 'vault', c.descriptorPath), join(vault3, c.descriptorPath));
    copyFileSync(join(sb.dir, 'st', 'vault', c.path), join(vault3, c.path));
    copyFileSync(join(sb.dir, 'st', 'vault', dir, '.gitignore'), join(vault3, dir, '.gitignore'));
    const r = json(cli(sb, ['scan', '--store', 'kb3', '--json']));
    expect(r.adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    holds(vault3, r.git.commit, c.descriptorPath);
    holds(vault3, r.git.commit, `${dir}/.gitignore`);
    expect(userGitRaw(sb, vault3, ['rev-parse', '--verify', '-q', `${r.git.commit}:${c.path}`]).status).not.toBe(0);
    expect(userGit(sb, vault3, ['status', '--porcelain', '--', 'private/evidence'])).toBe('');
  });

  it('a descriptor committed alone before its original came: the scan that adopts it commits the original, and an attachment names that commit', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault3 = freshStore();
    mkdirSync(join(vault3, c.path, '..'), { recursive: true });
    copyFileSync(join(sb.dir, 'st', 'vault', c.descriptorPath), join(vault3, c.descriptorPath));
    const first = json(cli(sb, ['scan', '--store', 'kb3', '--json']));
    expect(first.added).toEqual([c.descriptorPath]);
    expect(first.diagnostics.map((d: { code: string }) => d.code)).toContain('unadopted-source');

    copyFileSync(join(sb.dir, 'st', 'vault', c.path), join(vault3, c.path));
    const r = json(cli(sb, ['scan', '--store', 'kb3', '--json']));
    expect(r).toMatchObject({ added: [], adopted: [{ sourceId: c.sourceId, path: c.path }], git: { state: 'committed' } });
    expect(r.diagnostics.filter((d: { code: string }) => d.code === 'unadopted-source')).toEqual([]);
    holds(vault3, r.git.commit, c.path);
    expect(userGit(sb, vault3, ['log', '-1', '--format=%s', r.git.commit]).trim()).toBe('External edits in private: 1 adopted');
    const att = json(cli(sb, ['attach', '--store', 'kb3', '--root', sb.dir, 'ev.txt', '--json']));
    expect(att).toMatchObject({ newSource: false, git: { state: 'committed', commit: r.git.commit } });
  });

  it('a clone adopted while an earlier checkpoint waits (a stale branch lock): an attachment of the same bytes names the commit that holds them', () => {
    write('ev.txt', 'evidence text\n');
    const c = published('Sky', 'ev.txt');
    const vault2 = cloneStore();
    renameSync(join(vault2, c.path), join(sb.dir, 'saved'));
    expect(scan().diagnostics.map((d: { code: string }) => d.code)).toContain('unadopted-source');
    const lock = join(vault2, '.git', 'refs', 'heads', 'main.lock');
    writeFileSync(lock, '');
    writeFileSync(join(vault2, 'private', 'n.md'), '# note\n');
    expect(scan().git.state).toBe('pending');
    renameSync(join(sb.dir, 'saved'), join(vault2, c.path));
    expect(scan().adopted).toEqual([{ sourceId: c.sourceId, path: c.path }]);
    rmSync(lock);

    const att = json(cli(sb, ['attach', '--store', 'kb2', '--root', sb.dir, 'ev.txt', '--json']));
    expect(att.newSource).toBe(false);
    expect(att.git.state).toBe('committed');
    expect(att.git.commit).toMatch(/^[0-9a-f]{40}$/);
    holds(vault2, att.git.commit, c.path);
    expect(json(cli(sb, ['receipt', '--store', 'kb2', att.attachmentId, '--json'])).git).toEqual(att.git);
  });
});

describe('[GIT-14] an attachment never says committed without a commit', () => {
  it('a source an older Knowledge adopted with no commit recorded for it: an attachment of its bytes is pending, naming why', () => {
    write('ev.txt', 'evidence text\n');
    published('Sky', 'ev.txt');
    cloneStore();
    expect(scan().adopted).toHaveLength(1);
    // As a scan before this fix left it when a checkpoint was waiting: no commit recorded for the adopted source.
    const db = new Database(join(sb.dir, 'kb2', 'state.sqlite'));
    db.prepare('DELETE FROM adopted_in_history').run();
    db.close();
    const att = json(cli(sb, ['attach', '--store', 'kb2', '--root', sb.dir, 'ev.txt', '--json']));
    expect(att.newSource).toBe(false);
    expect(att.git).toEqual({ state: 'pending', code: 'waiting', reason: expect.stringMatching(/^no checkpoint of this store carried its source/) });
    expect(json(cli(sb, ['receipt', '--store', 'kb2', att.attachmentId, '--json'])).git).toEqual(att.git);
  });
});

describe('[PUB-1] adoption refuses what a publication or an attachment would refuse', () => {
  /** A source of `bytes` laid in the first store's vault by hand, its original named `name`, its descriptor saying `mediaType`. */
  function handMade(name: string, mediaType: string, bytes = 'evidence text\n'): string {
    const sha = createHash('sha256').update(bytes).digest('hex');
    const sourceId = `src-${sha.slice(0, 24)}`;
    const dir = `private/evidence/${sha.slice(0, 2)}/${sourceId}`;
    const vault = join(sb.dir, 'st', 'vault');
    mkdirSync(join(vault, dir), { recursive: true });
    writeFileSync(join(vault, dir, name), bytes);
    // JSON is YAML 1.2.
    writeFileSync(join(vault, `${dir}.yaml`), `${JSON.stringify({
      format: 'knowledge-source-v1', source_id: sourceId, retained_path: `${dir}/${name}`, sha256: sha, size: Buffer.byteLength(bytes),
      media_type: mediaType, original_name: name, attribution: '', retained_at: '2026-01-01T00:00:00.000Z', in_history: true,
    })}\n`);
    return `${dir}.yaml`;
  }
  const unadopted = (r: { diagnostics: Array<{ code: string }> }) => r.diagnostics.filter((d) => d.code === 'unadopted-source');

  it('an original whose name holds a newline, a media type that is not type/subtype: not adopted, and the diagnostic says why', () => {
    const badName = handMade('a\nb.txt', 'text/plain');
    const badType = handMade('ok.txt', 'text/plain\nx', 'other bytes\n');
    const r = json(cli(sb, ['scan', '--store', 'st', '--json']));
    expect(r.adopted).toBeUndefined();
    expect(unadopted(r)).toEqual([
      { path: badName, code: 'unadopted-source', reason: expect.stringMatching(/^not adopted as a source of private: its descriptor names ".*" as its retained original, a name Knowledge never writes/) },
      { path: badType, code: 'unadopted-source', reason: expect.stringMatching(/^not adopted as a source of private: its descriptor has a media_type, "text\/plain\\nx", that is not of the form type\/subtype/) },
    ].sort((a, b) => (a.path < b.path ? -1 : 1)));
    expect(sources('st')).toEqual([]);
    // A valid media type given in any case is one a publication accepts too.
    const fine = handMade('fine.txt', 'Text/Plain', 'third bytes\n');
    expect(json(cli(sb, ['scan', '--store', 'st', '--json'])).adopted).toEqual([{ sourceId: expect.any(String), path: fine.replace(/\.yaml$/, '/fine.txt') }]);
    expect(sources('st').map((x) => x.media_type)).toEqual(['text/plain']);
  });
});

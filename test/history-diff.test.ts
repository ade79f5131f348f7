/**
 * A diff reads the record's history only as far back as its two versions
 * [READ-2], and answers exactly as the whole history did: pairs of
 * versions across a rename by hand and a user's merge, shortened ids, and
 * commits that are no version of the record.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { makeSandbox, cli, gitWrapper, userGit, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import type { Caller } from '../src/access.js';
import { checkingDiffs } from './history-diff-old.js';

let sb: Sandbox;
let store: string;
let vault: string;
let svc: KnowledgeService | null = null;
let n = 0;
const OP: Caller = { kind: 'operator' };

beforeEach(() => {
  sb = makeSandbox();
  expect(cli(sb, ['init', 'st']).code).toBe(0);
  store = join(sb.dir, 'st');
  vault = join(store, 'vault');
});
afterEach(() => {
  svc?.close();
  svc = null;
  sb.cleanup();
});

function reader(gitPath?: string): KnowledgeService {
  svc?.close();
  svc = KnowledgeService.open(store, { write: false, env: sb.env, git: { pathEnv: sb.env.PATH, gitPath } });
  return svc;
}

function publish(id: string, body: string, revision?: number, args: string[] = []) {
  const name = `r${++n}.md`;
  const lines = ['---', 'kind: page', 'title: "Evolving"', `id: ${id}`, ...(revision ? [`revision: ${revision}`] : []), '---', body];
  writeFileSync(join(sb.dir, name), lines.join('\n') + '\n');
  const r = cli(sb, ['publish', '--store', 'st', '--json', ...args, name]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { records: Array<{ path: string }>; git: { commit: string } };
}

function revisions(id: string, count: number) {
  const out = [];
  for (let i = 1; i <= count; i++) out.push(publish(id, `body ${i}`, i > 1 ? i - 1 : undefined, i % 2 === 0 ? ['--actor', 'agent'] : []));
  return out;
}

describe('[READ-2] a diff reads only as far back as its versions', () => {
  it('the newest two of six versions: git is asked for those two files only; the oldest against the newest: all six', async () => {
    const rs = revisions('rec-d', 6);
    const log = join(sb.dir, 'cat-file.log');
    const wrapper = gitWrapper(sb, 'counting-git', [`case " $* " in *" cat-file --batch "*) tee -a '${log}' | git "$@"; exit $?;; esac`]);
    writeFileSync(log, '');
    const s = reader(wrapper);
    const read = () => {
      const lines = readFileSync(log, 'utf8').split('\n').filter((l) => l !== '');
      writeFileSync(log, '');
      return lines.length;
    };
    const d = await s.recordDiff(OP, 'rec-d', rs[4]!.git.commit, rs[5]!.git.commit);
    expect(d.patch).toContain('+body 6');
    expect(read()).toBe(2);
    await s.recordDiff(OP, 'rec-d', rs[0]!.git.commit, rs[5]!.git.commit);
    expect(read()).toBe(6);
    expect((await s.recordHistory(OP, 'rec-d')).versions).toHaveLength(6);
    expect(read()).toBe(6);
  }, 120_000);

  it('each version against the one before it, the oldest and the newest, across a rename by hand and a user\'s merge, whole and shortened, and commits that are no version: the whole history\'s answers', async () => {
    const rs = revisions('rec-d', 4);
    const other = publish('rec-other', 'another record');
    const oldPath = rs[0]!.records[0]!.path;
    const newPath = oldPath.replace(/[^/]*\.md$/, 'renamed.md');
    const git = (...args: string[]) => userGit(sb, vault, args);
    git('mv', oldPath, newPath);
    git('commit', '-q', '-m', 'Rename by hand');
    const db = new Database(join(store, 'state.sqlite'));
    db.prepare('UPDATE records SET path = ? WHERE id = ?').run(newPath, 'rec-d');
    db.close();
    git('checkout', '-q', '-b', 'side');
    writeFileSync(join(vault, newPath), readFileSync(join(vault, newPath), 'utf8').replace('body 4', 'body 4\nadded on side'));
    git('commit', '-q', '-am', 'side edit');
    git('checkout', '-q', 'main');
    writeFileSync(join(vault, newPath), readFileSync(join(vault, newPath), 'utf8').replace('body 4', 'main edit\nbody 4'));
    git('commit', '-q', '-am', 'main edit');
    git('merge', '-q', '--no-edit', 'side');

    const s = checkingDiffs(reader());
    const h = await s.recordHistory(OP, 'rec-d');
    expect(h.versions.length).toBeGreaterThanOrEqual(7);
    expect(new Set(h.versions.map((v) => v.path))).toEqual(new Set([oldPath, newPath]));
    const commits = h.versions.map((v) => v.commit);
    // Each version against the one before it, the oldest and the newest (checkingDiffs compares each with the old path's answer).
    const pairs = new Set<string>();
    commits.forEach((c, i) => {
      for (const older of [commits[i + 1], commits[commits.length - 1]]) if (older) pairs.add(`${older} ${c}`);
      pairs.add(`${c} ${commits[0]}`);
    });
    for (const pair of pairs) {
      const [a, b] = pair.split(' ');
      await s.recordDiff(OP, 'rec-d', a!, b!);
    }
    await s.recordDiff(OP, 'rec-d', commits[3]!.slice(0, 7), commits[0]!.slice(0, 12));
    // Commits that are no version of this record, whole and shortened: the same E_VALIDATION as before.
    const head = git('rev-parse', 'HEAD').trim();
    for (const bad of [other.git.commit, other.git.commit.slice(0, 9), 'f'.repeat(40), head.slice(0, 6)]) {
      const err = await s.recordDiff(OP, 'rec-d', bad, commits[0]!).then(() => null, (e: Error) => e);
      expect(err?.message).toMatch(/E_VALIDATION|not a committed version|commit ids/);
    }
    expect(pairs.size).toBeGreaterThanOrEqual(2 * commits.length - 2);
  }, 300_000);
});

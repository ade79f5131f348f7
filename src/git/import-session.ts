/**
 * The commit objects of a checkpoint are written by one `git fast-import`
 * per repository that goes on running between checkpoints (long-lived.ts),
 * instead of a new one per checkpoint: a one-shot fast-import costs ~7 ms
 * here for a one-file commit (start ~3 ms, its exit ~4 ms), a chain in a
 * running one ~3 ms, nearly all of it closing the pack (measured, git 2.39).
 *
 * Each chain is one `checkpoint`: fast-import closes its pack (fsync'd,
 * core.fsync=committed) and writes the scratch ref before it answers the
 * chain's `get-mark`s, so the commits are durable and visible to other git
 * processes when their ids come back — the same guarantee as the end of a
 * one-shot run. Each chain names its parent (`from`), so fast-import keeps
 * the trees it loaded when that is its own last commit (at 100k files a
 * chain took 5-8 ms when its trees were reloaded, ~2 ms kept); a root chain
 * starts with a `reset`. Before its input is ended, fast-import is told to
 * `reset` the scratch ref, so its exit does not write that ref again (after
 * a crash it may: the next checkpoint overwrites it, as after any crash
 * between the commit objects and the branch move).
 *
 * No `--done`: when Node dies, fast-import reads the end of its input and
 * exits cleanly (no crash report in `.git`); a chain cut off mid-commit is
 * fast-import's own error, like before.
 *
 * fast-import marks each pack it closed with a `.keep` file until it exits,
 * which keeps those packs out of repacks; a process is therefore retired
 * after `MAX_CHAINS` chains (and after any large chain, which also frees the
 * memory of its object table).
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { acquire, LongLivedGit, release, retire, usesOf } from './long-lived.js';
import type { GitResult, GitRunner } from './runner.js';
import { writeChainStream, type StreamPlan } from './commit-stream.js';
import type { BatchForCommit } from './types.js';
import { SCRATCH_REF } from './inspect.js';

const ARGS = ['fast-import', '--quiet', '--force'];
/** Chains one fast-import writes before it is retired (its packs stay `.keep` until then). */
export const MAX_CHAINS = 25;
/** A chain whose stream is larger than this retires its fast-import afterwards. */
const LARGE_CHAIN_BYTES = 8 * 1024 * 1024;

export type ChainImport = { ok: true; marks: string[] } | { ok: false; result?: GitResult; reason: string };

export interface Importer {
  write(data: Buffer | string): void;
  readLine(): Promise<string | null>;
  /** fast-import stopped answering: end it and report how it ended. */
  fail(): Promise<GitResult>;
  /** Write one chain of commits and read back their ids; the process then waits for the next chain. */
  chain(batches: readonly BatchForCommit[], plan: Omit<StreamPlan, 'session' | 'ref'>): Promise<ChainImport>;
}

/**
 * One fast-import per repository: the vault and the identity of its `.git`
 * directory, so a repository deleted and created again at the same place
 * gets a new fast-import (the old one's files are in the deleted directory).
 */
function keyOf(vault: string): string {
  let id = 'none';
  try {
    const st = statSync(join(vault, '.git'));
    id = `${st.dev}:${st.ino}`;
  } catch {
    /* no repository: nothing runs for it */
  }
  return `fast-import\0${vault}\0${id}`;
}

/**
 * End this repository's idle fast-import and wait for its exit, which
 * removes the `.keep` files of its packs (maintenance, before a repack).
 */
export function retireImporter(runner: GitRunner, vault: string): Promise<void> {
  return retire(runner, keyOf(vault));
}

/**
 * Packs this repository's running fast-import has closed (one per chain):
 * they carry `.keep` until it exits, so the pack count on disk leaves them out.
 */
export function importerPacks(runner: GitRunner, vault: string): number {
  return usesOf(runner, keyOf(vault));
}

export function acquireImporter(runner: GitRunner, vault: string, env: Record<string, string>, extraConfig: string[]): Importer {
  const key = keyOf(vault);
  const p = acquire(runner, key, () => new LongLivedGit(runner, ARGS, { cwd: vault, env, extraConfig, farewell: `reset ${SCRATCH_REF}\n` }));
  if (!p) {
    const result: GitResult = { code: -1, stdout: Buffer.alloc(0), stderr: 'cannot start git fast-import', timedOut: false };
    return {
      write: () => undefined,
      readLine: async () => null,
      fail: async () => result,
      chain: async () => ({ ok: false, result, reason: result.stderr }),
    };
  }
  const fail = async (): Promise<GitResult> => {
    release(runner, key, p, false);
    return p.result();
  };
  return {
    write: (data) => p.write(data),
    readLine: () => p.readLine(),
    fail,
    chain: async (batches, plan) => {
      let bytes = 0;
      try {
        await writeChainStream(batches, { ...plan, ref: SCRATCH_REF, session: true }, (chunk) => {
          bytes += chunk.length;
          return p.writeAsync(chunk);
        });
      } catch (err) {
        release(runner, key, p, false);
        throw err;
      }
      const marks: string[] = [];
      for (let i = 0; i < batches.length; i++) {
        const line = await p.readLine();
        if (line === null) return { ok: false, result: await fail(), reason: 'fast-import ended' };
        marks.push(line);
      }
      if (!marks.every((m) => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(m))) {
        release(runner, key, p, false);
        return { ok: false, reason: `fast-import returned unexpected commit ids for ${batches.length} batches: ${marks[0]?.slice(0, 200) ?? ''}` };
      }
      release(runner, key, p, p.uses < MAX_CHAINS && bytes <= LARGE_CHAIN_BYTES);
      return { ok: true, marks };
    },
  };
}

/**
 * Pure planning half of a checkpoint (STYLE habit 2): a batch in, the exact
 * `git fast-import` stream out. No I/O, so it is table-tested without git.
 *
 * fast-import stores raw bytes (no clean filters, no eol conversion) and never
 * signs [GIT-12]; the fixed identity and date make a rebuilt commit
 * byte-identical to one written before a crash [GIT-6].
 */
import { createHash } from 'node:crypto';
import { isDeletion, type BatchForCommit } from './types.js';
import { HISTORY_DIR } from '../store/layout.js';
import type { Trailers } from './trailers.js';

export const KNOWLEDGE_IDENT = 'Knowledge <knowledge@localhost>';

/** Machine-readable trailers so retries find their own commits [GIT-11]. */
export function batchTrailerValue(batch: Pick<BatchForCommit, 'vaultId' | 'batchId'>): string {
  return `${batch.vaultId}/${batch.batchId}`;
}

/** The trailer naming what a batch's commit checkpoints: its publication, scan or attachment. */
export const REF_TRAILERS = ['Knowledge-Publication', 'Knowledge-Scan', 'Knowledge-Attachment'] as const;

export function refTrailer(kind: BatchForCommit['kind']): (typeof REF_TRAILERS)[number] {
  return kind === 'publication' ? 'Knowledge-Publication' : kind === 'scan' ? 'Knowledge-Scan' : 'Knowledge-Attachment';
}

/**
 * What identifies a batch's commit on the branch: its batch trailer and the
 * publication, scan or attachment it checkpoints. The batch number alone is
 * not enough: a store whose state went back (a restored backup) numbers new
 * batches again, and a retry must not take another publication's commit for
 * its own [GIT-6]. `commitKeys(trailers)` for a parsed commit.
 */
export function batchCommitKey(batch: Pick<BatchForCommit, 'vaultId' | 'batchId' | 'kind' | 'refId'>): string {
  return commitKey(batchTrailerValue(batch), refTrailer(batch.kind), oneLine(batch.refId).trim());
}

function commitKey(batchValue: string, trailer: string, refValue: string): string {
  return `${batchValue}\n${trailer}: ${refValue}`;
}

/**
 * The `batchCommitKey`s a parsed commit answers to: one per Knowledge-Batch
 * trailer, each with the first publication, scan or attachment trailer the
 * commit carries; none when it carries no such trailer. A retry's search for
 * its own commit (checkpoint.ts) and `knowledge verify` both match a commit to
 * a batch by these, never by the batch number alone.
 */
export function commitKeys(trailers: Trailers): string[] {
  const ref = REF_TRAILERS.map((t) => [t, trailers.values(t)[0]] as const).find(([, v]) => v !== undefined);
  if (ref === undefined) return [];
  return trailers.values('Knowledge-Batch').filter((v) => v !== '').map((v) => commitKey(v, ref[0], ref[1]!.trim()));
}

export function commitMessage(batch: BatchForCommit): string {
  // A subject is one line; anything else would break trailer parsing.
  const subject = batch.subject.replace(/[\r\n]+/g, ' ').trim() || `Knowledge ${batch.kind}`;
  const refKey = refTrailer(batch.kind);
  return (
    `${subject}\n\n` +
    `Knowledge-Actor: ${batch.actor}\n` +
    `Knowledge-Batch: ${batchTrailerValue(batch)}\n` +
    `${refKey}: ${oneLine(batch.refId)}\n`
  );
}

function oneLine(s: string): string {
  return s.replace(/[\r\n]+/g, ' ');
}

/** Whole seconds since the epoch; the commit date is fixed by the batch, not the clock [GIT-6]. */
/** The first `max` code points of `text`: a cut never splits a character (an emoji's surrogate pair). */
export function clipCodePoints(text: string, max: number): string {
  if (text.length <= max) return text;
  return Array.from(text).slice(0, max).join('');
}

export function epochSeconds(iso: string): number {
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) throw new TypeError(`batch createdAt is not a date: ${iso}`);
  // A clock set before 1970: git's fsck refuses a negative date (badDateOverflow), so the commit says 1970.
  return Math.max(0, Math.floor(ms / 1000));
}

/**
 * C-style quoting as fast-import unquotes it. Every path is quoted, which is
 * always valid and covers newlines, leading quotes and backslashes; bytes
 * >= 0x80 (UTF-8) pass through literally.
 */
export function quotePath(path: string): Buffer {
  const raw = Buffer.from(path, 'utf8');
  const parts: number[] = [0x22];
  for (const b of raw) {
    if (b === 0x22) parts.push(0x5c, 0x22);
    else if (b === 0x5c) parts.push(0x5c, 0x5c);
    else if (b === 0x0a) parts.push(0x5c, 0x6e);
    else if (b === 0x09) parts.push(0x5c, 0x74);
    else if (b < 0x20 || b === 0x7f) {
      const oct = b.toString(8).padStart(3, '0');
      parts.push(0x5c, ...Buffer.from(oct, 'ascii'));
    } else parts.push(b);
  }
  parts.push(0x22);
  return Buffer.from(parts);
}

/** Code points HFS+ ignores in names (git's utf8.c next_hfs_char): ".g\u200cit" is ".git" there. */
const HFS_IGNORED_SET = '[\\u200c-\\u200f\\u202a-\\u202e\\u206a-\\u206f\\ufeff]';
const HFS_IGNORED = new RegExp(HFS_IGNORED_SET, 'gu');
/**
 * A component with a part starting with `.` or `g` once those are left out (a part: the component, or what follows
 * one of its backslashes): the only ones isGitDirAlias can accept.
 */
const MAYBE_ALIAS = new RegExp(`(?:^|/|\\\\)${HFS_IGNORED_SET}*[.gG]`, 'u');
/** git's path.c is_ntfs_dotgit: `.git` or `git~1` (ASCII, any case), then only dots and spaces up to the end or a `:` (an NTFS stream). */
const NTFS_DOTGIT = /^(?:\.git|git~1)[. ]*(?::|$)/i;

/**
 * Whether a path component is one Git's index refuses as `.git` by another
 * name, or `.git` itself (read-cache.c verify_path), under either rule, each
 * as Git applies it — never the two combined:
 * - core.protectNTFS (on by default; is_ntfs_dotgit): `.git` or `git~1`, any
 *   ASCII case, with trailing dots or spaces or an NTFS stream suffix (`:…`),
 *   at the start of the component or after a backslash in it (a separator
 *   on Windows);
 * - core.protectHFS (on by default on macOS; is_hfs_dotgit): `.git`, any
 *   ASCII case, once the code points HFS+ ignores are left out — nothing may
 *   follow it, and `git~1` is no alias there.
 * So `g\u200cit~1` and `.g\u200cit.` are ordinary names, which `git add`
 * takes with both protections on. A refused path could be committed but
 * never enter a user's index, whose next commit would then delete it [GIT-10].
 */
export function isGitDirAlias(component: string): boolean {
  if (/^\.git$/i.test(component.replace(HFS_IGNORED, ''))) return true;
  return component.split('\\').some((part) => NTFS_DOTGIT.test(part));
}

/**
 * The first component of a '/'-separated path that isGitDirAlias accepts, if
 * any. Cheap for ordinary paths (it runs for every file a scan walks): only a
 * path with a component that could be one is split.
 */
export function gitDirAliasIn(path: string): string | undefined {
  return MAYBE_ALIAS.test(path) ? path.split('/').find(isGitDirAlias) : undefined;
}

/**
 * Reject paths that could escape the tree or write Knowledge's private files
 * into history [GIT-13]. The caller validated them already; this is a guard
 * against a programmer error, so it throws.
 */
export function assertCommittablePath(path: string): void {
  const bad =
    path === '' ||
    path.startsWith('/') ||
    path.endsWith('/') ||
    path.includes('\\') ||
    path.includes('\0') ||
    // (Not isGitDirAlias: a scan refuses such names now, but one queued by an older Knowledge must
    // still commit, not stop the queue; the index update leaves it out.)
    path.split('/').some((c) => c === '' || c === '.' || c === '..' || c.toLowerCase() === '.git') ||
    path === 'vault.json' ||
    path === HISTORY_DIR ||
    path.startsWith(`${HISTORY_DIR}/`);
  if (bad) throw new TypeError(`path may not be committed by Knowledge: ${JSON.stringify(path)}`);
}

export interface StreamPlan {
  ref: string;
  /** Parent commit, or null for a root commit. */
  from: string | null;
  /** Paths whose parent entry is executable (chainModes). */
  executable: ReadonlySet<string>;
  /** Whether the repository records the executable bit (core.fileMode; chainModes). */
  fileMode: boolean;
  /** Paths whose parent entry is a symbolic link kept as one (core.symlinks=false; chainModes). */
  links?: ReadonlySet<string>;
  /**
   * For a fast-import that goes on running after this chain
   * (import-session.ts): the chain ends with `checkpoint` (the pack is closed
   * and the ref written before the marks are answered) instead of `done`, and
   * a root chain starts with a `reset` of the ref (no parent from an earlier
   * chain). A chain with a parent names it with `from`, which keeps
   * fast-import's trees in memory when it is the commit it wrote last.
   */
  session?: boolean;
  /**
   * Per batch of the chain: the blob ids of its files when every one of its
   * blobs is already in the repository (blob-preload.ts); such a batch names
   * them (`M <mode> <id> <path>`) instead of carrying its bytes again. The
   * ids are the ones computed from the batch's own bytes (stepsFor).
   */
  preloaded?: ReadonlyArray<ReadonlyMap<string, { mode: string; oid: string } | null> | null>;
}

/**
 * The file mode each batch of a chain gives each of its paths (null = deleted),
 * as `git add` would: where the repository records the executable bit
 * (`fileMode`), a change that knows its file's bit (`exec`) is 100755 or
 * 100644 by it; otherwise the path keeps 100755 while it exists and its entry
 * at `from` was executable, and a new path is 100644. A deletion drops the
 * bit, so a later re-creation starts again — exactly what the same batches
 * committed one at a time would have written.
 */
export type FileEntryMode = '100644' | '100755' | '120000';

export function chainModes(
  batches: readonly BatchForCommit[],
  executable: ReadonlySet<string>,
  fileMode: boolean,
  /**
   * Paths whose entry at `from` is a symbolic link in a repository that does
   * not check links out as links (core.symlinks=false): git keeps 120000 for
   * the plain file holding the link's target, and so does Knowledge.
   */
  links: ReadonlySet<string> = new Set(),
): Array<Map<string, FileEntryMode | null>> {
  const exec = new Set(executable);
  const link = new Set(links);
  return batches.map((batch) => {
    const modes = new Map<string, FileEntryMode | null>();
    for (const ch of batch.changes) {
      if (isDeletion(ch)) {
        exec.delete(ch.path);
        link.delete(ch.path);
        modes.set(ch.path, null);
        continue;
      }
      if (link.has(ch.path)) {
        modes.set(ch.path, '120000');
        continue;
      }
      if (fileMode && ch.exec !== undefined) {
        if (ch.exec) exec.add(ch.path);
        else exec.delete(ch.path);
      }
      modes.set(ch.path, exec.has(ch.path) ? '100755' : '100644');
    }
    return modes;
  });
}

/**
 * Whether the modes of a chain (chainModes) depend on `fileMode` at all: only
 * when some change would set the bit, or clear it on a path that has it. The
 * repository's config is read only then.
 */
export function modesDependOnFileMode(batches: readonly BatchForCommit[], executable: ReadonlySet<string>): boolean {
  for (const b of batches) {
    for (const ch of b.changes) {
      if (ch.exec === true || (ch.exec === false && executable.has(ch.path) && !isDeletion(ch))) return true;
    }
  }
  return false;
}

/** The fast-import stream for one checkpoint commit; ends with `get-mark :1` and `done`. */
export function buildFastImportStream(batch: BatchForCommit, plan: StreamPlan): Buffer {
  return buildChainStream([batch], plan);
}

/**
 * One stream for a chain of checkpoint commits, in queue order: commit i has
 * mark :i and (after the first, whose parent is `plan.from`) the previous
 * commit as parent. Each commit carries its own batch's date and trailers, so
 * a rebuilt chain is byte-identical however the queue was cut into chains
 * [GIT-6]. The stream ends with `get-mark :1` … `get-mark :n` and `done`
 * (or, for a running session, see `StreamPlan.session`).
 */
export function* chainStreamPieces(batches: readonly BatchForCommit[], plan: StreamPlan): Generator<Buffer> {
  if (batches.length === 0) throw new TypeError('a chain needs at least one batch');
  const modes = chainModes(batches, plan.executable, plan.fileMode, plan.links);
  const text = (s: string) => Buffer.from(s, 'utf8');
  if (plan.session && !plan.from) yield text(`reset ${plan.ref}\n`);
  for (let i = 0; i < batches.length; i++) {
    const batch = batches[i]!;
    const when = `${epochSeconds(batch.createdAt)} +0000`;
    const msg = text(commitMessage(batch));
    yield text(`commit ${plan.ref}\nmark :${i + 1}\nauthor ${KNOWLEDGE_IDENT} ${when}\ncommitter ${KNOWLEDGE_IDENT} ${when}\ndata ${msg.length}\n`);
    yield msg;
    yield text('\n');
    // Later commits continue the same ref, i.e. from the previous mark.
    if (i === 0 && plan.from) yield text(`from ${plan.from}\n`);
    const batchModes = modes[i]!;
    const ids = plan.preloaded?.[i] ?? null;
    for (const ch of batch.changes) {
      assertCommittablePath(ch.path);
      const q = quotePath(ch.path);
      const id = ids?.get(ch.path);
      if (id) {
        yield Buffer.concat([text(`M ${batchModes.get(ch.path)!} ${id.oid} `), q, text('\n')]);
        continue;
      }
      if (ids && isDeletion(ch)) {
        yield Buffer.concat([text('D '), q, text('\n')]);
        continue;
      }
      const bytes = ch.bytes; // once: it may be read from the outbox on access
      if (bytes === null) {
        yield Buffer.concat([text('D '), q, text('\n')]);
      } else {
        yield Buffer.concat([text(`M ${batchModes.get(ch.path)!} inline `), q, text(`\ndata ${bytes.length}\n`)]);
        yield bytes;
        yield text('\n');
      }
    }
    yield text('\n');
  }
  let tail = plan.session ? 'checkpoint\n' : '';
  for (let i = 1; i <= batches.length; i++) tail += `get-mark :${i}\n`;
  yield text(plan.session ? tail : `${tail}done\n`);
}

/** The whole stream in one buffer (tests, and small chains). */
export function buildChainStream(batches: readonly BatchForCommit[], plan: StreamPlan): Buffer {
  return Buffer.concat([...chainStreamPieces(batches, plan)]);
}

/**
 * The same stream written to a running fast-import in writes of about
 * 256 KiB, each awaited while git's input pipe is full: memory stays at the
 * queued bytes themselves instead of a second, concatenated copy of all of
 * them (a 100k-file baseline, a 99 MiB original).
 */
export async function writeChainStream(batches: readonly BatchForCommit[], plan: StreamPlan, write: (chunk: Buffer) => Promise<void>): Promise<void> {
  const FLUSH_AT = 256 * 1024;
  let group: Buffer[] = [];
  let bytes = 0;
  for (const piece of chainStreamPieces(batches, plan)) {
    group.push(piece);
    bytes += piece.length;
    if (bytes >= FLUSH_AT) {
      await write(group.length === 1 ? group[0]! : Buffer.concat(group));
      group = [];
      bytes = 0;
    }
  }
  if (group.length > 0) await write(Buffer.concat(group));
}

/** Blob id computed in-process: hash of "blob <len>\0" + bytes [FIELD-NOTES]. */
export function blobId(bytes: Buffer, format: 'sha1' | 'sha256'): string {
  return createHash(format).update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

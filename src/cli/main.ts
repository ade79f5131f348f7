/**
 * The `knowledge` CLI [SURF-1]: parse -> call the core -> render. Exit 0 when
 * the request was accepted (whatever git.state is), 1 with "CODE: message"
 * for a rejected request, 2 for a usage error (Appendix A); 3 (an extension)
 * when it was accepted but its answer could not be written to stdout (main()).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync, statSync, type Stats } from 'node:fs';
import { basename, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import { endBySignal, stopOnSignals, type StopSignal } from '../interrupt.js';
import { KnowledgeError, isDiskFull, isErrnoError, isIoError, isKnowledgeError } from '../errors.js';
import { LIMITS } from '../publish/limits.js';
import { refuseControlInPath } from '../attach/file-source.js';
// Only light modules are imported up front: the store, the service (SQLite,
// YAML, every pipeline) and the renderers are loaded by the commands that use
// them, so `--help` or a usage error starts fast and `scan` loads no Gateway,
// MCP or read-side rendering code.
import type { KnowledgeService } from '../service.js';
import type { GitState } from '../git/types.js';
import type { ActivityEntry } from '../activity.js';
import type { PublicationReceipt } from '../publish/types.js';
import type { Caller } from '../access.js';
import type { AttachmentReceipt } from '../attach/types.js';
import type { VerifyReport } from '../checkpoint/verify.js';
import { internalErrorLines, oneLine, shown, shownText, warningLine } from './shown.js';

/** The CLI reads and scans as the operator (access.ts OPERATOR, without loading it). */
const OPERATOR: Caller = { kind: 'operator' };

export class UsageError extends Error {}

const USAGE = `usage:
  knowledge init DIR [--read-only] [--json]
  knowledge publish --store DIR [--partition ID] [--actor agent|operator] [--request-id UUID] [--evidence FILE]... RECORD.md... [--json]
  knowledge attach  --store DIR [--partition ID] [--actor agent|operator] [--request-id UUID] [--attribution TEXT] [--media-type TYPE] [--root DIR] FILE [--json]
  knowledge scan    --store DIR [--partition ID] [--json]
  knowledge resume  --store DIR PUBLICATION_ID|ATTACHMENT_ID [--json]
  knowledge receipt --store DIR PUBLICATION_ID|ATTACHMENT_ID|REQUEST_ID|SCAN_ID [--json]
  knowledge activity --store DIR [--limit N] [--offset N | --cursor C] [--json]
  knowledge verify  --store DIR [--json]
  knowledge history --store DIR RECORD_ID [--from COMMIT --to COMMIT] [--json]
  knowledge show    --store DIR RECORD_ID [--json]
  knowledge lookup  --store DIR ID|TITLE|ALIAS [--json]
  knowledge search  --store DIR [--mode all|any|phrase] [--kind K] [--tag T] [--lifecycle L] [--after DATE] [--before DATE] [--limit N] [--offset N] WORDS... [--json]
  knowledge list    --store DIR [--partition ID] [--kind K] [--type T] [--tag T] [--lifecycle L] [--limit N] [--offset N | --cursor C] [--json]
  knowledge serve   --store DIR [--host 127.0.0.1] [--port 8484] [--token T] [--json]
  knowledge mcp     --store DIR --agent ID [--session ID] [--sandboxed] [--root DIR] [--json]
  knowledge demo [DIR] [--port N]
--store may be replaced by KNOWLEDGE_STORE.`;

/** Where a command writes; `answered` hears the value a command's answer (its stdout) was made from. */
type Out = { stdout: (s: string) => void; stderr: (s: string) => void; answered?: (value: unknown) => void };

const defaultOut: Out = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

type Values = Record<string, string | boolean | string[] | undefined>;

function parse(args: string[], options: ParseArgsConfig['options']): { values: Values; positionals: string[] } {
  const all: NonNullable<ParseArgsConfig['options']> = { json: { type: 'boolean' }, store: { type: 'string' }, ...options };
  let parsed;
  try {
    parsed = parseArgs({ args, options: all, allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // An option that takes one value, given twice, is a mistake: parseArgs would keep the last silently.
  const seen = new Set<string>();
  for (const t of parsed.tokens) {
    if (t.kind === 'positional' && t.value === '') throw new UsageError('an argument is empty (an unset shell variable?)');
    if (t.kind !== 'option' || all[t.name]?.type !== 'string') continue;
    // An empty value would mean the default (the current directory, for a path): refused, never guessed.
    if (t.value === '') throw new UsageError(`--${t.name} needs a value; it was given an empty one`);
    if (all[t.name]?.multiple) continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} may be given once`);
    seen.add(t.name);
  }
  return { values: parsed.values as Values, positionals: parsed.positionals };
}

function storeDir(values: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  const dir = (values.store as string | undefined) ?? env.KNOWLEDGE_STORE;
  if (!dir) throw new UsageError('--store DIR (or KNOWLEDGE_STORE) is required');
  return dir;
}

export function gitOptionsFromEnv(env: NodeJS.ProcessEnv) {
  // A timer longer than 2^31 - 1 ms fires at once in Node (TimeoutOverflowWarning): the largest timeout that works.
  return { gitPath: env.KNOWLEDGE_GIT || undefined, pathEnv: env.PATH, timeoutMs: positiveIntegerFromEnv(env, 'KNOWLEDGE_GIT_TIMEOUT_MS', 2 ** 31 - 1) };
}

/** A setting given in the environment as a whole number from 1 to `max`; unset or empty: the default. Anything else is named, not guessed. */
function positiveIntegerFromEnv(env: NodeJS.ProcessEnv, name: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if (!/^\d{1,16}$/.test(v) || Number(v) === 0 || Number(v) > max) throw new KnowledgeError('E_VALIDATION', `${name} must be a whole number from 1 to ${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

export async function openService(dir: string, write: boolean, command: string, env: NodeJS.ProcessEnv): Promise<KnowledgeService> {
  const { KnowledgeService } = await import('../service.js');
  return KnowledgeService.open(dir, { write, command, env, git: gitOptionsFromEnv(env) });
}

export function formatGit(git: GitState): string {
  switch (git.state) {
    case 'committed':
      return `committed ${git.commit}`;
    case 'pending':
      return `pending (${git.code}): ${shown(git.reason)}`;
    case 'unavailable':
      return `unavailable: ${shown(git.reason)}`;
  }
}

/** What an Activity entry was, in a few words and two spaces after them (empty when nothing is known): its text line. */
function activityWhat(e: ActivityEntry): string {
  const d = e.detail ?? {};
  const clip = (t: string): string => {
    const points = Array.from(t.replace(/\s+/g, ' '));
    return points.length > 60 ? `${points.slice(0, 59).join('')}…` : points.join('');
  };
  let what = '';
  if (e.kind === 'publication' && typeof d.title === 'string') {
    const more = typeof d.records === 'number' && d.records > 1 ? ` and ${d.records - 1} more` : '';
    what = `“${clip(d.title)}”${more} in ${String(d.partition)}`;
  } else if (e.kind === 'attachment' && typeof d.filename === 'string') {
    what = `${clip(d.filename)} in ${String(d.partition)}`;
  } else if (e.kind === 'scan') {
    const counts = (['added', 'modified', 'deleted', 'renamed'] as const).filter((k) => typeof d[k] === 'number' && d[k] > 0).map((k) => `${String(d[k])} ${k}`);
    const where = d.partition === 'all' ? 'every partition' : String(d.partition);
    what = `${d.baseline ? 'baseline of' : 'of'} ${where}${counts.length ? `: ${counts.join(', ')}` : ''}`;
  }
  return what ? `${shown(what)}  ` : '';
}

function renderPublication(r: PublicationReceipt): string {
  const lines = [`publication ${r.publicationId} (request ${r.requestId}) in ${r.partition} by ${r.actor}`];
  for (const rec of r.records) lines.push(`  record ${shown(rec.id)} r${rec.revision}  ${shown(rec.path)}`);
  for (const e of r.evidence) lines.push(`  evidence ${e.sourceId}  ${shown(e.path)}  ${e.size} bytes${e.inHistory ? '' : '  (kept out of history)'}`);
  lines.push(`  git: ${formatGit(r.git)}`);
  return lines.join('\n') + '\n';
}

function renderVerify(r: VerifyReport): string {
  const lines = [
    `${r.ok ? 'ok' : 'PROBLEMS'}: store ${shown(r.store)}`,
    `  branch ${r.branch !== null ? shown(r.branch) : '(none)'} at ${r.tip ?? '(no commits)'}`,
    `  batches ${r.batches.total}: ${r.batches.committed} committed, ${r.batches.queued} waiting; ${r.checked.files} committed files compared` +
      (r.checked.filesWithoutBlobId > 0 ? ` (${r.checked.filesWithoutBlobId} recorded without a blob id)` : ''),
  ];
  for (const p of r.problems) lines.push(`  ${p.code}: ${shown(p.message)}`);
  return lines.join('\n') + '\n';
}

/**
 * verify's one line on stderr when it exits 1, starting with a stable code as
 * every rejection does (Appendix A): E_UNAVAILABLE when Git could not be run or
 * could not read the repository to check, E_CONFLICT when the store and its
 * repository disagree.
 */
function verifyFailureLine(r: VerifyReport): string {
  const codes = [...new Set(r.problems.map((p) => p.code))];
  // Git could not be run, or could not read the repository (it timed out, say): nothing was found to disagree.
  const code = codes.every((c) => c === 'git-unavailable' || c === 'repository-unreadable') ? 'E_UNAVAILABLE' : 'E_CONFLICT';
  const n = r.problems.length;
  // One line, as errorLine's: a store path may hold a line break.
  return shownText(oneLine(`${code}: verify found ${n} problem${n === 1 ? '' : 's'} in ${r.store}: ${codes.join(', ')}`));
}

function renderAttachment(r: AttachmentReceipt): string {
  const why = r.inHistory ? 'exact copy in history' : `kept out of history (${r.size >= 100 * 1024 * 1024 ? '100 MiB or more' : 'media'})`;
  return [
    `attachment ${r.attachmentId} (request ${r.requestId}) in ${r.partition} by ${r.actor}`,
    `  source ${r.sourceId}${r.newSource ? '' : ' (already retained: attribution added)'}  ${shown(r.path)}  ${r.size} bytes  ${shown(r.mediaType)}`,
    `  sha256 ${r.sha256}  ${why}`,
    `  git: ${formatGit(r.git)}`,
  ].join('\n') + '\n';
}

function renderReceipt(r: PublicationReceipt | AttachmentReceipt): string {
  return r.kind === 'attachment' ? renderAttachment(r) : renderPublication(r);
}

/** Publications first, then attachments: ids and request ids never collide between them. */
async function orAttachment<T>(id: string, publication: () => Promise<T> | T, attachment: () => Promise<AttachmentReceipt> | AttachmentReceipt): Promise<T | AttachmentReceipt> {
  try {
    return await publication();
  } catch (err) {
    if (!isKnowledgeError(err) || err.code !== 'E_NOT_FOUND') throw err;
    try {
      return await attachment();
    } catch (e) {
      // Neither: say what was looked for, not only the last place.
      if (isKnowledgeError(e) && e.code === 'E_NOT_FOUND') throw new KnowledgeError('E_NOT_FOUND', `no publication, attachment or request ${id}`);
      throw e;
    }
  }
}

/**
 * Run `fn` on an open service, then let the Git work after its receipts
 * finish (settle) and close. That work never changes the command's answer:
 * a request whose receipt is recorded was accepted [GIT-15], and a failure
 * after it is a warning on stderr (each is made good by a later write or
 * scan); a failed `fn` keeps its own error.
 */
async function withService<T>(out: Out, dir: string, write: boolean, command: string, env: NodeJS.ProcessEnv, fn: (s: KnowledgeService) => Promise<T> | T): Promise<T> {
  const svc = await openService(dir, write, command, env);
  try {
    return await fn(svc);
  } finally {
    try {
      for (const note of await svc.settle()) out.stderr(warningLine(note));
    } catch (err) {
      out.stderr(`warning: after the answer: ${errorLine(err, env)}`);
    } finally {
      svc.close();
    }
  }
}

/**
 * Run a writing command's `work` so that SIGINT, SIGTERM or SIGHUP end it
 * with one line on stderr (`line`: what was interrupted and how to finish it)
 * and the signal's own exit status (128 + its number), rather than silently;
 * an index update under way is finished first (src/interrupt.ts). `clear`
 * takes what the command drew on the terminal (scan's progress line) off it
 * first, as the command's own end would: the process ends without it.
 */
async function interruptible<T>(out: Out, line: (signal: StopSignal) => string, work: () => Promise<T>, clear?: () => void): Promise<T> {
  const stop = stopOnSignals((signal) => {
    clear?.();
    out.stderr(oneLine(line(signal)) + '\n');
    endBySignal(signal);
  }, (note) => {
    // A signal held while the index follows the branch: said on a line of its own, not after a progress line.
    clear?.();
    out.stderr(note);
  });
  try {
    return await work();
  } finally {
    stop();
  }
}

/** What an interrupted publish says: its request id always (chosen before the store opens), its publication id once journaled. */
function publishInterrupted(signal: StopSignal, requestId: string, progress: ReturnType<KnowledgeService['requestProgress']>): string {
  if (progress?.kind === 'publication' && progress.status === 'abandoned') {
    return `E_INTERRUPTED: ${signal} stopped knowledge publish; publication ${progress.id} (request ${requestId}) was abandoned: knowledge receipt ${progress.id} says why`;
  }
  if (progress?.kind === 'publication') {
    return `E_INTERRUPTED: ${signal} stopped knowledge publish after publication ${progress.id} (request ${requestId}) was journaled; ` +
      `knowledge resume ${progress.id} (or the same command with --request-id ${requestId}) finishes it; publishing the files anew would make a second publication`;
  }
  return `E_INTERRUPTED: ${signal} stopped knowledge publish of request ${requestId}; knowledge receipt ${requestId} shows whether it was accepted; ` +
    `run the same command again with --request-id ${requestId} to finish it without publishing twice`;
}

/** What an interrupted attach says: the request id to resume the upload with [ATT-1]. */
function attachInterrupted(signal: StopSignal, requestId: string, file: string, progress: ReturnType<KnowledgeService['requestProgress']>): string {
  const what = progress?.kind === 'attachment' ? `attachment ${progress.id} (request ${requestId})` : `request ${requestId}`;
  return `E_INTERRUPTED: ${signal} stopped knowledge attach of ${file}, ${what}; retry with request id ${requestId} to resume: ` +
    `run the same command again with --request-id ${requestId} (a new request would attach the file a second time)`;
}

export async function run(argv: string[], env: NodeJS.ProcessEnv = process.env, out: Out = defaultOut): Promise<number> {
  const [command, ...rest] = argv;
  const emit = (json: boolean, value: unknown, human: string) => {
    out.answered?.(value);
    out.stdout(json ? JSON.stringify(value, null, 2) + '\n' : human);
  };
  // `knowledge COMMAND --help` (or -h, before any `--`): that command's usage, nothing run.
  const options = rest.indexOf('--') >= 0 ? rest.slice(0, rest.indexOf('--')) : rest;
  if (command !== undefined && options.some((a) => a === '--help' || a === '-h')) {
    const usage = USAGE.split('\n');
    const lines = usage.filter((l) => l.startsWith(`  knowledge ${command} `));
    if (lines.length > 0) {
      out.stdout(['usage:', ...lines, ...(lines.some((l) => l.includes('--store')) ? [usage.at(-1)!] : [])].join('\n') + '\n');
      return 0;
    }
  }
  try {
    switch (command) {
      case 'init': {
        const { values, positionals } = parse(rest, { 'read-only': { type: 'boolean' } });
        if (positionals.length !== 1) throw new UsageError('init takes one DIR');
        const { initStore } = await import('../store/store.js');
        const r = initStore(positionals[0]!, { readOnly: Boolean(values['read-only']), env });
        emit(Boolean(values.json), r, `${r.created ? 'created' : 'exists'}: store ${shown(r.store)}\n  vault ${shown(r.vault)}\n  writes ${r.writesEnabled ? 'enabled' : 'disabled (read-only)'}\n`);
        return 0;
      }
      case 'publish': {
        const { values, positionals } = parse(rest, {
          partition: { type: 'string' },
          actor: { type: 'string' },
          'request-id': { type: 'string' },
          evidence: { type: 'string', multiple: true },
          attribution: { type: 'string' },
        });
        const dir = storeDir(values, env);
        if (positionals.length === 0) throw new UsageError('publish needs at least one RECORD.md');
        const actor = (values.actor as string | undefined) ?? 'operator';
        if (actor !== 'agent' && actor !== 'operator') throw new UsageError('--actor must be agent or operator');
        const evidencePaths = (values.evidence as string[] | undefined) ?? [];
        // A path holding a control character is refused before anything is read, as attach refuses it.
        for (const p of evidencePaths) refuseControlInPath(p);
        // The limits on the whole request before a byte of it is read (publish/validate.ts checks them again).
        if (positionals.length > LIMITS.records) throw new KnowledgeError('E_TOO_LARGE', `at most ${LIMITS.records} records per publication`);
        if (evidencePaths.length > LIMITS.evidenceFiles) throw new KnowledgeError('E_TOO_LARGE', `at most ${LIMITS.evidenceFiles} evidence files per publication`);
        const evidenceTotal = evidencePaths.reduce((sum, p) => sum + regularFileSize(p), 0);
        if (evidenceTotal > LIMITS.evidenceBytes) {
          throw new KnowledgeError('E_TOO_LARGE', `evidence totals ${evidenceTotal} bytes; attach files over ${LIMITS.evidenceBytes} bytes with knowledge attach`);
        }
        const records = positionals.map((p) => decodeUtf8(readInput(p, 'record'), p));
        const evidence = evidencePaths.map((p) => ({
          name: basename(p),
          bytes: readRegularFile(p, LIMITS.evidenceBytes, 'evidence given to publish (attach larger files with knowledge attach)'),
          attribution: (values.attribution as string | undefined) ?? undefined,
        }));
        // The request id is chosen here, before the store is opened, so that an interrupt at any moment can name it.
        const requestId = (values['request-id'] as string | undefined) ?? randomUUID();
        let svc: KnowledgeService | null = null;
        const receipt = await interruptible(out, (signal) => publishInterrupted(signal, requestId, svc?.requestProgress(requestId) ?? null), () =>
          withService(out, dir, true, 'knowledge publish', env, (s) =>
            (svc = s).publish({
              requestId,
              partition: (values.partition as string | undefined) ?? 'private',
              actor,
              records,
              evidence,
            }),
          ));
        emit(Boolean(values.json), receipt, renderPublication(receipt));
        return 0;
      }
      case 'attach': {
        const { values, positionals } = parse(rest, {
          partition: { type: 'string' },
          actor: { type: 'string' },
          'request-id': { type: 'string' },
          attribution: { type: 'string' },
          'media-type': { type: 'string' },
          root: { type: 'string' },
        });
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('attach takes one FILE');
        const actor = (values.actor as string | undefined) ?? 'operator';
        if (actor !== 'agent' && actor !== 'operator') throw new UsageError('--actor must be agent or operator');
        // [ATT-3] files are accepted from under the current directory unless --root names another.
        const allowedRoot = (values.root as string | undefined) ?? currentDirectory('attach accepts files from under it: give --root DIR');
        const requestId = (values['request-id'] as string | undefined) ?? randomUUID();
        let svc: KnowledgeService | null = null;
        const result = await interruptible(out, (signal) => attachInterrupted(signal, requestId, positionals[0]!, svc?.requestProgress(requestId) ?? null), () =>
          withService(out, dir, true, 'knowledge attach', env, (s) =>
          (svc = s).attachFile(positionals[0]!, {
            allowedRoot,
            partition: (values.partition as string | undefined) ?? 'private',
            actor,
            requestId,
            attribution: values.attribution as string | undefined,
            mediaType: values['media-type'] as string | undefined,
            commitBytes: positiveIntegerFromEnv(env, 'KNOWLEDGE_ATTACH_COMMIT_BYTES'),
          })));
        if (result.resumedFrom > 0 && result.sentBytes > 0) out.stderr(`resumed the upload at byte ${result.resumedFrom} of ${result.receipt.size}\n`);
        emit(Boolean(values.json), result.receipt, renderAttachment(result.receipt));
        return 0;
      }
      case 'scan': {
        const { values, positionals } = parse(rest, { partition: { type: 'string' } });
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('scan takes no positional arguments');
        const json = Boolean(values.json);
        // [SCAN-4] a progress bar on a terminal only: never with --json or when stderr is not a TTY.
        const bar = !json && process.stderr.isTTY && out.stderr === defaultOut.stderr ? (await import('../scan/progress.js')).terminalProgress((s) => process.stderr.write(s)) : null;
        // A large rescan's listing starts now, while the rest loads (src/scan/ahead.ts).
        (await import('../scan/ahead.js')).scanAhead(dir, OPERATOR, values.partition as string | undefined);
        let receipt;
        try {
          receipt = await interruptible(out, (signal) => `E_INTERRUPTED: ${signal} stopped knowledge scan; run knowledge scan again`, () =>
            withService(out, dir, true, 'knowledge scan', env, (s) =>
              s.scan({ partition: values.partition as string | undefined, caller: OPERATOR, onProgress: bar ? (p) => bar.update(p) : undefined })),
            () => bar?.done());
        } finally {
          bar?.done();
        }
        emit(json, receipt, json ? '' : (await import('./render-scan.js')).renderScan(receipt, formatGit));
        return 0;
      }
      case 'resume': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('resume takes one PUBLICATION_ID or ATTACHMENT_ID');
        if (positionals[0]!.startsWith('scan-')) {
          // A scan is not resumed: the next scan commits every waiting checkpoint first, then its own [GIT-16].
          throw new UsageError(`${positionals[0]} is a scan: run knowledge scan, which commits every waiting checkpoint first`);
        }
        const receipt = await interruptible(out, (signal) => `E_INTERRUPTED: ${signal} stopped knowledge resume ${positionals[0]!}; run it again to finish it`, () =>
          withService(out, dir, true, 'knowledge resume', env, (s) =>
            orAttachment(positionals[0]!, () => s.resume(positionals[0]!), () => s.attachComplete(positionals[0]!))));
        emit(Boolean(values.json), receipt, renderReceipt(receipt));
        return 0;
      }
      case 'receipt': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('receipt takes one PUBLICATION_ID or REQUEST_ID');
        if (positionals[0]!.startsWith('scan-')) {
          const scan = await withService(out, dir, false, 'knowledge receipt', env, (s) => s.scanReceipt(positionals[0]!));
          const { renderScan } = await import('./render-scan.js');
          emit(Boolean(values.json), scan, renderScan(scan, formatGit));
          return 0;
        }
        const receipt = await withService(out, dir, false, 'knowledge receipt', env, (s) =>
          orAttachment(positionals[0]!, () => s.publicationReceipt(positionals[0]!), () => s.attachmentReceipt(positionals[0]!)));
        emit(Boolean(values.json), receipt, renderReceipt(receipt));
        return 0;
      }
      case 'verify': {
        // Exit 1 when the store and its repository disagree; each problem has a stable code.
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('verify takes no arguments');
        const report = await withService(out, dir, false, 'knowledge verify', env, (s) => s.verify());
        emit(Boolean(values.json), report, renderVerify(report));
        if (!report.ok) out.stderr(`${verifyFailureLine(report)}\n`);
        return report.ok ? 0 : 1;
      }
      case 'activity': {
        const { values, positionals } = parse(rest, { limit: { type: 'string' }, offset: { type: 'string' }, cursor: { type: 'string' } });
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('activity takes no arguments');
        const limit = wholeOption(values.limit as string | undefined, 'limit', 1, 100_000, 500);
        const offset = wholeOption(values.offset as string | undefined, 'offset', 0, 100_000_000, 0);
        const cursor = values.cursor as string | undefined;
        // One more than shown: whether older entries exist.
        const asked = await withService(out, dir, false, 'knowledge activity', env, (s) => s.activity(limit + 1, offset, cursor));
        const entries = asked.slice(0, limit);
        const empty = cursor !== undefined ? 'nothing older than this cursor\n' : offset ? 'no entries this far back\n' : 'no activity yet\n';
        emit(Boolean(values.json), entries, entries.map((e) => `${e.createdAt}  ${e.kind.padEnd(11)} ${shown(e.id)}  ${e.actor.padEnd(8)} ${activityWhat(e)}${formatGit(e.git)}\n`).join('') || empty);
        // Older entries are a page further: said where a person reads, never inside --json output.
        if (asked.length > limit) {
          const next = `--cursor ${entries[entries.length - 1]!.cursor}`;
          out.stderr(cursor !== undefined
            ? `the next ${limit} after the cursor; older ones: ${next}\n`
            : `the newest ${offset + 1}–${offset + limit} entries; older ones: --offset ${offset + limit}, or ${next}\n`);
        }
        return 0;
      }
      // Reading [READ-1][READ-2]: the CLI reads as the operator (every partition).
      case 'history': {
        const { values, positionals } = parse(rest, { from: { type: 'string' }, to: { type: 'string' } });
        const { renderDiff, renderHistory } = await import('./render-read.js');
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('history takes one RECORD_ID');
        if ((values.from === undefined) !== (values.to === undefined)) throw new UsageError('--from and --to go together');
        const id = positionals[0]!;
        if (values.from !== undefined) {
          const diff = await withService(out, dir, false, 'knowledge history', env, (s) => s.recordDiff(OPERATOR, id, values.from as string, values.to as string));
          emit(Boolean(values.json), diff, renderDiff(diff));
          return 0;
        }
        const history = await withService(out, dir, false, 'knowledge history', env, (s) => s.recordHistory(OPERATOR, id));
        emit(Boolean(values.json), history, renderHistory(history));
        return 0;
      }
      case 'show': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('show takes one RECORD_ID');
        const { renderRecord } = await import('./render-read.js');
        const view = await withService(out, dir, false, 'knowledge show', env, (s) => s.readRecord(OPERATOR, positionals[0]!));
        emit(Boolean(values.json), view, renderRecord(view));
        return 0;
      }
      case 'lookup': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('lookup takes one ID, TITLE or ALIAS (quote it)');
        const { renderLookup } = await import('./render-read.js');
        const found = await withService(out, dir, false, 'knowledge lookup', env, (s) => s.lookup(OPERATOR, positionals[0]!));
        emit(Boolean(values.json), found, renderLookup(found));
        return 0;
      }
      case 'search':
      case 'list': {
        const { values, positionals } = parse(rest, {
          mode: { type: 'string' }, kind: { type: 'string' }, tag: { type: 'string' }, lifecycle: { type: 'string' },
          after: { type: 'string' }, before: { type: 'string' }, limit: { type: 'string' }, offset: { type: 'string' }, partition: { type: 'string' },
          type: { type: 'string' }, cursor: { type: 'string' },
        });
        const dir = storeDir(values, env);
        const { renderList, renderSearch } = await import('./render-read.js');
        const common = { kind: values.kind, tag: values.tag, lifecycle: values.lifecycle, limit: values.limit, offset: values.offset } as Record<string, unknown>;
        const offset = Number(values.offset ?? 0);
        if (command === 'search') {
          if (positionals.length === 0) throw new UsageError('search needs WORDS');
          if (values.partition !== undefined || values.type !== undefined || values.cursor !== undefined) throw new UsageError('search has no --partition, --type or --cursor');
          const { instantOption } = await import('../read/query.js');
          const q = {
            ...common, query: positionals.join(' '), mode: values.mode,
            updatedAfter: instantOption('--after', values.after), updatedBefore: instantOption('--before', values.before),
          };
          const result = await withService(out, dir, false, 'knowledge search', env, (s) => s.search(OPERATOR, q as never));
          emit(Boolean(values.json), result, renderSearch(result, offset));
          return 0;
        }
        if (positionals.length !== 0 || values.mode !== undefined || values.after !== undefined || values.before !== undefined) {
          throw new UsageError('list takes only --partition, --kind, --type, --tag, --lifecycle, --limit, --offset and --cursor');
        }
        const listed = { ...common, partition: values.partition, type: values.type, cursor: values.cursor };
        const result = await withService(out, dir, false, 'knowledge list', env, (s) => s.listRecords(OPERATOR, listed as never));
        emit(Boolean(values.json), result, renderList(result, values.cursor !== undefined ? 'cursor' : offset));
        return 0;
      }
      case 'serve': {
        // [SURF-2] the Gateway: holds the store's writer lock until SIGINT/SIGTERM/SIGHUP (closeOnSignal).
        const { values, positionals } = parse(rest, { host: { type: 'string' }, port: { type: 'string' }, token: { type: 'string' } });
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('serve takes no positional arguments');
        const { startGateway, closeOnSignal, checkBinding, DEFAULT_HOST } = await import('../gateway/server.js');
        const host = (values.host as string | undefined) ?? DEFAULT_HOST;
        const port = parsePort(values.port as string | undefined);
        const token = (values.token as string | undefined) ?? (env.KNOWLEDGE_TOKEN || undefined);
        try {
          checkBinding(host, token);
        } catch (err) {
          throw new UsageError((err as Error).message);
        }
        const gw = await startGateway({
          storeDir: dir, host, port, token, env, git: gitOptionsFromEnv(env),
          onInternalError: (e) => out.stderr(internalErrorLines(e)),
          onWarning: (w) => out.stderr(warningLine(w)),
        });
        const closed = closeOnSignal(gw);
        emit(Boolean(values.json), { url: gw.url, origin: gw.origin, store: gw.service.store.paths.root, pid: process.pid },
          `Knowledge Gateway for ${shown(gw.service.store.paths.root)}\n  open ${gw.url}\n  holds the store's writer lock until stopped (Ctrl-C)\n`);
        await closed;
        return 0;
      }
      case 'mcp': {
        // [SURF-3] agent tools over MCP stdio; stdout is the protocol channel from here on. [SURF-1] --json is accepted
        // and changes nothing: what mcp writes on stdout is always JSON (JSON-RPC), its failures one line on stderr.
        const { values, positionals } = parse(rest, {
          agent: { type: 'string' }, session: { type: 'string' }, sandboxed: { type: 'boolean' }, root: { type: 'string' },
        });
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('mcp takes no positional arguments');
        const agentId = values.agent as string | undefined;
        const session = values.session as string | undefined;
        const { isValidAgentId } = await import('../mcp/identity.js');
        if (agentId === undefined || !isValidAgentId(agentId)) throw new UsageError('--agent ID is required: 1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit');
        if (session !== undefined && !isValidAgentId(session)) throw new UsageError('--session ID must be 1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit');
        const { runMcpServer } = await import('../mcp/server.js');
        const caller = { kind: 'agent' as const, agentId, ...(session !== undefined ? { session } : {}), ...(values.sandboxed ? { sandboxed: true } : {}) };
        const lockWait = env.KNOWLEDGE_MCP_LOCK_WAIT_MS;
        // SIGINT, SIGTERM and SIGHUP end the server by that signal, as they always have; one arriving while a tool
        // call's checkpoint holds the vault's index.lock waits until the index follows the branch and the lock is
        // released (src/interrupt.ts). The call's answer is not written then: its request id gives its receipt.
        const stop = stopOnSignals((signal) => endBySignal(signal), out.stderr);
        try {
          return await runMcpServer({
            store: dir, caller, env, git: gitOptionsFromEnv(env),
            // [ATT-3] knowledge_attach_file accepts files under the directory the client starts the server in, unless --root names another.
            workspaceRoot: (values.root as string | undefined) ?? currentDirectory('knowledge_attach_file accepts files from under it: give --root DIR'),
            lockWaitMs: lockWait !== undefined && /^\d{1,7}$/.test(lockWait) ? Number(lockWait) : undefined,
          });
        } finally {
          stop();
        }
      }
      case 'demo': {
        const { runDemo } = await import('./demo.js');
        return await runDemo(rest, env, out);
      }
      case undefined:
        throw new UsageError('a command is needed');
      case 'help':
      case '--help':
      case '-h':
        out.stdout(USAGE + '\n');
        return 0;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      out.stderr(`E_USAGE: ${shownText(err.message)}\n${USAGE}\n`);
      return 2;
    }
    out.stderr(errorLine(err, env));
    return 1;
  }
}

/**
 * The one line a rejected request prints (Appendix A): its stable code first.
 * A full disk met where no step expected it is E_IO naming the cause; any
 * other unexpected error is E_INTERNAL, its stack only with KNOWLEDGE_DEBUG=1.
 */
export function errorLine(err: unknown, env: NodeJS.ProcessEnv): string {
  if (isKnowledgeError(err)) {
    // A bug wrapped to name what it left behind (a journaled publication): its own stack, on request.
    const cause = err.cause as { stack?: unknown } | undefined;
    const stack = err.code === 'E_INTERNAL' && env.KNOWLEDGE_DEBUG === '1' && typeof cause?.stack === 'string' ? `${cause.stack}\n` : '';
    return `${err.code}: ${shownText(oneLine(err.message))}\n${stack}`;
  }
  // A relative path (a store, an init DIR, KNOWLEDGE_HOME, the demo's folder) met a current directory that is gone.
  if (isCurrentDirectoryGone(err)) return `E_UNAVAILABLE: ${CWD_GONE}: give absolute paths, or run it from a directory that exists\n`;
  const e = err as { code?: unknown; message?: unknown; stack?: unknown } | null;
  const message = shownText(oneLine(String(e?.message ?? err)));
  const kept = 'knowledge activity shows what was kept: resume a kept request (knowledge resume ID) rather than making it again';
  if (isDiskFull(err)) return `E_IO: the disk is full (${String(e!.code)}: ${message}); free space, then ${kept}\n`;
  if (isIoError(err)) return `E_IO: the disk or file system failed (${String(e!.code)}: ${message}); check it, then ${kept}\n`;
  const stack = env.KNOWLEDGE_DEBUG === '1' && typeof e?.stack === 'string' ? `${e.stack}\n` : '';
  return `E_INTERNAL: ${message} (a bug: KNOWLEDGE_DEBUG=1 shows where)\n${stack}`;
}

const CWD_GONE = 'the current directory no longer exists (it was deleted or moved away)';

/** Node's answer (from process.cwd(), path.resolve of a relative path) when the current directory was deleted. */
function isCurrentDirectoryGone(err: unknown): boolean {
  const e = err as { code?: unknown; syscall?: unknown } | null;
  return e?.code === 'ENOENT' && e.syscall === 'uv_cwd';
}

/** The current directory, where a command's default needs it; E_UNAVAILABLE (saying `what` to do instead) when it is gone. */
function currentDirectory(what: string): string {
  try {
    return process.cwd();
  } catch (err) {
    if (isCurrentDirectoryGone(err)) throw new KnowledgeError('E_UNAVAILABLE', `${CWD_GONE}: ${what}`);
    throw err;
  }
}

/** Text made one line (a path may hold a newline): each line break and the space around it become one space. */
/** A whole-number option from `min` to `max`; `dflt` when absent. */
function wholeOption(v: string | undefined, name: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  if (!/^\d{1,9}$/.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`);
  return Number(v);
}

/** `--port`: 0 (any free port) to 65535; the Gateway's default when absent. */
export function parsePort(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535) throw new UsageError(`--port must be a number from 0 to 65535, got ${JSON.stringify(v)}`);
  return Number(v);
}

/**
 * Only regular files are read from paths [ATT-3]: no directories, devices or
 * FIFOs; and none larger than `maxBytes` (E_TOO_LARGE before a byte is read).
 * With `pipes`, a pipe given as a path (`/dev/stdin`, a shell's `<(…)`, a
 * FIFO) is read to its end as `-` reads standard input, up to the same limit.
 * The path is opened first and what it is, decided from the open file: a
 * file swapped for a FIFO after a stat is never waited for.
 */
export function readRegularFile(p: string, maxBytes: number, what = 'this file', pipes = false): Buffer {
  const tooLarge = (n: string) => new KnowledgeError('E_TOO_LARGE', `${p} is ${n} bytes; ${what} may be at most ${maxBytes} bytes`);
  const { fd, st } = openInput(p);
  try {
    if (!st.isFile() && !(pipes && st.isFIFO())) throw notRegular(p, st);
    if (st.isFile() && st.size > maxBytes) throw tooLarge(String(st.size));
    // Read to the end, but never past one byte over the limit: a file that grew
    // since its stat is read as it is now, or refused when it grew too large.
    let bytes: Buffer;
    try {
      bytes = readAtMost(fd, maxBytes, st.isFile() ? Math.min(st.size, maxBytes) + 1 : 64 * 1024);
    } catch (err) {
      throw inputError(err, p);
    }
    if (bytes.length > maxBytes) throw tooLarge(`more than ${maxBytes}`);
    return bytes;
  } finally {
    closeSync(fd);
  }
}

/**
 * Open a path given on the command line for reading. O_NONBLOCK: a FIFO
 * without a writer opens at once instead of waiting for one (it then reads
 * as empty); O_NOCTTY: a terminal never becomes the process's own. A relative
 * path is resolved first, so a current directory that is gone says so.
 */
function openInput(p: string): { fd: number; st: Stats } {
  const abs = resolve(p);
  let fd: number;
  try {
    fd = openSync(abs, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    // A socket (a standard input Node gives its children, as `/dev/stdin`) is not opened by its path (ENXIO): say what it is.
    let st: Stats | undefined;
    try {
      st = statSync(abs);
    } catch {
      st = undefined;
    }
    if (st?.isSocket()) throw notRegular(p, st);
    throw inputError(err, p);
  }
  try {
    return { fd, st: fstatSync(fd) };
  } catch (err) {
    closeSync(fd);
    throw inputError(err, p);
  }
}

/** A path's failure to be read, as the input's error: E_VALIDATION naming it; a full or failing disk stays itself (E_IO). */
function inputError(err: unknown, p: string): unknown {
  if (isKnowledgeError(err) || !isErrnoError(err) || isDiskFull(err) || isIoError(err)) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return new KnowledgeError('E_VALIDATION', `cannot read ${p}: no such file`);
  return new KnowledgeError('E_VALIDATION', `cannot read ${p} (${oneLine((err as Error).message)})`);
}

function notRegular(p: string, st: Stats): KnowledgeError {
  const kind = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a pipe' : st.isSocket() ? 'a socket' : st.isCharacterDevice() || st.isBlockDevice() ? 'a device' : 'not a file';
  return new KnowledgeError('E_VALIDATION', `${p} is not a regular file (${kind})`);
}

/**
 * Read `fd` to its end, but never more than `maxBytes` + 1 bytes (more than
 * the limit: the caller refuses it, having held at most that much). `first`
 * is the first read's size. A pipe whose writer set it non-blocking answers
 * EAGAIN while it is empty: waited for, not taken for an error.
 */
function readAtMost(fd: number, maxBytes: number, first: number): Buffer {
  const chunks: Buffer[] = [];
  let got = 0;
  for (let want = Math.min(first, maxBytes + 1); want > 0; want = Math.min(1 << 20, maxBytes + 1 - got)) {
    const buf = Buffer.allocUnsafe(want);
    let n: number;
    try {
      n = readSync(fd, buf, 0, want, null);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      continue;
    }
    if (n === 0) break;
    chunks.push(buf.subarray(0, n));
    got += n;
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, got);
}

/** The size of the regular file a path leads to (evidence is counted before any is read); a pipe is refused, as evidence keeps its file's name. */
function regularFileSize(p: string): number {
  let st: Stats;
  try {
    st = statSync(resolve(p));
  } catch (err) {
    throw inputError(err, p);
  }
  if (st.isFIFO()) throw new KnowledgeError('E_VALIDATION', `evidence ${p} is not a regular file (a pipe): evidence is kept as a file under its own name; save it to a file and give that`);
  if (!st.isFile()) throw notRegular(p, st);
  return st.size;
}

/** Records are UTF-8 [REC-1]: invalid bytes are refused, never replaced. */
function decodeUtf8(bytes: Buffer, name: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new KnowledgeError('E_VALIDATION', `record ${name} is not valid UTF-8`);
  }
}

/** A record: `-` is standard input; a path, a regular file or a pipe (read as standard input is). */
function readInput(p: string, what: string): Buffer {
  if (p === '-') {
    let bytes: Buffer;
    try {
      bytes = readAtMost(0, LIMITS.recordBytes, 64 * 1024);
    } catch (err) {
      throw stdinError(err, what);
    }
    if (bytes.length > LIMITS.recordBytes) throw new KnowledgeError('E_TOO_LARGE', `${what}: standard input is more than ${LIMITS.recordBytes} bytes; a ${what} may be at most ${LIMITS.recordBytes} bytes`);
    return bytes;
  }
  try {
    return readRegularFile(p, LIMITS.recordBytes, `a ${what}`, true);
  } catch (err) {
    if (err instanceof KnowledgeError) throw new KnowledgeError(err.code === 'E_TOO_LARGE' ? err.code : 'E_VALIDATION', `${what}: ${err.message}`);
    throw err;
  }
}

/** Standard input that cannot be read (`- < DIR`, a descriptor open only for writing): E_VALIDATION; a failing disk stays E_IO. */
function stdinError(err: unknown, what: string): unknown {
  if (!isErrnoError(err) || isDiskFull(err) || isIoError(err)) return err;
  const code = (err as NodeJS.ErrnoException).code;
  const why = code === 'EISDIR' ? 'it is a directory' : code === 'EBADF' ? 'it is not open for reading' : oneLine((err as Error).message);
  return new KnowledgeError('E_VALIDATION', `${what}: cannot read standard input: ${why}`);
}

/**
 * The command line. A `knowledge` process keeps V8's heap near its live size:
 * the launcher (bin/knowledge.js) starts Node with `--heap-growing-percent=20
 * --max-semi-space-size=8`. Without them V8 lets its heap grow to several
 * times the live data before collecting (a 100k-file baseline scan: peak RSS
 * ~300 MiB without, 231-259 MiB with). The launcher also sets
 * `MALLOC_ARENA_MAX=2`: glibc otherwise gives each thread (the scan's workers,
 * libuv's pool) an arena of its own, whose freed memory stays in the process
 * (the same baseline: 211-234 MiB with both). `--optimize-for-size`, used before,
 * kept the peak at ~205 MiB but cost ~2.5 s of garbage collection in that scan
 * (2,200 young-generation collections instead of ~280; BENCHMARKS.md, issue
 * 4). The flags are given at start, never set here at run time: setting
 * `--optimize-for-size` at run time (which Node calls undefined behaviour)
 * made ~1% of CLI processes deadlock at exit (nodejs/node#54918).
 */
export async function main(argv: string[]): Promise<number> {
  const stdout = watchOutput(process.stdout);
  watchOutput(process.stderr);
  // Bytes that are not UTF-8 where a name or path is given: a usage error, as every other (with the usage).
  const bad = argumentNotUtf8(argv);
  const badVariable = bad === null ? variableNotUtf8(process.env, argv) : null;
  if (bad !== null || badVariable !== null) {
    const what = bad !== null ? `argument ${bad + 1}` : `the environment variable ${badVariable}`;
    process.stderr.write(`E_USAGE: ${what} is not valid UTF-8; Knowledge takes names and paths as UTF-8 text (Node would replace the bytes with U+FFFD and name another file)\n${USAGE}\n`);
    return 2;
  }
  let answer: unknown;
  const code = await run(argv, process.env, { ...defaultOut, answered: (value) => (answer = value) });
  const lost = await stdout.failure();
  if (lost === undefined) return code;
  process.stderr.write(outputLostLine(lost, code, answer));
  return code === 0 ? EXIT_OUTPUT_LOST : code;
}

/**
 * Exit status 3: the command did its work (it would have exited 0) but its
 * answer could not be written to standard output. Not 1, which says a
 * request was rejected: a script that retries on 1 would publish twice.
 */
export const EXIT_OUTPUT_LOST = 3;

/**
 * The one line (E_IO) when standard output failed (a full disk, a closed or
 * read-only descriptor) after the command ran: its work stands, so the line
 * says what was done and how to read its receipt again, never to redo it.
 * A command that failed keeps its own error; this line only adds that its
 * output was lost too.
 */
function outputLostLine(err: NodeJS.ErrnoException, code: number, answer: unknown): string {
  const cause = String(err.message ?? err).startsWith(`${String(err.code)}:`) ? String(err.message) : `${String(err.code)}: ${String(err.message)}`;
  const what = `E_IO: the answer could not be written to standard output (${cause})`;
  return oneLine(code === 0 ? `${what}; the command itself completed: ${whatWasDone(answer)}` : what) + '\n';
}

/** What a completed command's answer says was done, and how to see it again. */
function whatWasDone(answer: unknown): string {
  const a = (answer ?? {}) as Record<string, unknown>;
  const again = (id: unknown) => `knowledge receipt ${String(id)} prints its receipt again`;
  if (a.kind === 'publication') return `publication ${String(a.publicationId)} (request ${String(a.requestId)}) stands; ${again(a.publicationId)} (publishing the files anew would make a second publication)`;
  if (a.kind === 'attachment') return `attachment ${String(a.attachmentId)} (request ${String(a.requestId)}) stands; ${again(a.attachmentId)}`;
  if (a.kind === 'scan') return `scan ${String(a.scanId)} stands${a.git ? `; ${again(a.scanId)}` : ' (it found nothing to commit)'}`;
  if (typeof a.store === 'string' && typeof a.created === 'boolean') return `store ${a.store} ${a.created ? 'was created' : 'exists'}`;
  if (typeof a.url === 'string') return `the Gateway served ${a.url} until it was stopped`;
  return 'run it again for its answer';
}

/**
 * The index of the first argument whose bytes are not UTF-8, or null. Node
 * decodes arguments with replacement characters, so a path given in another
 * encoding would silently become another path; Linux keeps the bytes in
 * /proc/self/cmdline (the last `argv.length` entries are ours). Elsewhere, or
 * when that file does not line up with `argv`, nothing is checked.
 */
function argumentNotUtf8(argv: readonly string[]): number | null {
  if (argv.length === 0 || !argv.some((a) => a.includes('\uFFFD'))) return null;
  let raw: Buffer;
  try {
    raw = readFileSync('/proc/self/cmdline');
  } catch {
    return null;
  }
  const parts: Buffer[] = [];
  for (let start = 0; start < raw.length; ) {
    const end = raw.indexOf(0, start);
    parts.push(raw.subarray(start, end < 0 ? raw.length : end));
    start = end < 0 ? raw.length : end + 1;
  }
  const ours = parts.slice(-argv.length);
  if (ours.length !== argv.length || ours.some((b, i) => b.toString('utf8') !== argv[i])) return null;
  const strict = new TextDecoder('utf-8', { fatal: true });
  const bad = ours.findIndex((b) => {
    try {
      strict.decode(b);
      return false;
    } catch {
      return true;
    }
  });
  return bad < 0 ? null : bad;
}

/**
 * The first environment variable naming a path Knowledge uses whose bytes are
 * not UTF-8, or null: KNOWLEDGE_HOME, KNOWLEDGE_STORE, KNOWLEDGE_GIT, and HOME
 * where it is the registry's default (KNOWLEDGE_HOME unset; Git never gets
 * the user's HOME). Node decodes the environment with replacement characters
 * and keeps no raw bytes, so a value holding U+FFFD is checked against the
 * bytes the process started with, /proc/self/environ on Linux: a U+FFFD given
 * as UTF-8 is an ordinary character. Where those bytes cannot be read (not
 * Linux), or the entry is not there, the value is refused: a replacement
 * character in a path is almost surely a replaced byte, and using it would
 * silently name another directory (another registry, another store).
 */
function variableNotUtf8(env: NodeJS.ProcessEnv, argv: readonly string[]): string | null {
  // KNOWLEDGE_STORE only stands in for --store: with the option given, it is not used.
  const storeGiven = argv.some((a) => a === '--store' || a.startsWith('--store='));
  const names = ['KNOWLEDGE_HOME', ...(storeGiven ? [] : ['KNOWLEDGE_STORE']), 'KNOWLEDGE_GIT', ...(env.KNOWLEDGE_HOME ? [] : ['HOME'])];
  const suspects = names.filter((n) => env[n]?.includes('\uFFFD'));
  if (suspects.length === 0) return null;
  let raw: Buffer | null;
  try {
    raw = readFileSync('/proc/self/environ');
  } catch {
    raw = null;
  }
  const strict = new TextDecoder('utf-8', { fatal: true });
  for (const name of suspects) {
    // getenv() answers with the first entry of a name: so does Node.
    const prefix = Buffer.from(`${name}=`);
    let entry: Buffer | undefined;
    for (let start = 0; raw !== null && start < raw.length; ) {
      const end = raw.indexOf(0, start) < 0 ? raw.length : raw.indexOf(0, start);
      if (raw.subarray(start, start + prefix.length).equals(prefix)) {
        entry = raw.subarray(start + prefix.length, end);
        break;
      }
      start = end + 1;
    }
    if (entry === undefined) return name;
    try {
      strict.decode(entry);
    } catch {
      return name;
    }
  }
  return null;
}

/**
 * A reader that stops reading (`knowledge list | head`, `knowledge scan
 * --json | true`) closes the pipe: what is still written gets EPIPE. Node
 * ignores SIGPIPE and reports that as an 'error' event, which unhandled ends
 * the process with a stack trace, possibly before a command's work has
 * finished (`serve` logs as it goes). Output nobody reads is dropped quietly
 * instead, as Git's does, and the command ends with its own status: its work
 * stands either way (a receipt can be read again with `knowledge receipt`).
 * Any other failure (ENOSPC: a full disk; EBADF: a descriptor closed or not
 * open for writing; EIO) is kept for `failure()`, which the command's end
 * asks once its last writes are done: main() then says so (E_IO) rather than
 * ending with Node's stack after the work was done. A failing stderr has
 * nowhere to be reported: its lines are dropped.
 */
function watchOutput(stream: NodeJS.WriteStream): { failure(): Promise<NodeJS.ErrnoException | undefined> } {
  let failed: NodeJS.ErrnoException | undefined;
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') failed ??= err;
  });
  return {
    async failure() {
      // A failed write reports it a tick later; a write still queued (an asynchronous pipe) when it is done.
      await new Promise((resolve) => setImmediate(resolve));
      if (!stream.destroyed && stream.writableLength > 0) await new Promise<void>((resolve) => stream.write('', () => resolve()));
      return failed;
    },
  };
}

/**
 * The `knowledge` CLI [SURF-1]: parse -> call the core -> render. Exit 0 when
 * the request was accepted (whatever git.state is), 1 with "CODE: message"
 * for a rejected request, 2 for a usage error (Appendix A).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { KnowledgeError, isKnowledgeError } from '../errors.js';
import { initStore } from '../store/store.js';
import { KnowledgeService } from '../service.js';
import type { GitState } from '../git/types.js';
import type { PublicationReceipt } from '../publish/types.js';

class UsageError extends Error {}

const USAGE = `usage:
  knowledge init DIR [--read-only] [--json]
  knowledge publish --store DIR [--partition ID] [--actor agent|operator] [--request-id UUID] [--evidence FILE]... RECORD.md... [--json]
  knowledge resume  --store DIR PUBLICATION_ID [--json]
  knowledge receipt --store DIR PUBLICATION_ID|REQUEST_ID [--json]
  knowledge activity --store DIR [--json]
  knowledge demo [DIR]
--store may be replaced by KNOWLEDGE_STORE.`;

type Out = { stdout: (s: string) => void; stderr: (s: string) => void };

const defaultOut: Out = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
};

type Values = Record<string, string | boolean | string[] | undefined>;

function parse(args: string[], options: ParseArgsConfig['options']): { values: Values; positionals: string[] } {
  try {
    return parseArgs({ args, options: { json: { type: 'boolean' }, store: { type: 'string' }, ...options }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function storeDir(values: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  const dir = (values.store as string | undefined) ?? env.KNOWLEDGE_STORE;
  if (!dir) throw new UsageError('--store DIR (or KNOWLEDGE_STORE) is required');
  return dir;
}

export function gitOptionsFromEnv(env: NodeJS.ProcessEnv) {
  return { gitPath: env.KNOWLEDGE_GIT || undefined, pathEnv: env.PATH, timeoutMs: env.KNOWLEDGE_GIT_TIMEOUT_MS ? Number(env.KNOWLEDGE_GIT_TIMEOUT_MS) : undefined };
}

export function openService(dir: string, write: boolean, command: string, env: NodeJS.ProcessEnv): KnowledgeService {
  return KnowledgeService.open(dir, { write, command, env, git: gitOptionsFromEnv(env) });
}

export function formatGit(git: GitState): string {
  switch (git.state) {
    case 'committed':
      return `committed ${git.commit}`;
    case 'pending':
      return `pending (${git.code}): ${git.reason}`;
    case 'unavailable':
      return `unavailable: ${git.reason}`;
  }
}

function renderPublication(r: PublicationReceipt): string {
  const lines = [`publication ${r.publicationId} (request ${r.requestId}) in ${r.partition} by ${r.actor}`];
  for (const rec of r.records) lines.push(`  record ${rec.id} r${rec.revision}  ${rec.path}`);
  for (const e of r.evidence) lines.push(`  evidence ${e.sourceId}  ${e.path}  ${e.size} bytes${e.inHistory ? '' : '  (kept out of history)'}`);
  lines.push(`  git: ${formatGit(r.git)}`);
  return lines.join('\n') + '\n';
}

async function withService<T>(dir: string, write: boolean, command: string, env: NodeJS.ProcessEnv, fn: (s: KnowledgeService) => Promise<T> | T): Promise<T> {
  const svc = openService(dir, write, command, env);
  try {
    return await fn(svc);
  } finally {
    svc.close();
  }
}

export async function run(argv: string[], env: NodeJS.ProcessEnv = process.env, out: Out = defaultOut): Promise<number> {
  const [command, ...rest] = argv;
  const emit = (json: boolean, value: unknown, human: string) => out.stdout(json ? JSON.stringify(value, null, 2) + '\n' : human);
  try {
    switch (command) {
      case 'init': {
        const { values, positionals } = parse(rest, { 'read-only': { type: 'boolean' } });
        if (positionals.length !== 1) throw new UsageError('init takes one DIR');
        const r = initStore(positionals[0]!, { readOnly: Boolean(values['read-only']), env });
        emit(Boolean(values.json), r, `${r.created ? 'created' : 'exists'}: store ${r.store}\n  vault ${r.vault}\n  writes ${r.writesEnabled ? 'enabled' : 'disabled (read-only)'}\n`);
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
        const records = positionals.map((p) => decodeUtf8(readInput(p, 'record'), p));
        const evidence = ((values.evidence as string[] | undefined) ?? []).map((p) => ({
          name: basename(p),
          bytes: readRegularFile(p),
          attribution: (values.attribution as string | undefined) ?? undefined,
        }));
        const receipt = await withService(dir, true, 'knowledge publish', env, (s) =>
          s.publish({
            requestId: values['request-id'] as string | undefined,
            partition: (values.partition as string | undefined) ?? 'private',
            actor,
            records,
            evidence,
          }),
        );
        emit(Boolean(values.json), receipt, renderPublication(receipt));
        return 0;
      }
      case 'resume': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('resume takes one PUBLICATION_ID');
        const receipt = await withService(dir, true, 'knowledge resume', env, (s) => s.resume(positionals[0]!));
        emit(Boolean(values.json), receipt, renderPublication(receipt));
        return 0;
      }
      case 'receipt': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 1) throw new UsageError('receipt takes one PUBLICATION_ID or REQUEST_ID');
        const receipt = await withService(dir, false, 'knowledge receipt', env, (s) => s.publicationReceipt(positionals[0]!));
        emit(Boolean(values.json), receipt, renderPublication(receipt));
        return 0;
      }
      case 'activity': {
        const { values, positionals } = parse(rest, {});
        const dir = storeDir(values, env);
        if (positionals.length !== 0) throw new UsageError('activity takes no arguments');
        const entries = await withService(dir, false, 'knowledge activity', env, (s) => s.activity());
        emit(Boolean(values.json), entries, entries.map((e) => `${e.createdAt}  ${e.kind.padEnd(11)} ${e.id}  ${e.actor.padEnd(8)} ${formatGit(e.git)}\n`).join('') || 'no activity yet\n');
        return 0;
      }
      case 'demo': {
        const { runDemo } = await import('./demo.js');
        return await runDemo(rest, env, out);
      }
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        out.stdout(USAGE + '\n');
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      out.stderr(`E_USAGE: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    if (isKnowledgeError(err)) {
      out.stderr(`${err.code}: ${err.message.replace(/\n/g, ' ')}\n`);
      return 1;
    }
    out.stderr(`E_INTERNAL: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}

/** Only regular files are read from paths [ATT-3]: no directories, devices or FIFOs. */
export function readRegularFile(p: string): Buffer {
  let real: string;
  try {
    real = realpathSync(p);
  } catch {
    throw new KnowledgeError('E_VALIDATION', `cannot read ${p}: no such file`);
  }
  const st = statSync(real);
  if (!st.isFile()) throw new KnowledgeError('E_VALIDATION', `${p} is not a regular file`);
  return readFileSync(real);
}

/** Records are UTF-8 [REC-1]: invalid bytes are refused, never replaced. */
function decodeUtf8(bytes: Buffer, name: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new KnowledgeError('E_VALIDATION', `record ${name} is not valid UTF-8`);
  }
}

function readInput(p: string, what: string): Buffer {
  if (p === '-') return readFileSync(0);
  try {
    return readRegularFile(p);
  } catch (err) {
    if (err instanceof KnowledgeError) throw new KnowledgeError('E_VALIDATION', `${what} ${err.message}`);
    throw err;
  }
}

export async function main(argv: string[]): Promise<number> {
  return run(argv);
}

/**
 * Which partitions a scan walks, and who may ask [SCAN-1]: an operator may
 * scan every partition; an agent `private` and its own conversation only.
 * Authority is checked before existence, so a partition the caller may not
 * scan is E_DENIED whether or not it exists.
 */
import { lstatSync, readdirSync } from 'node:fs';
import { KnowledgeError } from '../errors.js';
import type { Store } from '../store/store.js';
import { isValidSessionId, parsePartition, partitionDir, type PartitionId } from '../store/layout.js';
import { canAccessPartition, requireNotSandboxed, type Caller } from '../access.js';
import type { ScanDiagnostic } from './types.js';

export function callerLabel(caller: Caller): string {
  return caller.kind === 'operator' ? 'operator' : `agent:${caller.agentId}${caller.session ? `/${caller.session}` : ''}`;
}

/** The partitions to walk, sorted; findings about the conversations folder go to `diags`. */
export function resolvePartitions(store: Pick<Store, 'paths' | 'db'>, caller: Caller, requested: string | undefined, diags: ScanDiagnostic[]): PartitionId[] {
  requireNotSandboxed(caller);
  if (requested !== undefined) {
    const p = parsePartition(requested);
    if (!canAccessPartition(caller, p)) throw new KnowledgeError('E_DENIED', `partition ${p} may not be scanned by this caller`);
    if (p !== 'private' && !partitionExists(store, p)) throw new KnowledgeError('E_NOT_FOUND', `no partition ${p} in this vault`);
    return [p];
  }
  const out = new Set<PartitionId>(['private']);
  if (caller.kind === 'agent') {
    if (caller.session && partitionExists(store, `conversation:${caller.session}`)) out.add(`conversation:${caller.session}`);
    return [...out].sort();
  }
  const convDir = `${store.paths.vault}/conversations`;
  let names: string[] = [];
  try {
    const st = lstatSync(convDir, { throwIfNoEntry: false });
    if (st?.isDirectory()) names = readdirSync(convDir);
    else if (st?.isSymbolicLink()) diags.push({ path: 'conversations', code: 'symlink', reason: 'the conversations folder is a symbolic link; it is not followed' });
  } catch (err) {
    diags.push({ path: 'conversations', code: 'unreadable', reason: `cannot list the conversations folder (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` });
  }
  for (const n of names) {
    if (isValidSessionId(n)) out.add(`conversation:${n}`);
    else if (!n.startsWith('.')) diags.push({ path: `conversations/${n}`, code: 'not-a-partition', reason: 'not a session id (1-64 of A-Z a-z 0-9 _ -, starting with a letter or digit); not scanned' });
  }
  // A partition whose folder is gone still has recorded files: their deletions are observed.
  // (Every folder holding recorded files has a row in scan_folders: a few rows, not one per file.)
  const recorded = store.db.prepare(
    "SELECT DISTINCT partition FROM scan_folders WHERE partition <> '' UNION SELECT partition FROM scan_partitions",
  ).pluck().all() as string[];
  for (const p of recorded) if (p === 'private' || p.startsWith('conversation:')) out.add(p as PartitionId);
  return [...out].sort();
}

function partitionExists(store: Pick<Store, 'paths' | 'db'>, p: PartitionId): boolean {
  if (lstatSync(`${store.paths.vault}/${partitionDir(p)}`, { throwIfNoEntry: false })) return true;
  const db = store.db;
  return db.prepare('SELECT 1 FROM vault_files WHERE partition = ? LIMIT 1').get(p) !== undefined ||
    db.prepare('SELECT 1 FROM scan_partitions WHERE partition = ?').get(p) !== undefined;
}

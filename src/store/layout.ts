/** Store layout [LAY-1] and partition ids (SPEC section 1). */
import { join } from 'node:path';
import { KnowledgeError } from '../errors.js';

export const VAULT_FORMAT = 'knowledge-vault-v1';

export interface StorePaths {
  root: string;
  vault: string;
  manifest: string;
  database: string;
  /** Held (an OS file lock) by the store's writer while it lives [LAY-4]: lock.ts. Holds nothing else. */
  writerLock: string;
  history: string; // recovery files: staging of installs, partial attachments
  staging: string;
}

/** Knowledge's own folder in a vault (vault-relative, never committed [GIT-13]). */
export const HISTORY_DIR = '.knowledge-history';

export interface HistoryPaths {
  history: string;
  /** Where installs and other replaced files are staged; a store's open clears leftovers. */
  staging: string;
  /** The index-has-no-conflicts hint for later processes (git/index-state.ts). */
  indexClean: string;
}

/** Knowledge's own files in a vault, for code that knows the vault but not the store root (the git layer). */
export function historyPaths(vault: string): HistoryPaths {
  const history = join(vault, HISTORY_DIR);
  return { history, staging: join(history, 'staging'), indexClean: join(history, 'index-clean') };
}

export function storePaths(root: string): StorePaths {
  const vault = join(root, 'vault');
  const { history, staging } = historyPaths(vault);
  return {
    root,
    vault,
    manifest: join(vault, 'vault.json'),
    database: join(root, 'state.sqlite'),
    writerLock: join(root, 'writer.lock'),
    history,
    staging,
  };
}

export type PartitionId = 'private' | `conversation:${string}`;

const SESSION_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export function isValidSessionId(s: string): boolean {
  return SESSION_RE.test(s);
}

/** Parse a partition id at the boundary; throws E_VALIDATION with the reason. */
export function parsePartition(id: string): PartitionId {
  if (id === 'private') return 'private';
  if (id.startsWith('conversation:')) {
    const sid = id.slice('conversation:'.length);
    if (!isValidSessionId(sid)) {
      throw new KnowledgeError(
        'E_VALIDATION',
        `invalid session id ${JSON.stringify(sid)}: 1-64 characters of A-Z a-z 0-9 _ - starting with a letter or digit`,
      );
    }
    return `conversation:${sid}`;
  }
  throw new KnowledgeError('E_VALIDATION', `unknown partition ${JSON.stringify(id)}: use "private" or "conversation:<sessionId>"`);
}

/** Vault-relative directory of a partition ('/' separators). */
export function partitionDir(p: PartitionId): string {
  return p === 'private' ? 'private' : `conversations/${p.slice('conversation:'.length)}`;
}

/** Which partition a vault-relative path belongs to, or null (outside every partition). */
export function partitionOfPath(rel: string): PartitionId | null {
  if (rel.startsWith('private/')) return 'private';
  const m = /^conversations\/([^/]+)\//.exec(rel);
  if (m && isValidSessionId(m[1]!)) return `conversation:${m[1]!}`;
  return null;
}

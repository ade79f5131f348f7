/**
 * Who is calling, and which partitions that caller may touch [SURF-3].
 * Every surface builds a `Caller` at its boundary (the CLI is the operator;
 * an MCP server is one agent, optionally in one conversation session) and
 * the core service checks it; transports never filter on their own.
 */
import { KnowledgeError } from './errors.js';
import type { PartitionId } from './store/layout.js';

export type Caller =
  | { kind: 'operator' }
  | { kind: 'agent'; agentId: string; session?: string; sandboxed?: boolean };

export const OPERATOR: Caller = { kind: 'operator' };

/**
 * Partitions the caller may read: the operator reads everything; an agent
 * reads `private` and its own conversation; a sandboxed agent reads nothing
 * (and is denied outright by {@link requireNotSandboxed}).
 */
export function readablePartitions(caller: Caller): 'all' | PartitionId[] {
  if (caller.kind === 'operator') return 'all';
  if (caller.sandboxed) return [];
  const out: PartitionId[] = ['private'];
  if (caller.session) out.push(`conversation:${caller.session}`);
  return out;
}

export function canAccessPartition(caller: Caller, partition: string): boolean {
  const readable = readablePartitions(caller);
  return readable === 'all' || (readable as string[]).includes(partition);
}

/** Sandboxed callers are denied every operation [SURF-3]. */
export function requireNotSandboxed(caller: Caller): void {
  if (caller.kind === 'agent' && caller.sandboxed) {
    throw new KnowledgeError('E_DENIED', `agent ${caller.agentId} runs sandboxed and may not use this store`);
  }
}

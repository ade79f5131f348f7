/**
 * Who the MCP server acts for [SURF-3]. The operator launches `knowledge mcp`
 * for one agent (optionally in one conversation session); tools take no
 * store, agent, path or scope argument, so everything here comes from the
 * command line and the registry, never from a tool call.
 *
 * Foreign callers: the registry [LAY-2] records which store each agent uses.
 * The first launch binds the agent to the store it was launched on; a later
 * launch of the same agent on another store is denied (E_DENIED) until the
 * operator edits `agents` in registry.json.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { isValidSessionId, type PartitionId } from '../store/layout.js';
import { Registry, type RegistryFile } from '../store/registry.js';
import type { Caller } from '../access.js';

export type AgentCaller = Extract<Caller, { kind: 'agent' }>;

/** Agent ids follow the session id rule: 1-64 of A-Z a-z 0-9 _ -, starting with a letter or digit. */
export function isValidAgentId(id: string): boolean {
  return isValidSessionId(id);
}

/** Where the agent stands in the registry with respect to `storeRoot` (pure). */
export type AgentBinding =
  | { kind: 'bound' }
  | { kind: 'unbound' }
  | { kind: 'foreign'; store: string };

export function agentBinding(reg: RegistryFile, agentId: string, storeRoot: string): AgentBinding {
  const entry = Object.prototype.hasOwnProperty.call(reg.agents, agentId) ? reg.agents[agentId] : undefined;
  if (!entry) return { kind: 'unbound' };
  return samePlace(entry.store, storeRoot) ? { kind: 'bound' } : { kind: 'foreign', store: entry.store };
}

/** The same store: the same path, or paths that resolve to the same folder (a symbolic link to it). */
function samePlace(a: string, b: string): boolean {
  if (resolve(a) === resolve(b)) return true;
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false; // one of them does not exist: not the same store
  }
}

/** The registry after binding `agentId` to `storeRoot` (pure; the input is not mutated). */
export function withAgentBound(reg: RegistryFile, agentId: string, storeRoot: string): RegistryFile {
  return { ...reg, agents: { ...reg.agents, [agentId]: { store: resolve(storeRoot) } } };
}

function foreignError(agentId: string, store: string): KnowledgeError {
  return new KnowledgeError(
    'E_DENIED',
    `agent ${agentId} is registered to another store (${store}); it may not use this one (edit "agents" in the registry to move it)`,
  );
}

/**
 * On launch: bind an unbound agent to this store (written durably), and tell
 * what the binding is. A sandboxed agent is never registered: it may not use
 * any store.
 */
export function bindAgentOnLaunch(registry: Registry, caller: AgentCaller, storeRoot: string): AgentBinding {
  const binding = agentBinding(registry.read(), caller.agentId, storeRoot);
  if (binding.kind !== 'unbound' || caller.sandboxed) return binding;
  // Bound under the registry's lock, looked at again there: another launch may have bound it (or changed the file) meanwhile.
  let result: AgentBinding = { kind: 'bound' };
  registry.update((reg) => {
    const now = agentBinding(reg, caller.agentId, storeRoot);
    if (now.kind !== 'unbound') {
      result = now;
      return null;
    }
    return withAgentBound(reg, caller.agentId, storeRoot);
  });
  return result;
}

/**
 * Every tool call: sandboxed callers and agents registered to another store
 * are denied [SURF-3]. Read on each call, so moving an agent in the registry
 * takes effect without restarting the server.
 */
export function requireAgentAllowed(registry: Registry, caller: AgentCaller, storeRoot: string): void {
  if (caller.sandboxed) {
    throw new KnowledgeError('E_DENIED', `agent ${caller.agentId} runs sandboxed and may not use this store`);
  }
  const binding = agentBinding(registry.read(), caller.agentId, storeRoot);
  if (binding.kind === 'foreign') throw foreignError(caller.agentId, binding.store);
}

/**
 * Who a write is for: the owner's private partition, or this conversation.
 * Default: the conversation when the server runs with a session, else private.
 */
export type Audience = 'owner-private' | 'conversation';

export function writePartition(caller: AgentCaller, audience: Audience | undefined): PartitionId {
  const chosen = audience ?? (caller.session ? 'conversation' : 'owner-private');
  if (chosen === 'owner-private') return 'private';
  if (!caller.session) {
    throw new KnowledgeError('E_VALIDATION', 'audience "conversation" needs a session: this server was started without --session, so only "owner-private" is available');
  }
  return `conversation:${caller.session}`;
}

/** The partition a listing is narrowed to, or undefined for every partition the caller may read. */
export function readPartition(caller: AgentCaller, audience: Audience | undefined): PartitionId | undefined {
  return audience === undefined ? undefined : writePartition(caller, audience);
}

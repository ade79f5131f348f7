import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isKnowledgeError } from '../errors.js';
import type { RegistryFile } from '../store/registry.js';
import { agentBinding, isValidAgentId, readPartition, withAgentBound, writePartition, type AgentCaller } from './identity.js';
import { argumentsError } from './results.js';
import { grepInput, lookupInput, publishBatchInput } from './schemas.js';

const reg = (agents: RegistryFile['agents']): RegistryFile => ({ format: 'knowledge-registry-v1', stores: {}, agents });

describe('[SURF-3] which store an agent may use (registry agents map)', () => {
  it('is unbound until the first launch binds it, bound to that store, foreign on any other', () => {
    expect(agentBinding(reg({}), 'a1', '/s/one')).toEqual({ kind: 'unbound' });
    const bound = withAgentBound(reg({}), 'a1', '/s/one');
    expect(agentBinding(bound, 'a1', '/s/one/')).toEqual({ kind: 'bound' });
    expect(agentBinding(bound, 'a1', '/s/two')).toEqual({ kind: 'foreign', store: '/s/one' });
    expect(agentBinding(bound, 'a2', '/s/two')).toEqual({ kind: 'unbound' });
  });

  it('is bound through a symbolic link to its store, and the other way round', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kn-bind-'));
    try {
      mkdirSync(join(dir, 'st'));
      symlinkSync(join(dir, 'st'), join(dir, 'link'));
      expect(agentBinding(withAgentBound(reg({}), 'a1', join(dir, 'st')), 'a1', join(dir, 'link'))).toEqual({ kind: 'bound' });
      expect(agentBinding(withAgentBound(reg({}), 'a1', join(dir, 'link')), 'a1', join(dir, 'st'))).toEqual({ kind: 'bound' });
      expect(agentBinding(withAgentBound(reg({}), 'a1', join(dir, 'st')), 'a1', join(dir, 'gone'))).toMatchObject({ kind: 'foreign' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('does not take inherited object keys for agents', () => {
    expect(agentBinding(reg({}), 'constructor', '/s')).toEqual({ kind: 'unbound' });
  });

  it('validates agent ids like session ids', () => {
    expect(isValidAgentId('claude-code_1')).toBe(true);
    for (const bad of ['', '-x', 'a/b', 'a b', 'x'.repeat(65)]) expect(isValidAgentId(bad), bad).toBe(false);
  });
});

describe('audience -> partition', () => {
  const withSession: AgentCaller = { kind: 'agent', agentId: 'a', session: 's1' };
  const without: AgentCaller = { kind: 'agent', agentId: 'a' };
  it('defaults to the conversation with a session and to private without one', () => {
    expect(writePartition(withSession, undefined)).toBe('conversation:s1');
    expect(writePartition(withSession, 'owner-private')).toBe('private');
    expect(writePartition(without, undefined)).toBe('private');
  });
  it('has no conversation without a session (E_VALIDATION)', () => {
    let code: string | undefined;
    try {
      writePartition(without, 'conversation');
    } catch (err) {
      code = isKnowledgeError(err) ? err.code : undefined;
    }
    expect(code).toBe('E_VALIDATION');
  });
  it('lists every readable partition when no audience is given', () => {
    expect(readPartition(withSession, undefined)).toBeUndefined();
    expect(readPartition(withSession, 'conversation')).toBe('conversation:s1');
  });
});

describe('schema violations carry stable codes', () => {
  it('an over-long string or list is E_TOO_LARGE; an out-of-range number or unknown key is E_VALIDATION', () => {
    const long = grepInput.safeParse({ query: 'x'.repeat(501) });
    expect(!long.success && argumentsError('knowledge_grep', long.error).code).toBe('E_TOO_LARGE');
    // Characters are code points (zod 4 counts them so), as the core and JSON Schema's maxLength count them.
    expect(grepInput.safeParse({ query: '😀'.repeat(500) }).success).toBe(true);
    const emoji = grepInput.safeParse({ query: '😀'.repeat(501) });
    expect(!emoji.success && argumentsError('knowledge_grep', emoji.error).code).toBe('E_TOO_LARGE');
    expect(lookupInput.safeParse({ key: '😀'.repeat(500) }).success).toBe(true);
    expect(publishBatchInput.safeParse({ records: [{ kind: 'page', title: '😀'.repeat(300) }] }).success).toBe(true);
    const many = publishBatchInput.safeParse({ records: Array.from({ length: 201 }, () => ({ markdown: 'x' })) });
    expect(!many.success && argumentsError('knowledge_publish_batch', many.error).code).toBe('E_TOO_LARGE');
    const limit = grepInput.safeParse({ query: 'x', limit: 51 });
    expect(!limit.success && argumentsError('knowledge_grep', limit.error).code).toBe('E_VALIDATION');
    const scoped = grepInput.safeParse({ query: 'x', store: '/elsewhere' });
    expect(!scoped.success && argumentsError('knowledge_grep', scoped.error).code).toBe('E_VALIDATION');
  });

  it('a bad record names the field of the closest alternative (fields or Markdown), not a bare "Invalid input"', () => {
    const missing = publishBatchInput.safeParse({ records: [{ kind: 'page' }] });
    expect(!missing.success && argumentsError('knowledge_publish_batch', missing.error).message).toContain('records.0.title:');
    const long = publishBatchInput.safeParse({ records: [{ kind: 'page', title: 'x'.repeat(301) }] });
    const e = !long.success && argumentsError('knowledge_publish_batch', long.error);
    expect(e && [e.code, e.message.includes('records.0.title:')]).toEqual(['E_TOO_LARGE', true]);
  });
});

/**
 * `npm start`: an embedded demo store under ./.knowledge-demo, created and
 * seeded on first run, so a new user sees records, evidence and history.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { initStore } from '../store/store.js';
import { KnowledgeService } from '../service.js';
import { gitOptionsFromEnv } from './main.js';

export const DEMO_REQUESTS = {
  evidence: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b001',
  claim: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b002',
};

export async function seedDemo(svc: KnowledgeService): Promise<void> {
  const notes = Buffer.from(
    'Meeting notes, 2026-11-30\n- The team chose SQLite (WAL, synchronous=FULL) for the journal.\n- Git history is local only: no remotes.\n',
    'utf8',
  );
  await svc.publish({
    requestId: DEMO_REQUESTS.evidence,
    partition: 'private',
    actor: 'operator',
    records: [
      '---\nkind: page\ntitle: Welcome to Knowledge\ntags: [demo]\naliases: [Start here]\n---\n# Welcome\n\nEvery record is a Markdown file with YAML frontmatter. Every publication becomes one Git commit.\n',
    ],
    evidence: [],
  });
  await svc.publish({
    requestId: DEMO_REQUESTS.claim,
    partition: 'private',
    actor: 'agent',
    records: ['---\nkind: claim\nclaim_kind: decision\ntitle: The journal uses SQLite with synchronous=FULL\ntags: [demo, storage]\n---\nDecided in the 2026-11-30 meeting.\n'],
    evidence: [{ name: 'meeting-notes.txt', bytes: notes, attribution: 'demo meeting notes' }],
  });
}

export async function runDemo(args: string[], env: NodeJS.ProcessEnv, out: { stdout: (s: string) => void }): Promise<number> {
  const dir = resolve(args[0] ?? '.knowledge-demo');
  const fresh = !existsSync(dir);
  initStore(dir, { env });
  const svc = KnowledgeService.open(dir, { write: true, command: 'knowledge demo', env, git: gitOptionsFromEnv(env) });
  try {
    if (fresh) await seedDemo(svc);
    out.stdout(`Knowledge demo store: ${dir}\n  vault: ${svc.store.paths.vault}\n  history: git -C ${svc.store.paths.vault} log --stat\n\nActivity:\n`);
    for (const e of svc.activity()) out.stdout(`  ${e.createdAt}  ${e.kind} ${e.id}  ${e.actor}  git ${e.git.state}${e.git.state === 'committed' ? ' ' + e.git.commit.slice(0, 12) : ''}\n`);
  } finally {
    svc.close();
  }
  return 0;
}

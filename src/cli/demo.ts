/**
 * `npm start`: the Gateway on an embedded demo store under ./.knowledge-demo,
 * created and seeded on first run, so a new user sees records, evidence,
 * revision history and — on purpose — one pending checkpoint to retry.
 *
 * The pending checkpoint is staged the only way Knowledge can be told to
 * wait: a stale `index.lock` in the demo vault's own repository. Product
 * code never creates or removes locks in a user's repository [GIT-19]; this
 * demo store belongs to Knowledge, and both the page and the terminal say
 * which file to delete before pressing Retry.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { initStore } from '../store/store.js';
import { KnowledgeService } from '../service.js';
import { UsageError, gitOptionsFromEnv, parsePort } from './main.js';
import { internalErrorLines, shown, warningLine } from './shown.js';

export const DEMO_REQUESTS = {
  evidence: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b001',
  claim: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b002',
  glossary1: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b003',
  glossary2: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b004',
  glossary3: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b005',
  relationship: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b006',
  conversation: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b007',
  pending: '3b1f3c2e-8d4a-4c57-9a53-0c7de0a1b008',
};

/** The file the demo leaves so one checkpoint waits (see the header comment). */
export const DEMO_LOCK_TEXT = 'Knowledge demo: this stale lock keeps one checkpoint pending. Delete this file, then press Retry in Activity & issues.\n';

const WELCOME = `---
kind: page
id: demo-welcome
title: Welcome to Knowledge
tags: [demo, guide]
aliases: [Start here]
dependencies: [demo-glossary]
---
# Welcome

Every record is a **Markdown file** with YAML frontmatter, and every publication
becomes *one Git commit* in the vault's own history.

## Things to try

1. Open [[demo-glossary]] and look at its **History**: pick two versions and compare them.
2. Open [[demo-claim-sqlite]] to see a claim with its evidence.
3. Go to **Activity & issues**: one checkpoint is pending. Fix it and press *Retry*.

> Local Git is content history, not a backup.

Markdown is rendered safely: this is text, not a tag: <script>alert("no")</script>

\`\`\`sh
git -C .knowledge-demo/vault log --stat
\`\`\`
`;

const glossary = (revision: number | null, body: string) => `---
kind: page
id: demo-glossary
${revision === null ? '' : `revision: ${revision}\n`}title: Project glossary
tags: [demo, reference]
---
${body}`;

const GLOSSARY_V1 = `# Glossary

- **store**: a directory holding a vault and its state.sqlite.
- **vault**: the Markdown and evidence files.
`;
const GLOSSARY_V2 = `${GLOSSARY_V1}- **checkpoint**: the Git commit made from one publication.
`;
const GLOSSARY_V3 = `# Glossary

- **store**: a directory holding a vault and its \`state.sqlite\`.
- **vault**: the Markdown, YAML and retained evidence files. Markdown is authoritative.
- **checkpoint**: the Git commit made from one publication.
- **receipt**: what a publication returns: ids, paths, hashes and the Git state.
`;

export async function seedDemo(svc: KnowledgeService): Promise<{ pendingPublicationId: string }> {
  const notes = Buffer.from(
    'Meeting notes, 2026-11-30\n- The team chose SQLite (WAL, synchronous=FULL) for the journal.\n- Git history is local only: no remotes.\n',
    'utf8',
  );
  await svc.publish({ requestId: DEMO_REQUESTS.evidence, partition: 'private', actor: 'operator', records: [WELCOME], evidence: [] });
  await svc.publish({
    requestId: DEMO_REQUESTS.claim,
    partition: 'private',
    actor: 'agent',
    records: ['---\nkind: claim\nid: demo-claim-sqlite\nclaim_kind: decision\ntitle: The journal uses SQLite with synchronous=FULL\ntags: [demo, storage]\n---\nDecided in the 2026-11-30 meeting. See [[demo-glossary]] for the words.\n'],
    evidence: [{ name: 'meeting-notes.txt', bytes: notes, attribution: 'demo meeting notes' }],
  });
  // One page revised twice: three versions in its history to compare.
  await svc.publish({ requestId: DEMO_REQUESTS.glossary1, partition: 'private', actor: 'operator', records: [glossary(null, GLOSSARY_V1)], evidence: [] });
  await svc.publish({ requestId: DEMO_REQUESTS.glossary2, partition: 'private', actor: 'agent', records: [glossary(1, GLOSSARY_V2)], evidence: [] });
  await svc.publish({ requestId: DEMO_REQUESTS.glossary3, partition: 'private', actor: 'operator', records: [glossary(2, GLOSSARY_V3)], evidence: [] });
  await svc.publish({
    requestId: DEMO_REQUESTS.relationship,
    partition: 'private',
    actor: 'agent',
    records: ['---\nkind: relationship\nid: demo-rel-defines\nrelationship_type: explains\nfrom: demo-glossary\nto: demo-claim-sqlite\ntitle: The glossary explains the storage decision\ntags: [demo]\n---\n'],
    evidence: [{ name: 'meeting-notes.txt', bytes: notes, attribution: 'demo meeting notes' }],
  });
  await svc.publish({
    requestId: DEMO_REQUESTS.conversation,
    partition: 'conversation:demo-chat',
    actor: 'agent',
    records: ['---\nkind: page\nid: demo-chat-summary\ntitle: Summary of the demo chat\ntags: [demo, conversation]\n---\nThe user asked how history works; the agent pointed at [[demo-welcome]].\n'],
    evidence: [],
  });
  // The staged problem: a stale lock in the demo's own repository (see above),
  // once Knowledge has released its own after the last checkpoint.
  await svc.settle();
  writeFileSync(join(svc.store.paths.vault, '.git', 'index.lock'), DEMO_LOCK_TEXT);
  const pending = await svc.publish({
    requestId: DEMO_REQUESTS.pending,
    partition: 'private',
    actor: 'agent',
    records: ['---\nkind: page\nid: demo-pending\ntitle: A record whose checkpoint waits\ntags: [demo]\n---\nThis record is safely in the vault and the journal. Its Git checkpoint waits until the lock is gone and someone presses Retry.\n'],
    evidence: [],
  });
  return { pendingPublicationId: pending.publicationId };
}

/** The demo's banner: what to do while the staged lock is there, where the store is afterwards. */
export function demoNotice(vault: string): () => string {
  const lock = join(vault, '.git', 'index.lock');
  // Only the demo's own stale lock: Knowledge holds the lock itself for a moment after each checkpoint.
  const staged = () => {
    try {
      return readFileSync(lock, 'utf8') === DEMO_LOCK_TEXT;
    } catch {
      return false;
    }
  };
  return () => staged()
    ? `Demo store. One checkpoint is pending on purpose: the demo left a stale Git lock. Delete it (rm ${lock}), then press Retry in Activity & issues.`
    : `Demo store in ${resolve(vault, '..')}. Delete that folder to start over.`;
}

export async function runDemo(args: string[], env: NodeJS.ProcessEnv, out: { stdout: (s: string) => void; stderr: (s: string) => void }): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { port: { type: 'string' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new UsageError('demo takes at most one DIR');
  const dir = resolve(positionals[0] ?? '.knowledge-demo');
  const port = parsePort(values.port);
  const fresh = !existsSync(dir);
  initStore(dir, { env });
  if (fresh) {
    const svc = KnowledgeService.open(dir, { write: true, command: 'knowledge demo (seeding)', env, git: gitOptionsFromEnv(env) });
    try {
      await seedDemo(svc);
      await svc.settle();
    } finally {
      svc.close();
    }
  }
  const { startGateway, closeOnSignal, DEFAULT_PORT } = await import('../gateway/server.js');
  const vault = join(dir, 'vault');
  const start = (p: number) => startGateway({ storeDir: dir, port: p, env, git: gitOptionsFromEnv(env), notice: demoNotice(vault), onInternalError: (e) => out.stderr(internalErrorLines(e)), onWarning: (w) => out.stderr(warningLine(w)) });
  let gw;
  try {
    gw = await start(port ?? DEFAULT_PORT);
  } catch (err) {
    // The default port is taken (another program): any free port will do for a demo.
    if (port !== undefined || (err as { details?: { code?: string } }).details?.code !== 'EADDRINUSE') throw err;
    gw = await start(0);
  }
  const lock = join(vault, '.git', 'index.lock');
  const closed = closeOnSignal(gw);
  out.stdout([
    `Knowledge demo store: ${shown(dir)}${fresh ? ' (created and seeded)' : ''}`,
    '',
    `  Open ${gw.url}`,
    '',
    existsSync(lock)
      ? `  One checkpoint is pending on purpose (a stale lock the demo left). To fix it:\n    rm ${shown(lock)}\n  then press Retry in "Activity & issues".`
      : `  History: git -C ${shown(vault)} log --stat`,
    '  Stop with Ctrl-C.',
    '',
  ].join('\n'));
  await closed;
  return 0;
}

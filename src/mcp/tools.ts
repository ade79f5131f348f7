/**
 * The agent tools [SURF-3], one definition each: name (fixed), description
 * an agent can follow, strict input schema, and a handler that calls the core
 * service in-process (STYLE habit 3: parse -> call -> render, nothing else).
 *
 * No tool takes a store, agent, path-into-the-vault or partition argument:
 * the server's caller decides them. Writes choose only an `audience`, which
 * maps to the owner's private partition or this session's conversation.
 */
import { resolve } from 'node:path';
import type { z } from 'zod';
import { KnowledgeError } from '../errors.js';
import { instantOption } from '../read/query.js';
import type { KnowledgeService } from '../service.js';
import { readPartition, writePartition, type AgentCaller } from './identity.js';
import { decodeBase64, evidenceFromItems, recordTexts, rememberParts } from './records-input.js';
import {
  MCP_LIMITS, attachFileInput, attachInput, grepInput, historyInput, lookupInput, publishBatchInput, readInput, recordsInput, rememberInput, resumeInput,
} from './schemas.js';

/** What a handler may use: who calls, and the store opened for this one call. */
export interface ToolContext {
  caller: AgentCaller;
  /** Root under which knowledge_attach_file accepts files [ATT-3]. */
  workspaceRoot: string;
  /**
   * Run `fn` with the store open: `write` takes the single-writer lock for
   * this call only [LAY-4]; `read` takes no lock.
   */
  withService<T>(mode: 'read' | 'write', fn: (svc: KnowledgeService) => Promise<T> | T): Promise<T>;
}

export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: S;
  annotations: ToolAnnotations;
  run(ctx: ToolContext, args: z.infer<S>): Promise<object>;
}

const READ: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
const WRITE: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false };

function define<S extends z.ZodObject>(d: ToolDefinition<S>): ToolDefinition {
  return d as unknown as ToolDefinition;
}

const RECEIPT_NOTE =
  'Returns the receipt (the same object as `knowledge publish --json`): ids, paths, sha256 and git.state. git.state "pending" or "unavailable" is still a success — the write is durable and the history catches up; call knowledge_resume with the publicationId after the repository is fixed.';

export const TOOLS: readonly ToolDefinition[] = [
  define({
    name: 'knowledge_publish_batch',
    title: 'Publish records with evidence',
    description: [
      'Publish one or more records (pages, claims, relationships) and the evidence they cite, as one publication: all are written or none.',
      'Claims and relationships must cite evidence: send originals in "evidence" and cite them by name ({file}), or cite sources already in the store ({source}); with no citations a claim cites every evidence item of the call.',
      'To revise a record, send its id and the revision you last read; a stale revision is E_CONFLICT and writes nothing.',
      'Send a request_id (UUID) so a retry returns the same receipt instead of writing twice.',
      RECEIPT_NOTE,
    ].join(' '),
    input: publishBatchInput,
    annotations: WRITE,
    async run(ctx, args) {
      const partition = writePartition(ctx.caller, args.audience);
      const { evidence, sourceByName } = evidenceFromItems(args.evidence ?? []);
      const records = recordTexts(args.records, sourceByName);
      return ctx.withService('write', (svc) => svc.publishAs(ctx.caller, { requestId: args.request_id, partition, records, evidence }));
    },
  }),
  define({
    name: 'knowledge_remember',
    title: 'Remember a claim',
    description: [
      'Remember one claim together with the text it rests on — the simple way to store a fact, preference, decision, commitment or event.',
      'The source text is kept as an evidence original and the claim cites it (with your exact quote, if given).',
      'Look the claim up later by its title with knowledge_lookup, or search with knowledge_grep.',
      RECEIPT_NOTE,
    ].join(' '),
    input: rememberInput,
    annotations: WRITE,
    async run(ctx, args) {
      const partition = writePartition(ctx.caller, args.audience);
      const { records, evidence } = rememberParts(args);
      return ctx.withService('write', (svc) => svc.publishAs(ctx.caller, { requestId: args.request_id, partition, records, evidence }));
    },
  }),
  define({
    name: 'knowledge_attach',
    title: 'Upload an original in chunks',
    description: [
      'Upload an evidence original of any size in chunks of at most 4 MiB (base64).',
      'Every call repeats the declaration (request_id, filename, size, sha256 of the whole file); send the chunk at "offset" = the "received" of the previous answer, starting at 0.',
      'A retried chunk is not stored twice; the same request_id with another declaration is E_CONFLICT.',
      'While bytes are missing the answer is {kind: "upload", received, size, …}; with the last chunk the bytes are verified and the answer is the attachment receipt {kind: "attachment", sourceId, …}. Cite it in records as {source: sourceId}.',
    ].join(' '),
    input: attachInput,
    annotations: WRITE,
    async run(ctx, args) {
      const partition = writePartition(ctx.caller, args.audience);
      if (args.data_base64 !== undefined && args.offset === undefined) {
        throw new KnowledgeError('E_VALIDATION', 'offset is required with data_base64: send the "received" value of the previous answer (0 for the first chunk)');
      }
      const bytes = args.data_base64 !== undefined ? decodeBase64(args.data_base64, 'data_base64') : null;
      return ctx.withService('write', async (svc) => {
        let status = svc.attachStart({
          requestId: args.request_id, partition, actor: 'agent', filename: args.filename, size: args.size, sha256: args.sha256,
          mediaType: args.media_type, attribution: args.attribution,
        });
        if (bytes !== null && bytes.length > 0 && status.state === 'receiving') status = svc.attachChunk(status.attachmentId, args.offset!, bytes);
        if (status.state === 'completed' || status.received === status.size) return svc.attachComplete(status.attachmentId);
        // The chunk limit of this surface (base64 in JSON) is below the core's.
        return { kind: 'upload', ...status, chunkLimit: Math.min(status.chunkLimit, MCP_LIMITS.chunkBytes) };
      });
    },
  }),
  define({
    name: 'knowledge_attach_file',
    title: 'Attach a file from the workspace',
    description: [
      'Attach a regular file from the workspace as an evidence original (read by the server in chunks; any size).',
      'Only regular files inside the workspace root are accepted: symlinks, devices and paths outside it are refused.',
      'Returns the attachment receipt (the same object as `knowledge attach --json`); cite it in records as {source: sourceId}. Retry with the same request_id to resume an interrupted upload.',
    ].join(' '),
    input: attachFileInput,
    annotations: WRITE,
    async run(ctx, args) {
      const partition = writePartition(ctx.caller, args.audience);
      const path = resolve(ctx.workspaceRoot, args.path);
      const result = await ctx.withService('write', (svc) =>
        svc.attachFile(path, {
          allowedRoot: ctx.workspaceRoot, partition, actor: 'agent', requestId: args.request_id, mediaType: args.media_type, attribution: args.attribution,
        }));
      return result.receipt;
    },
  }),
  define({
    name: 'knowledge_resume',
    title: 'Retry a checkpoint',
    description: [
      'Retry the Git checkpoint of a publication or attachment whose receipt says git.state "pending" or "unavailable" (after the repository problem named in git.reason is fixed).',
      'Every earlier waiting version is committed first, in order. Returns the receipt with the new git.state; still "pending" means the problem is still there (this is not an error).',
    ].join(' '),
    input: resumeInput,
    annotations: WRITE,
    async run(ctx, args) {
      return ctx.withService('write', (svc) => svc.resumeAs(ctx.caller, args.id));
    },
  }),
  define({
    name: 'knowledge_lookup',
    title: 'Look up a record exactly',
    description:
      'Find a record by exact id, title or alias. Answers {status: "found", record}, {status: "ambiguous", candidates} when several records share the title or alias, or {status: "missing"}. For words rather than exact names use knowledge_grep.',
    input: lookupInput,
    annotations: READ,
    async run(ctx, args) {
      return ctx.withService('read', (svc) => svc.lookup(ctx.caller, args.key));
    },
  }),
  define({
    name: 'knowledge_grep',
    title: 'Search records by keywords',
    description: [
      'Keyword search over titles, aliases and bodies, best matches first (BM25). By default every word must match; mode "any" needs one word, "phrase" the words in order.',
      'Filter by kind, tag, lifecycle and update date. Pages of at most 50: pass nextOffset as offset for more; total counts every match.',
      'Each result has a snippet with the matched words in **bold**.',
    ].join(' '),
    input: grepInput,
    annotations: READ,
    async run(ctx, args) {
      return ctx.withService('read', (svc) =>
        svc.search(ctx.caller, {
          query: args.query, mode: args.mode, kind: args.kind, tag: args.tag, lifecycle: args.lifecycle,
          updatedAfter: instantOption('updated_after', args.updated_after), updatedBefore: instantOption('updated_before', args.updated_before), limit: args.limit, offset: args.offset,
        }));
    },
  }),
  define({
    name: 'knowledge_records',
    title: 'List all records',
    description:
      'The exhaustive inventory of records you can read, newest update first, in pages (default 100, at most 500): pass nextCursor as cursor until it is null. A cursor walk lists each record that stays unchanged throughout it exactly once, whatever others add, update or delete meanwhile; a record updated during the walk moves to the front, before the cursor, so one the walk had not reached yet is missing from it (walk again for it). Offsets (nextOffset) are positions instead: others\' writes during an offset walk can skip a record or show one twice. Filter by audience, kind, tag or lifecycle.',
    input: recordsInput,
    annotations: READ,
    async run(ctx, args) {
      const partition = readPartition(ctx.caller, args.audience);
      return ctx.withService('read', (svc) =>
        svc.listRecords(ctx.caller, { partition, kind: args.kind, tag: args.tag, lifecycle: args.lifecycle, limit: args.limit, offset: args.offset, cursor: args.cursor }));
    },
  }),
  define({
    name: 'knowledge_read',
    title: 'Read one record',
    description:
      'Read one record: its frontmatter, body and file text, the evidence it cites (source descriptors: path, sha256, size, media type, attributions, and the cited lines or quote), the records it links to and the records linking to it. Use the revision shown here to revise it with knowledge_publish_batch. E_NOT_FOUND when there is no such record you can read.',
    input: readInput,
    annotations: READ,
    async run(ctx, args) {
      return ctx.withService('read', (svc) => svc.readRecord(ctx.caller, args.id));
    },
  }),
  define({
    name: 'knowledge_history',
    title: 'Record history and diffs',
    description: [
      "A record's committed versions from the vault's local Git history, newest first: commit, date, actor (agent, operator, external), revision and publication.",
      '"queued" counts versions not committed yet; "offBranch" (when present) counts commits of this record that the branch no longer holds (reset or replaced); "git" says whether the repository could be read. Pass from and to (two commits of the list) to also get the unified diff between them.',
    ].join(' '),
    input: historyInput,
    annotations: READ,
    async run(ctx, args) {
      if ((args.from === undefined) !== (args.to === undefined)) {
        throw new KnowledgeError('E_VALIDATION', 'from and to go together: pass both commits to get a diff, or neither');
      }
      return ctx.withService('read', async (svc) => {
        const history = await svc.recordHistory(ctx.caller, args.id);
        if (args.from === undefined || args.to === undefined) return history;
        return { ...history, diff: await svc.recordDiff(ctx.caller, args.id, args.from, args.to) };
      });
    },
  }),
];

export const TOOL_NAMES = TOOLS.map((t) => t.name);

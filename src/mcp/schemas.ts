/**
 * Input schemas of the agent tools [SURF-3], parsed once at the boundary
 * (STYLE habit 6). Every object is strict (an unknown argument such as
 * `store` or `partition` is refused, never ignored) and every string and
 * list has a bound: a string or list over its bound is E_TOO_LARGE, other
 * schema violations E_VALIDATION (see ./results.ts).
 *
 * The descriptions are what an agent reads in `tools/list`: they say what a
 * field means and what to put there.
 */
import { z } from 'zod';
import { LIMITS } from '../publish/validate.js';
import { MAX_KEY_LENGTH, MAX_OFFSET, MAX_QUERY_LENGTH, LIST_LIMIT, SEARCH_LIMIT } from '../read/query.js';
import { MAX_TITLE_LENGTH } from '../records/types.js';

/** Bounds of one tool call over MCP, below the core's own limits. */
export const MCP_LIMITS = {
  /** One JSON-RPC message on stdin; a longer line is refused with E_TOO_LARGE (./line-limit.ts). */
  messageBytes: 16 * 1024 * 1024,
  /** Decoded inline evidence of one publish call; larger originals go through knowledge_attach(_file). */
  inlineEvidenceBytes: 8 * 1024 * 1024,
  /** Characters of one inline evidence item (base64 of inlineEvidenceBytes). */
  inlineEvidenceChars: Math.ceil((8 * 1024 * 1024) / 3) * 4,
  /** Decoded bytes of one knowledge_attach chunk. */
  chunkBytes: 4 * 1024 * 1024,
  chunkChars: Math.ceil((4 * 1024 * 1024) / 3) * 4,
  /** Characters of one record (Markdown text or body); the core limits bytes to LIMITS.recordBytes. */
  recordChars: LIMITS.recordBytes,
  records: LIMITS.records,
  evidenceFiles: LIMITS.evidenceFiles,
  /** Short single-value strings: ids, names, kinds, tags. */
  shortChars: 300,
  listItems: 100,
  citations: 100,
  extraFields: 50,
} as const;

const uuid = z
  .string()
  .max(36)
  .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'must be a UUID')
  .describe(
    'Your own UUID for this write. Send the same request_id again to retry safely: it returns the same receipt and never writes twice. Reusing it with different arguments is E_CONFLICT. Omit it and the store picks one (then a retry may write twice).',
  );

const audience = z
  .enum(['owner-private', 'conversation'])
  .describe(
    'Who may read what you write: "conversation" = only this conversation (the default when the server runs with a session); "owner-private" = the owner\'s private notes, visible to every session of this agent. Without a session only "owner-private" exists.',
  );

const recordId = z.string().min(1).max(128).describe('A record id, exactly as returned in a receipt or listing (e.g. "rec-lx2k1-a1b2c3d4e5").');
const short = (what: string) => z.string().min(1).max(MCP_LIMITS.shortChars).describe(what);
const stringList = (what: string) => z.array(z.string().min(1).max(MCP_LIMITS.shortChars)).max(MCP_LIMITS.listItems).describe(what);

const citation = z
  .object({
    source: z.string().min(1).max(100).optional().describe('Source id of evidence already in the store (src-…), as listed by knowledge_read or an attach receipt.'),
    file: z.string().min(1).max(255).optional().describe('Name of an evidence item sent in this same call (its "name"): cites that file.'),
    lines: z
      .array(z.number().int().min(1).max(1e9))
      .length(2)
      .optional()
      .describe('Inclusive line range [first, last] of the cited text in the source.'),
    quote: z.string().min(1).max(10_000).optional().describe('The exact words quoted from the source.'),
  })
  .strict()
  .describe('One citation: give exactly one of "source" or "file".');

export const markdownRecord = z
  .object({
    markdown: z
      .string()
      .min(1)
      .max(MCP_LIMITS.recordChars)
      .describe('A whole record file: "---" YAML frontmatter (at least kind and title; claim_kind for claims; relationship_type, from, to for relationships; id and revision to revise) "---", then the Markdown body.'),
  })
  .strict();

export const structuredRecord = z
  .object({
    kind: z.enum(['page', 'claim', 'relationship']).describe('page: notes on a topic; claim: one statement that must cite evidence; relationship: a typed link between two records (must cite evidence).'),
    title: z.string().min(1).max(MAX_TITLE_LENGTH).describe('The title; for a claim, the statement itself in one line.'),
    body: z.string().max(MCP_LIMITS.recordChars).optional().describe('Markdown body. Link other records with [[record-id]].'),
    id: recordId.optional().describe('Only to revise an existing record: its id (with "revision"). Omit for a new record.'),
    revision: z.number().int().min(1).max(1e9).optional().describe('Only to revise: the revision you read (the store writes revision + 1). A stale revision is E_CONFLICT and writes nothing.'),
    claim_kind: short('Claims only: fact, preference, decision, commitment, event, or another single word.').optional(),
    relationship_type: short('Relationships only: the type of link, e.g. depends-on, contradicts, part-of.').optional(),
    from: recordId.optional().describe('Relationships only: the record id the link starts at.'),
    to: recordId.optional().describe('Relationships only: the record id the link points to.'),
    lifecycle: z.enum(['active', 'superseded', 'withdrawn', 'merged']).optional().describe('Default active.'),
    aliases: stringList('Other names an exact lookup should find this record by.').optional(),
    tags: stringList('Tags for filtering searches and listings.').optional(),
    dependencies: z.array(recordId).max(MCP_LIMITS.listItems).optional().describe('Ids of records this one depends on.'),
    evidence: z.array(citation).max(MCP_LIMITS.citations).optional().describe('Citations. Omit them on a claim or relationship to cite every evidence item of this call.'),
    fields: z
      // A key named __proto__ is dropped by the record parser below (it would set the object's prototype);
      // refused here rather than lost without a word. The markdown form keeps it.
      .preprocess((v, ctx) => {
        if (v !== null && typeof v === 'object' && Object.hasOwn(v, '__proto__')) {
          ctx.addIssue({ code: 'custom', message: 'fields.__proto__ cannot be kept as a field; give the record as markdown to keep such a key' });
        }
        return v;
      }, z.record(z.string().min(1).max(100), z.unknown()))
      .optional()
      .describe('Other frontmatter keys to keep on the record (not the standard ones above); kept on every rewrite.'),
  })
  .strict();

export const evidenceItem = z
  .object({
    name: z.string().min(1).max(255).describe('File name of the original, e.g. "meeting-notes.txt" (no directories). Citations name it in "file".'),
    text: z.string().max(MCP_LIMITS.inlineEvidenceChars).optional().describe('The original as UTF-8 text.'),
    base64: z.string().max(MCP_LIMITS.inlineEvidenceChars).optional().describe('The original as base64 bytes (instead of text).'),
    media_type: z.string().min(3).max(127).optional().describe('Media type such as text/plain; detected from the name and bytes when omitted.'),
    attribution: z.string().max(4096).optional().describe('Where it came from: a URL, a person, a conversation.'),
  })
  .strict()
  .describe('One evidence original sent inline: exactly one of "text" or "base64". At most 8 MiB per call in all; use knowledge_attach_file or knowledge_attach for larger files and cite their source id.');

export const publishBatchInput = z
  .object({
    request_id: uuid.optional(),
    audience: audience.optional(),
    records: z
      .array(z.union([markdownRecord, structuredRecord]))
      .min(1)
      .max(MCP_LIMITS.records)
      .describe('The records of this publication: each either {markdown} (a whole record file) or fields {kind, title, body, …}. All are written together or not at all.'),
    evidence: z.array(evidenceItem).max(MCP_LIMITS.evidenceFiles).optional().describe('Evidence originals the records cite.'),
  })
  .strict();

export const rememberInput = z
  .object({
    claim: z.string().min(1).max(MAX_TITLE_LENGTH).describe('The claim in one line, e.g. "The build uses Node 20". It becomes the record title.'),
    claim_kind: short('fact (default), preference, decision, commitment, event, …').optional(),
    details: z.string().max(MCP_LIMITS.recordChars).optional().describe('Optional Markdown body: context, caveats.'),
    source_text: z
      .string()
      .min(1)
      .max(MCP_LIMITS.recordChars)
      .describe('The text the claim rests on (what the user said, a document excerpt). Kept as the evidence original the claim cites.'),
    source_name: z.string().min(1).max(255).optional().describe('File name for the source text; default "source.txt".'),
    attribution: z.string().max(4096).optional().describe('Where the source came from: a URL, a person, a conversation.'),
    quote: z.string().min(1).max(10_000).optional().describe('The exact words of the source that support the claim.'),
    tags: stringList('Tags.').optional(),
    aliases: stringList('Other names to look the claim up by.').optional(),
    audience: audience.optional(),
    request_id: uuid.optional(),
  })
  .strict();

const attachDeclaration = {
  request_id: uuid.describe('Your UUID for this upload. Required: every chunk of one upload is sent under the same request_id with the same declaration.'),
  filename: z.string().min(1).max(255).describe('File name of the original (no directories).'),
  size: z.number().int().min(0).max(64 * 1024 ** 3).describe('Total size in bytes.'),
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hexadecimal characters').describe('SHA-256 of the whole original, hex.'),
  media_type: z.string().min(3).max(127).optional().describe('Media type; detected when omitted.'),
  attribution: z.string().max(4096).optional().describe('Where it came from.'),
  audience: audience.optional(),
};

export const attachInput = z
  .object({
    ...attachDeclaration,
    offset: z.number().int().min(0).max(64 * 1024 ** 3).optional().describe('Byte offset of this chunk: the "received" value of the previous answer (0 first).'),
    data_base64: z.string().max(MCP_LIMITS.chunkChars).optional().describe('This chunk, base64 (at most 4 MiB decoded). Omit it to ask where the upload stands.'),
  })
  .strict();

export const attachFileInput = z
  .object({
    path: z.string().min(1).max(4096).describe('Path of a regular file inside the workspace root this server was started with (relative paths are resolved against it). Symlinks, devices and files outside the root are refused.'),
    request_id: uuid.optional(),
    media_type: z.string().min(3).max(127).optional().describe('Media type; detected when omitted.'),
    attribution: z.string().max(4096).optional().describe('Where it came from.'),
    audience: audience.optional(),
  })
  .strict();

export const resumeInput = z
  .object({
    id: z.string().min(1).max(128).describe('The publicationId (pub-…), attachmentId (att-…) or request_id of a write whose receipt says git.state pending or unavailable.'),
  })
  .strict();

export const lookupInput = z
  .object({
    key: z.string().min(1).max(MAX_KEY_LENGTH).describe('An exact record id, title or alias (case-insensitive for titles and aliases).'),
  })
  .strict();

const kindFilter = z.enum(['page', 'claim', 'relationship']).optional().describe('Only records of this kind.');
const lifecycleFilter = z.enum(['active', 'superseded', 'withdrawn', 'merged']).optional().describe('Only records in this lifecycle state.');
const tagFilter = z.string().min(1).max(200).optional().describe('Only records with this tag.');
const offset = z.number().int().min(0).max(MAX_OFFSET).optional().describe('Skip this many results: pass the previous answer\'s nextOffset.');

export const grepInput = z
  .object({
    query: z.string().min(1).max(MAX_QUERY_LENGTH).describe('Words to find in titles, aliases and bodies. Plain words only: quotes, operators and wildcards are searched as text.'),
    mode: z.enum(['all', 'any', 'phrase']).optional().describe('all (default): every word must match; any: at least one; phrase: the words adjacent, in order.'),
    kind: kindFilter,
    tag: tagFilter,
    lifecycle: lifecycleFilter,
    updated_after: z.string().min(1).max(40).optional().describe('Only records updated at or after this UTC time or date (2024-01-31 or 2024-01-31T12:00:00Z).'),
    updated_before: z.string().min(1).max(40).optional().describe('Only records updated before this UTC time or date.'),
    limit: z.number().int().min(SEARCH_LIMIT.min).max(SEARCH_LIMIT.max).optional().describe(`Results per page, ${SEARCH_LIMIT.min}-${SEARCH_LIMIT.max} (default ${SEARCH_LIMIT.default}).`),
    offset,
  })
  .strict();

export const recordsInput = z
  .object({
    audience: audience.optional().describe('Only records of this audience; omit for every record you can read.'),
    kind: kindFilter,
    tag: tagFilter,
    lifecycle: lifecycleFilter,
    limit: z.number().int().min(LIST_LIMIT.min).max(LIST_LIMIT.max).optional().describe(`Records per page, ${LIST_LIMIT.min}-${LIST_LIMIT.max} (default ${LIST_LIMIT.default}).`),
    offset,
    cursor: z.string().min(1).max(1024).optional().describe('Start after this place: pass the previous answer\'s nextCursor (not with offset).'),
  })
  .strict();

export const readInput = z
  .object({
    id: z.string().min(1).max(MAX_KEY_LENGTH).describe('The record id (knowledge_lookup turns a title or alias into an id).'),
  })
  .strict();

const commitId = z.string().regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/, 'must be a full commit id').describe('A full commit id from this record\'s versions.');

export const historyInput = z
  .object({
    id: z.string().min(1).max(MAX_KEY_LENGTH).describe('The record id.'),
    from: commitId.optional().describe('With "to": also return the diff from this version (a commit listed in versions).'),
    to: commitId.optional().describe('With "from": the version to diff to.'),
  })
  .strict();

export type PublishBatchInput = z.infer<typeof publishBatchInput>;
export type StructuredRecordInput = z.infer<typeof structuredRecord>;
export type MarkdownRecordInput = z.infer<typeof markdownRecord>;
export type EvidenceItemInput = z.infer<typeof evidenceItem>;
export type RememberInput = z.infer<typeof rememberInput>;
export type AttachInput = z.infer<typeof attachInput>;
export type AttachFileInput = z.infer<typeof attachFileInput>;
export type GrepInput = z.infer<typeof grepInput>;
export type RecordsInput = z.infer<typeof recordsInput>;
export type HistoryInput = z.infer<typeof historyInput>;

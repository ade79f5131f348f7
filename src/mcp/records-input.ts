/**
 * Pure half of the write tools: turn tool arguments into the core's
 * `PublishRequest` parts — record files as a caller writes them (Appendix A)
 * and evidence originals. No I/O. The output depends only on the input, so
 * a retry with the same request id produces the same request hash [PUB-5].
 */
import { yaml } from '../yaml-lazy.js';
import { KnowledgeError } from '../errors.js';
import { MAX_YAML_DEPTH, collectionDepth, loneSurrogateProblem, sha256Hex } from '../records/record.js';
import { sourceIdFor } from '../evidence/source.js';
import type { EvidenceInput } from '../publish/types.js';
import { MCP_LIMITS, type EvidenceItemInput, type MarkdownRecordInput, type RememberInput, type StructuredRecordInput } from './schemas.js';

/** Frontmatter keys with their own tool field (or owned by the store): never set through `fields`. */
const STANDARD_KEYS = new Set([
  'format', 'id', 'revision', 'kind', 'title', 'scope', 'recorded_at', 'updated_at', 'lifecycle', 'aliases', 'tags',
  'dependencies', 'evidence', 'claim_kind', 'relationship_type', 'from', 'to',
]);

/**
 * Strict base64 (no whitespace, correct padding): Buffer.from alone would silently skip bad characters. Checked by
 * writing the bytes back, in linear time: a regular expression of repeated 4-character groups recursed once per
 * group in V8 and overflowed the stack at ~3 MB, below the 4 MiB chunks and 8 MiB evidence the tools accept.
 */
export function decodeBase64(text: string, what: string): Buffer {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) throw new KnowledgeError('E_VALIDATION', `${what} is not valid base64 (A-Z a-z 0-9 + /, padded with =, no whitespace)`);
  return bytes;
}

function bad(message: string): never {
  throw new KnowledgeError('E_VALIDATION', message);
}

/** Inline evidence items → originals; citations may name them by file name. */
export function evidenceFromItems(items: readonly EvidenceItemInput[]): { evidence: EvidenceInput[]; sourceByName: Map<string, string> } {
  const evidence: EvidenceInput[] = [];
  const sourceByName = new Map<string, string>();
  let total = 0;
  items.forEach((item, i) => {
    const label = `evidence #${i + 1} (${JSON.stringify(item.name)})`;
    if (/[/\\]/.test(item.name) || item.name === '.' || item.name === '..') bad(`${label}: name must be a plain file name, without directories`);
    if (sourceByName.has(item.name)) bad(`${label}: two evidence items are named ${JSON.stringify(item.name)}; citations could not tell them apart`);
    if ((item.text === undefined) === (item.base64 === undefined)) bad(`${label}: give exactly one of "text" or "base64"`);
    // UTF-8 has no bytes for a lone surrogate: encoded, it would be kept as U+FFFD, the original altered.
    const lone = item.text !== undefined ? loneSurrogateProblem(`${label}: text`, item.text) : null;
    if (lone !== null) bad(lone);
    const bytes = item.text !== undefined ? Buffer.from(item.text, 'utf8') : decodeBase64(item.base64!, `${label} base64`);
    total += bytes.length;
    if (total > MCP_LIMITS.inlineEvidenceBytes) {
      throw new KnowledgeError(
        'E_TOO_LARGE',
        `inline evidence of one call is limited to ${MCP_LIMITS.inlineEvidenceBytes} bytes; send larger originals with knowledge_attach_file or knowledge_attach, then cite their source id`,
      );
    }
    const ev: EvidenceInput = { name: item.name, bytes };
    if (item.media_type !== undefined) ev.mediaType = item.media_type;
    if (item.attribution !== undefined) ev.attribution = item.attribution;
    evidence.push(ev);
    sourceByName.set(item.name, sourceIdFor(sha256Hex(bytes)));
  });
  return { evidence, sourceByName };
}

function citationsOf(rec: StructuredRecordInput, sourceByName: ReadonlyMap<string, string>, label: string): Array<Record<string, unknown>> | undefined {
  if (rec.evidence === undefined) return undefined;
  return rec.evidence.map((c, j) => {
    const where = `${label} evidence[${j}]`;
    if ((c.source === undefined) === (c.file === undefined)) bad(`${where}: give exactly one of "source" or "file"`);
    let source = c.source;
    if (c.file !== undefined) {
      source = sourceByName.get(c.file);
      if (source === undefined) bad(`${where}: no evidence item of this call is named ${JSON.stringify(c.file)}`);
    }
    const out: Record<string, unknown> = { source };
    if (c.lines !== undefined) out.lines = [...c.lines];
    if (c.quote !== undefined) out.quote = c.quote;
    return out;
  });
}

/** A record given as fields → the record file text (YAML 1.2 frontmatter + body). */
export function structuredRecordText(rec: StructuredRecordInput, sourceByName: ReadonlyMap<string, string>, label: string): string {
  const fm: Record<string, unknown> = {};
  const put = (k: string, v: unknown) => {
    if (v !== undefined) fm[k] = v;
  };
  put('id', rec.id);
  put('revision', rec.revision);
  put('kind', rec.kind);
  put('claim_kind', rec.claim_kind);
  put('relationship_type', rec.relationship_type);
  put('from', rec.from);
  put('to', rec.to);
  put('title', rec.title);
  put('lifecycle', rec.lifecycle);
  put('aliases', rec.aliases);
  put('tags', rec.tags);
  put('dependencies', rec.dependencies);
  put('evidence', citationsOf(rec, sourceByName, label));
  const extra = Object.entries(rec.fields ?? {});
  if (extra.length > MCP_LIMITS.extraFields) throw new KnowledgeError('E_TOO_LARGE', `${label}: at most ${MCP_LIMITS.extraFields} extra fields`);
  for (const [k, v] of extra) {
    if (STANDARD_KEYS.has(k)) bad(`${label}: fields.${k} is a standard key; use the "${k}" argument (store-owned keys cannot be set)`);
    // Assigned, it would set the mapping's prototype and vanish from the file.
    if (k === '__proto__') bad(`${label}: fields.__proto__ cannot be given as a field; write the record as markdown to use that key`);
    if (v === undefined) continue;
    // The frontmatter mapping is one level; a value nested past the limit would be written as a file no reader
    // accepts [REC-3] (and one nested thousands deep would exhaust the YAML writer's stack).
    if (collectionDepth(v, MAX_YAML_DEPTH - 1) > MAX_YAML_DEPTH - 1) {
      bad(`${label}: fields.${k} nests arrays and objects more than ${MAX_YAML_DEPTH - 1} levels deep; a record's frontmatter may nest at most ${MAX_YAML_DEPTH} levels`);
    }
    fm[k] = v;
  }
  const frontmatter = yaml().stringify(fm, { version: '1.2', lineWidth: 0 });
  return `---\n${frontmatter}---\n${rec.body ?? ''}`;
}

export function isMarkdownRecord(r: MarkdownRecordInput | StructuredRecordInput): r is MarkdownRecordInput {
  return 'markdown' in r;
}

/** Records of a publish call → record file texts, in order. */
export function recordTexts(records: ReadonlyArray<MarkdownRecordInput | StructuredRecordInput>, sourceByName: ReadonlyMap<string, string>): string[] {
  return records.map((r, i) => (isMarkdownRecord(r) ? r.markdown : structuredRecordText(r, sourceByName, `record #${i + 1}`)));
}

/** knowledge_remember: one claim citing its source text. */
export function rememberParts(input: RememberInput): { records: string[]; evidence: EvidenceInput[] } {
  const name = input.source_name ?? 'source.txt';
  // Named as this tool's arguments are (the core would say "evidence #1").
  for (const [field, value] of [['source_text', input.source_text], ['source_name', name], ['attribution', input.attribution]] as const) {
    const lone = value !== undefined ? loneSurrogateProblem(field, value) : null;
    if (lone !== null) bad(lone);
  }
  const { evidence, sourceByName } = evidenceFromItems([
    { name, text: input.source_text, ...(input.attribution !== undefined ? { attribution: input.attribution } : {}) },
  ]);
  const rec: StructuredRecordInput = {
    kind: 'claim',
    title: input.claim,
    claim_kind: input.claim_kind ?? 'fact',
    evidence: [{ file: name, ...(input.quote !== undefined ? { quote: input.quote } : {}) }],
  };
  if (input.details !== undefined) rec.body = input.details;
  if (input.tags !== undefined) rec.tags = input.tags;
  if (input.aliases !== undefined) rec.aliases = input.aliases;
  return { records: [structuredRecordText(rec, sourceByName, 'claim')], evidence };
}

/**
 * What a scan learns from the bytes of one changed file [REC-3, SCAN-2]: a
 * valid record (its index row), a valid YAML file, or a diagnostic. Pure:
 * bytes in, verdict out. An invalid file is still checkpointed as it is on
 * disk; the verdict only decides the index and the diagnostics.
 */
import type { Document } from 'yaml';
import { yaml } from '../yaml-lazy.js';
import { keyProblem, parseRecordText, sha256Hex, validateStored, yamlErrorMessage, yamlTokens, YAML_TOO_DEEP, type ParsedFile, type ValidationIssue } from '../records/record.js';
import { RECORD_FORMAT } from '../records/types.js';
import { partitionOfPath } from '../store/layout.js';
import { isMarkdownPath } from './scope.js';
import { fastParseRecord } from './frontmatter.js';
import type { DiagnosticCode } from './types.js';
import type { RecordRow } from '../store/record-row.js';

/** One row of the `records` index, as the publication pipeline writes it. */
export type IndexRow = RecordRow;

export interface Finding {
  code: DiagnosticCode;
  reason: string;
}

export type FileCheck =
  | { kind: 'record'; row: IndexRow; findings: Finding[] }
  | { kind: 'yaml' }
  | { kind: 'invalid'; finding: Finding };

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// validateStored reads only `data`; the fast path has no Document to give it.
let noDocument: Document | undefined;

export function checkFile(path: string, partition: string, bytes: Buffer, sha256: string): FileCheck {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return invalid(isMarkdownPath(path) ? 'broken-envelope' : 'broken-yaml', 'the file is not valid UTF-8');
  }
  return isMarkdownPath(path) ? checkRecord(path, partition, text, sha256) : checkYaml(text);
}

/**
 * The verdict on a file a scan staged, in the partition its path names.
 * `sha256` is the hash staged with it, taken by the scan's reader from these
 * very bytes; a row staged without one is hashed here. (Rows a Knowledge
 * before migration 011 staged are never checked again: a queued scan's rows
 * are only read for their bytes, and unqueued leftovers are cleared.)
 * Both the applying transaction and the check worker call this.
 */
export function checkStaged(path: string, bytes: Buffer, sha256: string | null): FileCheck {
  return checkFile(path, partitionOfPath(path) ?? '', bytes, sha256 ?? sha256Hex(bytes));
}

function invalid(code: DiagnosticCode, reason: string): FileCheck {
  return { kind: 'invalid', finding: { code, reason } };
}

function checkRecord(path: string, partition: string, text: string, sha256: string): FileCheck {
  let file: ParsedFile;
  const fast = fastParseRecord(text);
  if (fast) {
    file = { doc: (noDocument ??= new (yaml().Document)()), data: fast.data, body: fast.body };
  } else {
    const parsed = parseRecordText(text);
    if (!parsed.ok) return invalid('broken-envelope', parsed.reason);
    file = parsed.file;
  }
  const v = validateStored(file);
  if (!v.ok) return invalid('invalid-record', Object.hasOwn(file.data, 'format') ? v.reason : notARecordReason(v.issues));
  const m = v.meta;
  const findings: Finding[] = [];
  if (m.scope !== partition) {
    findings.push({ code: 'scope-mismatch', reason: `scope is ${JSON.stringify(m.scope)} but the file is in partition ${partition}; it is indexed in ${partition}` });
  }
  return {
    kind: 'record',
    findings,
    row: {
      id: m.id,
      partition,
      path,
      kind: m.kind,
      title: m.title,
      revision: m.revision,
      lifecycle: m.lifecycle,
      sha256,
      recorded_at: m.recorded_at,
      updated_at: m.updated_at,
      aliases: JSON.stringify(m.aliases),
      tags: JSON.stringify(m.tags),
      meta: JSON.stringify(m),
      body: file.body,
    },
  };
}

/**
 * Why a Markdown file whose frontmatter has no `format` at all is not
 * indexed. Such a file is almost always a note written by hand or by another
 * tool (an editor, Obsidian), not a record gone wrong: one short line that
 * says so and names the fields a record would need, rather than one error
 * per missing field on every scan. A file that declares the format gets
 * every issue in full.
 */
function notARecordReason(issues: readonly ValidationIssue[]): string {
  const fields = [...new Set(issues.map((i) => i.field.split('.')[0]!).filter((f) => f !== 'format'))];
  return `not a Knowledge record: its frontmatter has no "format: ${RECORD_FORMAT}"; checkpointed as it is, not indexed` +
    (fields.length > 0 ? ` (a record also needs valid ${fields.join(', ')})` : '');
}

function checkYaml(file: string): FileCheck {
  const text = file.startsWith('\uFEFF') ? file.slice(1) : file;
  // A limit of its own, not the stack's: the same verdict on any thread (record.ts).
  // The documents are composed from the tokens measured for it: the text is parsed once.
  const parsed = yamlTokens(text);
  if (parsed.tokens === null) return invalid('broken-yaml', `invalid YAML: ${YAML_TOO_DEEP}`);
  let docs: Document.Parsed[];
  try {
    // Duplicate keys: keyProblem below, in one pass (the parser's own check is quadratic in the keys of a map).
    docs = Array.from(new (yaml().Composer)({ version: '1.2', schema: 'core', uniqueKeys: false, strict: true }).compose(parsed.tokens));
  } catch (err) {
    // Block collections nested past the parser's stack throw rather than report [SCAN-2].
    return invalid('broken-yaml', `invalid YAML: ${yamlErrorMessage(err instanceof Error ? err.message : String(err))}`);
  }
  for (const d of docs) {
    const e = d.errors[0];
    if (e) return invalid('broken-yaml', `invalid YAML: ${yamlErrorMessage(e.message)}`);
    const keys = keyProblem(d, false);
    if (keys) return invalid('broken-yaml', `invalid YAML: ${keys.message}`);
  }
  return { kind: 'yaml' };
}

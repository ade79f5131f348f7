/**
 * Tool results, mapped once for MCP (STYLE habit 4). Success: the core's
 * value as `structuredContent` (the same objects the CLI prints with
 * `--json`) plus the same JSON as text for clients that only read text.
 * Failure: `isError: true` with `{ error: { code, message } }` carrying the
 * stable code. A Git problem is never a failure: the receipt says pending
 * [GIT-15].
 */
import type { ZodError } from 'zod';
import { KnowledgeError, isKnowledgeError, type ErrorCode } from '../errors.js';

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent: Record<string, unknown>;
  isError?: boolean;
}

export function toolSuccess(value: object): ToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(value) }],
    structuredContent: value as Record<string, unknown>,
  };
}

export interface ToolErrorBody {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export function toolError(err: unknown): ToolResult {
  const e = isKnowledgeError(err)
    ? err
    : new KnowledgeError('E_INTERNAL', err instanceof Error ? err.message : String(err));
  const body: ToolErrorBody = { error: { code: e.code, message: e.message } };
  if (e.details !== undefined && isPlainJson(e.details)) body.error.details = e.details;
  return {
    content: [{ type: 'text', text: `${e.code}: ${e.message}` }],
    structuredContent: body as unknown as Record<string, unknown>,
    isError: true,
  };
}

function isPlainJson(v: unknown): boolean {
  try {
    JSON.stringify(v);
    return true;
  } catch {
    return false;
  }
}

type Issue = ZodError['issues'][number];

/**
 * A union (a record given as Markdown or as fields) fails with one list of
 * issues per alternative; report the alternative that came closest (fewest
 * issues), with full paths, instead of zod's bare "Invalid input".
 */
export function flattenIssues(issues: readonly Issue[], base: PropertyKey[] = []): Array<Issue & { path: PropertyKey[] }> {
  return issues.flatMap((i) => {
    const path = [...base, ...i.path];
    if (i.code === 'invalid_union' && i.errors.length > 0) {
      const closest = i.errors.reduce((best, e) => (e.length < best.length ? e : best));
      return flattenIssues(closest, path);
    }
    return [{ ...i, path }];
  });
}

/**
 * Schema-invalid arguments as a KnowledgeError: a string or list over its
 * size limit is E_TOO_LARGE, anything else (a number out of range included)
 * E_VALIDATION. Decided on the issue's structured code, never on its text.
 */
export function argumentsError(toolName: string, err: ZodError): KnowledgeError {
  const flat = flattenIssues(err.issues);
  const issues = flat.map((i) => ({ path: i.path.map(String).join('.') || '(arguments)', code: i.code, message: i.message }));
  const tooLarge = flat.some((i) => i.code === 'too_big' && (i.origin === 'string' || i.origin === 'array'));
  const summary = issues.slice(0, 5).map((i) => `${i.path}: ${i.message}`).join('; ');
  const more = issues.length > 5 ? ` (and ${issues.length - 5} more)` : '';
  return new KnowledgeError(tooLarge ? 'E_TOO_LARGE' : 'E_VALIDATION', `invalid arguments for ${toolName}: ${summary}${more}`, { issues });
}

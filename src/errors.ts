/**
 * Errors are values with stable codes (STYLE habit 4). Every surface maps a
 * code once: CLI exit status + "CODE: message", HTTP status, MCP tool error.
 */
export type ErrorCode =
  | 'E_VALIDATION'
  | 'E_CONFLICT'
  | 'E_LOCKED'
  | 'E_UNAVAILABLE'
  | 'E_DENIED'
  | 'E_READ_ONLY'
  | 'E_NOT_FOUND'
  | 'E_USAGE'
  | 'E_TOO_LARGE'
  | 'E_UNAUTHORIZED'
  | 'E_IO'
  | 'E_INTERNAL';

export class KnowledgeError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  /** `cause`: the error this one stands for (its stack is what KNOWLEDGE_DEBUG=1 shows for an E_INTERNAL). */
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, opts?: { cause?: unknown }) {
    super(message, opts?.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = 'KnowledgeError';
    this.code = code;
    this.details = details;
  }
}

/** A full disk (or quota), from the file system or from SQLite. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT';
}

/** The disk or file system failing (an I/O error, a read-only file system), from the file system or from SQLite. */
export function isIoError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_IOERR') || code === 'EIO' || code === 'EROFS' || code === 'SQLITE_READONLY');
}

/** An error of the file system (an errno code such as EACCES, EMFILE, ENOSPC), as Node reports it. */
export function isErrnoError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) && !(err instanceof KnowledgeError);
}

export function isKnowledgeError(err: unknown): err is KnowledgeError {
  return err instanceof KnowledgeError;
}

/** HTTP status for each code (Gateway maps once, here). */
export const httpStatus: Record<ErrorCode, number> = {
  E_VALIDATION: 400,
  E_USAGE: 400,
  E_CONFLICT: 409,
  E_LOCKED: 423,
  E_UNAVAILABLE: 503,
  E_DENIED: 403,
  E_READ_ONLY: 403,
  E_NOT_FOUND: 404,
  E_TOO_LARGE: 413,
  E_UNAUTHORIZED: 401,
  E_IO: 500,
  E_INTERNAL: 500,
};

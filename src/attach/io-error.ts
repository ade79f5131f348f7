/**
 * SQLite and file-system failures (disk full, I/O) become E_IO with the cause
 * named, never a crash. Anything else is a fault of Knowledge's own (a
 * TypeError, say): E_INTERNAL, not an E_IO that tells the caller to retry
 * what will fail the same way every time.
 */
import { KnowledgeError, isDiskFull, isErrnoError } from '../errors.js';

export function ioError(err: unknown, context: string): KnowledgeError {
  if (err instanceof KnowledgeError) return err;
  const e = err as { code?: unknown; message?: string } | null;
  const code = typeof e?.code === 'string' ? e.code : null;
  const message = e?.message ?? String(err);
  if (!isErrnoError(err) && !(code !== null && code.startsWith('SQLITE_'))) {
    return new KnowledgeError('E_INTERNAL', `${context}: ${message}`, { cause: code });
  }
  const full = isDiskFull(err);
  const why = full ? `the disk is full (${code})` : message;
  return new KnowledgeError('E_IO', `${context}: ${why}`, { cause: code, diskFull: full });
}

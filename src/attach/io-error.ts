/** SQLite and file-system failures (disk full, I/O) become E_IO with the cause named, never a crash. */
import { KnowledgeError, isDiskFull } from '../errors.js';

export function ioError(err: unknown, context: string): KnowledgeError {
  if (err instanceof KnowledgeError) return err;
  const e = err as { code?: string; message?: string };
  const full = isDiskFull(err);
  const why = full ? `the disk is full (${e.code})` : (e.message ?? String(err));
  return new KnowledgeError('E_IO', `${context}: ${why}`, { cause: e.code ?? null, diskFull: full });
}

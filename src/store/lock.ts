/**
 * One writer per store [LAY-4]. The lock is a row in state.sqlite taken in an
 * IMMEDIATE transaction, so two processes cannot both win, and it names the
 * holder for E_LOCKED. Whether a holder is still alive is asked of the
 * operating system: the writer also holds an exclusive file lock on
 * `writer.lock` beside state.sqlite (SQLite's own fcntl lock, through a
 * second small database in EXCLUSIVE locking mode), which the kernel
 * releases when the process ends however it ends. So a crashed holder never
 * blocks, whatever host name it ran under (a container restarted under a
 * new one), and a live one always does. The row is still asked about a
 * holder on this host: alive (its pid with its start time) without the file
 * lock means writer.lock was deleted under it, and it still blocks. Where
 * the file cannot be used, the row alone decides as before, and another
 * host's holder is taken as alive.
 */
import { hostname } from 'node:os';
import Database from 'better-sqlite3';
import type { DB } from './db.js';
import { KnowledgeError } from '../errors.js';
import { processAlive, processStartTicks } from '../process.js';
import { nowIso } from '../clock.js';

export { processAlive, processStartTicks };

interface LockRow { pid: number; start_ticks: string | null; host: string; command: string; acquired_at: string }

export function describeHolder(row: LockRow): string {
  return `pid ${row.pid} on ${row.host} (${row.command}) since ${row.acquired_at}`;
}

/** The OS lock: 'held' (this connection holds it until closed), 'busy' (another process holds it), or 'unusable'. */
function takeFileLock(file: string): { state: 'held'; db: DB } | { state: 'busy' | 'unusable' } {
  let db: DB;
  try {
    db = new Database(file, { timeout: 0 });
  } catch {
    return { state: 'unusable' };
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // What it holds does not matter, only the lock: no journal file beside it, no fsync.
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    // The first write in EXCLUSIVE mode takes the exclusive lock and keeps it until the connection closes.
    db.exec('BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS holder(pid INTEGER); DELETE FROM holder; INSERT INTO holder VALUES (' + process.pid + '); COMMIT');
    return { state: 'held', db };
  } catch (err) {
    db.close();
    return (err as { code?: string }).code === 'SQLITE_BUSY' ? { state: 'busy' } : { state: 'unusable' };
  }
}

/**
 * Take the store's writer lock; returns what releases the OS half of it (the
 * row goes with releaseWriterLock). `lockFile`: the writer.lock beside state.sqlite.
 */
export function acquireWriterLock(db: DB, command: string, lockFile: string): () => void {
  const me = process.pid;
  const host = hostname();
  const file = takeFileLock(lockFile);
  const releaseFile = () => {
    if (file.state === 'held' && file.db.open) file.db.close();
  };
  try {
    db.transaction(() => {
      const row = db.prepare('SELECT pid, start_ticks, host, command, acquired_at FROM writer_lock WHERE id = 1').get() as LockRow | undefined;
      const mine = row !== undefined && row.pid === me && row.host === host;
      if (file.state === 'busy' && !mine) {
        const holder = row ? describeHolder(row) : 'another process (its record is not written yet)';
        throw new KnowledgeError('E_LOCKED', `store is in use by ${holder}`, row ? { holder: row } : undefined);
      }
      if (row && !mine) {
        // A holder on this host is asked about as well: its process alive (same start time) and yet not holding the
        // file lock means writer.lock was deleted under it. Another host's pid cannot be checked: without the file
        // lock it counts as alive; with it, it is gone (its process would hold the lock).
        const alive = row.host === host ? processAlive(row.pid, row.start_ticks) : file.state === 'unusable';
        if (alive) {
          throw new KnowledgeError('E_LOCKED', `store is in use by ${describeHolder(row)}`, { holder: row });
        }
      }
      db.prepare(
        `INSERT INTO writer_lock(id, pid, start_ticks, host, command, acquired_at) VALUES (1, ?, ?, ?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, start_ticks = excluded.start_ticks, host = excluded.host,
           command = excluded.command, acquired_at = excluded.acquired_at`,
      ).run(me, processStartTicks(me), host, command, nowIso());
    }).immediate();
  } catch (err) {
    releaseFile();
    throw err;
  }
  return releaseFile;
}

/** Say better what this process is, once it knows (a Gateway started on any port: its port). */
export function describeWriter(db: DB, command: string): void {
  db.prepare('UPDATE writer_lock SET command = ? WHERE id = 1 AND pid = ? AND host = ?').run(command, process.pid, hostname());
}

export function releaseWriterLock(db: DB): void {
  db.prepare('DELETE FROM writer_lock WHERE id = 1 AND pid = ? AND host = ?').run(process.pid, hostname());
}

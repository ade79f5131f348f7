/**
 * One writer per store [LAY-4]. The lock is a row in state.sqlite taken in an
 * IMMEDIATE transaction, so two processes cannot both win. A holder whose
 * process is gone (or whose pid was reused: start time differs) is replaced,
 * so a crashed holder never blocks forever.
 */
import { hostname } from 'node:os';
import type { DB } from './db.js';
import { KnowledgeError } from '../errors.js';
import { processAlive, processStartTicks } from '../process.js';

export { processAlive, processStartTicks };

interface LockRow { pid: number; start_ticks: string | null; host: string; command: string; acquired_at: string }

export function describeHolder(row: LockRow): string {
  return `pid ${row.pid} on ${row.host} (${row.command}) since ${row.acquired_at}`;
}

export function acquireWriterLock(db: DB, command: string): void {
  const me = process.pid;
  const host = hostname();
  db.transaction(() => {
    const row = db.prepare('SELECT pid, start_ticks, host, command, acquired_at FROM writer_lock WHERE id = 1').get() as LockRow | undefined;
    if (row && !(row.pid === me && row.host === host)) {
      // Another host's pid cannot be checked; treat it as alive.
      const alive = row.host !== host || processAlive(row.pid, row.start_ticks);
      if (alive) {
        throw new KnowledgeError('E_LOCKED', `store is in use by ${describeHolder(row)}`, { holder: row });
      }
    }
    db.prepare(
      `INSERT INTO writer_lock(id, pid, start_ticks, host, command, acquired_at) VALUES (1, ?, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, start_ticks = excluded.start_ticks, host = excluded.host,
         command = excluded.command, acquired_at = excluded.acquired_at`,
    ).run(me, processStartTicks(me), host, command, new Date().toISOString());
  }).immediate();
}

/** Say better what this process is, once it knows (a Gateway started on any port: its port). */
export function describeWriter(db: DB, command: string): void {
  db.prepare('UPDATE writer_lock SET command = ? WHERE id = 1 AND pid = ? AND host = ?').run(command, process.pid, hostname());
}

export function releaseWriterLock(db: DB): void {
  db.prepare('DELETE FROM writer_lock WHERE id = 1 AND pid = ? AND host = ?').run(process.pid, hostname());
}

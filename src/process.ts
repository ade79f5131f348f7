/** Is a process still the one that took a lock? (pid plus start time, so a reused pid does not count.) */
import { readFileSync } from 'node:fs';

/** State (field 3) and start time (field 22) from Linux /proc; null elsewhere. */
function procStat(pid: number): { state: string; startTicks: string | null } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the ')' that ends the command name: state is the first, starttime the 20th.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', startTicks: rest[19] ?? null };
  } catch {
    return null;
  }
}

/** Process start time in clock ticks since boot (Linux /proc), null elsewhere. */
export function processStartTicks(pid: number): string | null {
  return procStat(pid)?.startTicks ?? null;
}

export function processAlive(pid: number, startTicks: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const now = procStat(pid);
  // A killed process its parent has not reaped yet is a zombie: it holds nothing any more.
  if (now && (now.state === 'Z' || now.state === 'X')) return false;
  if (startTicks !== null && now?.startTicks != null && now.startTicks !== startTicks) return false; // pid reused by another process
  return true;
}

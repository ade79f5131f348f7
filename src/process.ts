/** Is a process still the one that took a lock? (pid plus start time, so a reused pid does not count.) */
import { readFileSync } from 'node:fs';

/** Process start time in clock ticks since boot (Linux /proc), null elsewhere. */
export function processStartTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime) follows the ')' that ends the command name.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

export function processAlive(pid: number, startTicks: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  if (startTicks !== null) {
    const now = processStartTicks(pid);
    if (now !== null && now !== startTicks) return false; // pid reused by another process
  }
  return true;
}


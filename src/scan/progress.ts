/**
 * A progress bar for long scans [SCAN-4], drawn on a terminal only: the CLI
 * creates one when stderr is a TTY and `--json` is off. It stays silent for
 * the first `delayMs` (short scans show nothing) and redraws at most every
 * `intervalMs`.
 */
import type { ScanProgress } from './types.js';

const PHASE_LABEL: Record<ScanProgress['phase'], string> = {
  walk: 'scanning',
  adopt: 'adopting sources',
  record: 'recording',
  commit: 'committing',
};

/** One line of progress (pure; no terminal codes). */
export function progressLine(p: ScanProgress, width = 24): string {
  const label = PHASE_LABEL[p.phase];
  const bar = (done: number, of: number) => {
    const frac = Math.min(1, done / of);
    const full = Math.round(frac * width);
    return `[${'#'.repeat(full)}${'-'.repeat(width - full)}] ${Math.floor(frac * 100)}%`;
  };
  if (p.phase === 'adopt' && p.adopting && p.adopting.of > 0) return `${label} ${bar(p.adopting.done, p.adopting.of)} ${p.adopting.done}/${p.adopting.of} originals hashed`;
  const hashed = p.hashed > 0 ? `, ${p.hashed} read` : '';
  if (p.phase !== 'walk' || p.expected <= 0) return `${label} ${p.seen} files${hashed}`;
  return `${label} ${bar(p.seen, p.expected)} ${p.seen}/${p.expected} files${hashed}`;
}

export interface ProgressBar {
  update(p: ScanProgress): void;
  done(): void;
}

export function terminalProgress(
  write: (s: string) => void,
  opts: { delayMs?: number; intervalMs?: number; now?: () => number } = {},
): ProgressBar {
  const now = opts.now ?? (() => Date.now());
  const start = now();
  const delay = opts.delayMs ?? 500;
  const interval = opts.intervalMs ?? 100;
  let last = -Infinity;
  let drawn = false;
  return {
    update(p) {
      const t = now();
      if (t - start < delay || t - last < interval) return;
      last = t;
      drawn = true;
      write(`\r\x1b[2K${progressLine(p)}`);
    },
    done() {
      if (drawn) write('\r\x1b[2K');
    },
  };
}

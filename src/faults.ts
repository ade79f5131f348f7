/**
 * Crash points for the crash tests: when KNOWLEDGE_CRASH_AT names a point,
 * the process kills itself with SIGKILL right there, so the tests exercise
 * real interrupted processes, not simulated ones; KNOWLEDGE_PAUSE_AT pauses
 * there instead. Inert otherwise.
 */
export type CrashPoint =
  | 'after-journal'
  | 'mid-install'
  | 'after-install'
  | 'after-acknowledge'
  | 'after-commit-object'
  | 'after-update-ref'
  | 'before-record-commit'
  | 'after-record-commit'
  // Attachments [ATT-1, ATT-2]
  | 'attach-mid-hash'
  | 'attach-mid-upload'
  | 'attach-before-chunk-commit'
  | 'attach-after-install'
  | 'attach-before-acknowledge'
  | 'attach-after-acknowledge'
  // Scans [SCAN-3]
  | 'scan-mid-stage'
  | 'scan-after-enqueue'
  // A publication's install of one file: its staging file fsynced, the file there before not yet moved aside; then moved aside
  | 'install-before-replace'
  | 'install-held'
  // A checkpoint waiting, index.lock held, for a git command that wrote the index to move HEAD [GIT-10] (pause only)
  | 'index-settle'
  // Creating a store [LAY-1, LAY-3]
  | 'init-before-manifest';

export function crashPoint(name: CrashPoint): void {
  if (process.env.KNOWLEDGE_CRASH_AT === name) process.kill(process.pid, 'SIGKILL');
  // KNOWLEDGE_PAUSE_AT=point:ms[,point:ms…] stops the process there for a while instead: a window in which a test
  // acts as another program would (edits a file the process has just installed, say). A line on stderr says when
  // the pause begins, so the test acts inside the window rather than guessing when it opens.
  const pause = process.env.KNOWLEDGE_PAUSE_AT;
  if (pause === undefined) return;
  for (const spec of pause.split(',')) {
    if (!spec.startsWith(`${name}:`)) continue;
    const ms = Number(spec.slice(name.length + 1));
    process.stderr.write(`knowledge: paused at ${name} for ${ms} ms\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  }
}

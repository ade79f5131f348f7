/**
 * Stopping on SIGINT, SIGTERM and SIGHUP (Ctrl-C, `kill`, a closed terminal).
 *
 * The CLI's writing commands install `stopOnSignals` for their run: a signal
 * then runs the command's `stop`, which says on stderr what was interrupted
 * and how to finish it (a publication's request id, say), and the process
 * ends as the signal would have ended it (exit status 128 + its number).
 * The long-running surfaces install it for their lifetime: the Gateway
 * closes on each, answering the requests it has taken, and then ends by
 * SIGHUP (src/gateway/server.ts closeOnSignal); `knowledge mcp` ends by each.
 *
 * Some steps must not be cut short: while Knowledge holds the user's
 * `index.lock` after moving the branch, the index is behind the branch until
 * the index step installs the new one [GIT-10]. Such a step is bracketed by
 * `holdSignals()`: a signal arriving meanwhile is deferred until the last
 * hold is let go, then acted on. A second signal does not wait: the lock is
 * left (the next Knowledge write takes it over, as after a crash).
 *
 * JavaScript runs a signal's handler between tasks only: a signal delivered
 * during synchronous work (a SQLite transaction, a paused crash point) is
 * acted on at the next `await` that waits for I/O. Without `stopOnSignals`
 * (the library, an in-process Gateway, tests) holds are counted and nothing
 * else changes: signals keep their usual effect.
 */
export type StopSignal = 'SIGINT' | 'SIGTERM' | 'SIGHUP';

export const STOP_SIGNALS: readonly StopSignal[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const SIGNAL_NUMBER: Record<StopSignal, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 };

/** The conventional exit status of a process a signal stopped: 128 + its number. */
export function signalExitStatus(signal: StopSignal): number {
  return 128 + SIGNAL_NUMBER[signal];
}

let holds = 0;
let deferred: StopSignal | null = null;
let installed: ((signal: StopSignal) => void) | null = null;

/**
 * Keep a signal from stopping the process until the returned function is
 * called (once; later calls do nothing). Holds nest.
 */
export function holdSignals(): () => void {
  holds++;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    holds--;
    if (holds === 0 && deferred !== null && installed !== null) installed(deferred);
  };
}

/**
 * Until the returned function is called, SIGINT, SIGTERM and SIGHUP run
 * `stop` (held ones once the last hold is let go); `stop` gets the signal and
 * writes what it has to say, then ends the process or (a server) begins its
 * own shutdown. `atOnce` is true when a second signal came while the first was
 * held: `stop` must then end the process without waiting for anything. A
 * signal arriving once `stop` has run (a server still shutting down) ends the
 * process at once (endBySignal), as it would without these handlers.
 */
export function stopOnSignals(stop: (signal: StopSignal, atOnce: boolean) => void, note: (s: string) => void = (s) => process.stderr.write(s)): () => void {
  let stopping = false;
  const act = (signal: StopSignal, atOnce = false) => {
    if (stopping) return;
    stopping = true;
    stop(signal, atOnce);
  };
  const handler = (signal: NodeJS.Signals) => {
    const s = signal as StopSignal;
    if (stopping) endBySignal(s);
    if (holds > 0 && deferred === null) {
      deferred = s;
      note(`knowledge: ${s} received; finishing the index update first (send it again to stop at once, leaving .git/index.lock for the next write to take over)\n`);
      return;
    }
    if (deferred !== null) act(deferred, true);
    else act(s);
  };
  for (const s of STOP_SIGNALS) process.on(s, handler);
  installed = act;
  return () => {
    for (const s of STOP_SIGNALS) process.off(s, handler);
    if (installed === act) installed = null;
    // A signal held for a step this run never let go of: acted on now, at the end.
    const held = deferred;
    deferred = null;
    if (held !== null) act(held);
  };
}

/**
 * End the process as `signal` ends it: the handlers are gone by now, so
 * raising it again kills the process by that signal (a shell sees 128 + its
 * number, and a script running the command stops as on any Ctrl-C). Should
 * the signal not end the process, exit with that status anyway.
 */
export function endBySignal(signal: StopSignal): never {
  for (const s of STOP_SIGNALS) process.removeAllListeners(s);
  process.kill(process.pid, signal);
  process.exit(signalExitStatus(signal));
}

/**
 * Let a signal that has arrived be acted on: synchronous work (reading a long file) waits here between two of its
 * pieces. Two turns of the event loop: a signal is read in the loop's poll phase, and one `setImmediate` awaited
 * from an I/O callback runs in the same iteration's check phase, after poll; the second runs only after the next
 * poll phase.
 */
export async function yieldToSignals(): Promise<void> {
  await new Promise((next) => setImmediate(next));
  await new Promise((next) => setImmediate(next));
}

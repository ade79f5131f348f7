/**
 * holdSignals and stopOnSignals (src/interrupt.ts) in-process: a signal is
 * emitted to this process's listeners (process.emit, no real signal), with
 * only stopOnSignals' own listeners in place meanwhile. test/signals.test.ts
 * signals a real `knowledge` process at its one hold; these pin what it cannot
 * reach: nested holds, a hold let go twice, a hold never let go, a second
 * signal of another kind, and two runs installed one after the other.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { holdSignals, signalExitStatus, stopOnSignals, STOP_SIGNALS, type StopSignal } from './interrupt.js';

let saved: Map<StopSignal, Array<(...args: unknown[]) => void>>;
let cleanups: Array<() => void>;
beforeEach(() => {
  saved = new Map(STOP_SIGNALS.map((s) => [s, process.listeners(s) as Array<(...args: unknown[]) => void>]));
  for (const s of STOP_SIGNALS) process.removeAllListeners(s);
  cleanups = [];
});
afterEach(() => {
  // Let go of what a test left held or installed (in reverse), then put the runner's own listeners back.
  for (const c of cleanups.reverse()) c();
  for (const s of STOP_SIGNALS) {
    process.removeAllListeners(s);
    for (const l of saved.get(s)!) process.on(s, l);
  }
});

const signal = (s: StopSignal) => process.emit(s as NodeJS.Signals, s as NodeJS.Signals);

/** stopOnSignals recording what it stops with and what it notes; `off` uninstalls it. */
function install(): { stops: StopSignal[]; atOnce: boolean[]; notes: string[]; off: () => void } {
  const stops: StopSignal[] = [];
  const atOnce: boolean[] = [];
  const notes: string[] = [];
  const uninstall = stopOnSignals((s, now) => {
    stops.push(s);
    atOnce.push(now);
  }, (n) => notes.push(n));
  let done = false;
  const off = () => {
    if (done) return;
    done = true;
    uninstall();
  };
  cleanups.push(off);
  return { stops, atOnce, notes, off };
}

function hold(): () => void {
  const go = holdSignals();
  cleanups.push(go);
  return go;
}

describe('holdSignals and stopOnSignals', () => {
  it('a signal\'s exit status is 128 + its number (what endBySignal exits with should the signal not end the process)', () => {
    expect(STOP_SIGNALS.map(signalExitStatus)).toEqual([130, 143, 129]);
  });

  it('a signal without a hold stops at once; under a hold it waits for the last of nested holds', () => {
    const run = install();
    const outer = hold();
    const inner = hold();
    signal('SIGTERM');
    expect(run.stops).toEqual([]);
    expect(run.notes).toEqual([expect.stringMatching(/^knowledge: SIGTERM received; finishing the index update first/)]);
    inner();
    expect(run.stops).toEqual([]);
    outer();
    expect(run.stops).toEqual(['SIGTERM']);
  });

  it('a hold let go twice counts once: a later hold still defers', () => {
    const run = install();
    const first = hold();
    const other = hold();
    first();
    first();
    signal('SIGINT');
    expect(run.stops).toEqual([]);
    other();
    expect(run.stops).toEqual(['SIGINT']);
  });

  it('a second signal stops at once (atOnce), with the first one (the held signal); a run stops once, and a signal after that ends the process by it', () => {
    const run = install();
    const go = hold();
    signal('SIGTERM');
    expect(run.stops).toEqual([]);
    signal('SIGINT');
    expect(run.stops).toEqual(['SIGTERM']);
    expect(run.atOnce).toEqual([true]);
    go();
    expect(run.stops).toEqual(['SIGTERM']);
    // A server still closing when another signal comes: endBySignal, here stopped short of ending this test's process.
    const killed: unknown[] = [];
    const kill = vi.spyOn(process, 'kill').mockImplementation((pid, sig) => {
      killed.push([pid, sig]);
      return true;
    });
    const exit = vi.spyOn(process, 'exit').mockImplementation(() => {
      throw new Error('exited');
    });
    try {
      expect(() => signal('SIGHUP')).toThrow('exited');
      expect(killed).toEqual([[process.pid, 'SIGHUP']]);
      expect(exit).toHaveBeenCalledWith(129);
    } finally {
      kill.mockRestore();
      exit.mockRestore();
    }
    expect(run.stops).toEqual(['SIGTERM']);
  });

  it('a signal with no hold stops with atOnce false', () => {
    const run = install();
    signal('SIGINT');
    expect(run.stops).toEqual(['SIGINT']);
    expect(run.atOnce).toEqual([false]);
  });

  it('a signal held for a hold never let go is acted on when the run uninstalls', () => {
    const run = install();
    hold();
    signal('SIGHUP');
    expect(run.stops).toEqual([]);
    run.off();
    expect(run.stops).toEqual(['SIGHUP']);
  });

  it('uninstalling an earlier run leaves a later one acting on its held signal when the hold is let go', () => {
    const earlier = install();
    const later = install();
    earlier.off();
    const go = hold();
    signal('SIGINT');
    expect(later.stops).toEqual([]);
    go();
    expect(later.stops).toEqual(['SIGINT']);
    expect(earlier.stops).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { processAlive, processStartTicks } from './process.js';

describe('processAlive (whose lock is stale)', () => {
  it('a killed process that nobody reaped yet (a zombie) holds nothing; a running one does; a reused pid does not count', async () => {
    // `sleep 0` exits at once, and its parent (exec'd into `sleep 5`) never reaps it: a zombie, as a
    // killed Knowledge process stays on a machine whose init reaps slowly.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 5'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const zombie = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (b: Buffer) => resolve(b.toString()))));
      let state = '';
      for (let i = 0; i < 100 && state !== 'Z'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        state = readFileSync(`/proc/${zombie}/stat`, 'utf8').split(') ')[1]!.split(' ')[0]!;
      }
      expect(state).toBe('Z');
      expect(processAlive(zombie, null)).toBe(false);
      expect(processAlive(parent.pid!, processStartTicks(parent.pid!))).toBe(true);
      expect(processAlive(parent.pid!, '1')).toBe(false); // another process's start time: the pid was reused
    } finally {
      parent.kill('SIGKILL');
    }
  });
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two test files at a time. Vitest's default is one fewer than the CPUs, which is one on the 2-CPU machines this
    // suite runs on (CI too): the files then ran one by one, ~20 min, though most of their time is spent waiting on
    // git, child processes and fsync rather than on a CPU. Every test has its own temp directory and environment.
    maxWorkers: 2,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          pool: 'forks',
        },
      },
    ],
  },
});

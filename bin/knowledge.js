#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --heap-growing-percent=20 --max-semi-space-size=8
// The V8 flags keep the heap near its live size, and two malloc arenas keep the worker threads' freed memory from piling up (src/cli/main.ts);
// `node bin/knowledge.js` without them works the same, with more memory.
// Thin launcher: the CLI is compiled to dist/ by `npm install` (prepare).
import('../dist/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`E_INTERNAL: ${err && err.stack ? err.stack : err}\n`); process.exitCode = 1; },
);

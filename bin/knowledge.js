#!/usr/bin/env -S node --optimize-for-size
// The flag favours memory over speed (src/cli/main.ts); `node bin/knowledge.js` without it works the same, with more memory.
// Thin launcher: the CLI is compiled to dist/ by `npm install` (prepare).
import('../dist/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`E_INTERNAL: ${err && err.stack ? err.stack : err}\n`); process.exitCode = 1; },
);

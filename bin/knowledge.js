#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ by `npm install` (prepare).
import('../dist/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`E_INTERNAL: ${err && err.stack ? err.stack : err}\n`); process.exitCode = 1; },
);

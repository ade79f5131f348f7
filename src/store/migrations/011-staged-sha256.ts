/**
 * The SHA-256 a scan computed when it read a file, staged beside its bytes.
 * Checking the staged rows (check.ts, on the check worker or in the applying
 * transaction) hashed every file a second time (~0.2-0.4 s of a 100k
 * baseline, on the worker the transaction waits for). The hash is of the very
 * buffer that was staged (observe.ts). Rows staged before this version have
 * NULL; they belong to queued checkpoints, whose rows are only read for their
 * bytes, and checkStaged would hash such a row if it ever saw one.
 */
export default `
  ALTER TABLE scan_staging ADD COLUMN sha256 TEXT;
`;

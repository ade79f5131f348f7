/**
 * Each queued batch's size in bytes, counted once when it is queued
 * (checkpoint/outbox.ts). A drain sizes its next chain from it; before, it
 * summed the bytes of every file of the next 64 queued batches on every
 * attempt, which made each publication slower the longer Git stayed away
 * (measured with Git unavailable and 10,000 records queued in 150 batches:
 * 20-24 ms of every publication went to that sum). Batches queued before this
 * version have NULL here and are still summed file by file.
 */
export default `
  ALTER TABLE batches ADD COLUMN queued_bytes INTEGER;
`;

/**
 * Checkpoint facts kept after a batch's bytes are dropped [PUB-6]: the mode
 * and blob id each committed path got. `knowledge verify` compares them with
 * the repository ("holds exactly its bytes"), and an index update that a lock
 * interrupted is finished from them without the bytes [GIT-10].
 * NULL blob_oid: a deletion, or a batch recorded before this migration.
 */
export default `
  ALTER TABLE batch_files ADD COLUMN blob_oid TEXT;
  ALTER TABLE batch_files ADD COLUMN mode TEXT;
  `;

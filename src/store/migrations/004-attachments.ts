/**
 * Attachments: chunked uploads (issue: attachments) [ATT-1, ATT-2].
 *
 * One row per upload, keyed by the caller's request id, with the declared
 * SHA-256, size, file name, media type and attribution. `received` is the
 * next expected offset: chunks are appended in order.
 *
 * A chunk's bytes are written to the upload's partial file under
 * `vault/.knowledge-history/uploads/` and fsynced; then the chunk is
 * committed here (offset, length) in one short transaction. The
 * commit is the point of no return: bytes past `received` in the partial
 * file were never committed and are cut off on the next write. The chunk
 * rows are released when the assembled original is durable in the vault.
 */
export default `
  CREATE TABLE attachments (
    attachment_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE,
    request_hash TEXT NOT NULL,
    partition TEXT NOT NULL,
    actor TEXT NOT NULL,
    filename TEXT NOT NULL,
    declared_media_type TEXT,
    attribution TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL CHECK (size >= 0),
    state TEXT NOT NULL CHECK (state IN ('receiving','completed')),
    received INTEGER NOT NULL DEFAULT 0 CHECK (received >= 0 AND received <= size),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    completed_at TEXT,
    receipt TEXT,
    batch_id INTEGER,
    failure TEXT
  );
  CREATE INDEX attachments_created ON attachments(created_at);
  CREATE TABLE attachment_chunks (
    attachment_id TEXT NOT NULL REFERENCES attachments(attachment_id),
    offset INTEGER NOT NULL CHECK (offset >= 0),
    length INTEGER NOT NULL CHECK (length > 0),
    committed_at TEXT NOT NULL,
    PRIMARY KEY (attachment_id, offset)
  );
  `;

/** Core schema: journal, outbox, receipts, records index, sources, scan fingerprints. */
export default `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE writer_lock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL, start_ticks TEXT, host TEXT NOT NULL, command TEXT NOT NULL, acquired_at TEXT NOT NULL
  );
  CREATE TABLE publications (
    publication_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL UNIQUE,
    request_hash TEXT NOT NULL,
    partition TEXT NOT NULL,
    actor TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('journaled','acknowledged','abandoned')),
    created_at TEXT NOT NULL,
    plan TEXT NOT NULL,
    receipt TEXT,
    batch_id INTEGER,
    failure TEXT
  );
  CREATE TABLE journal_files (
    publication_id TEXT NOT NULL REFERENCES publications(publication_id),
    path TEXT NOT NULL,
    bytes BLOB NOT NULL,
    prior_sha256 TEXT,
    PRIMARY KEY (publication_id, path)
  );
  CREATE TABLE batches (
    batch_id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    subject TEXT NOT NULL,
    created_at TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued','committed')),
    commit_id TEXT,
    parent_commit TEXT,
    index_synced INTEGER NOT NULL DEFAULT 0,
    last_state TEXT,
    last_code TEXT,
    last_reason TEXT,
    attempted_at TEXT
  );
  CREATE INDEX batches_ref ON batches(ref_id);
  CREATE INDEX batches_state ON batches(state, batch_id);
  CREATE TABLE batch_files (
    batch_id INTEGER NOT NULL REFERENCES batches(batch_id),
    path TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    bytes BLOB,
    PRIMARY KEY (batch_id, path)
  );
  CREATE TABLE records (
    id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    path TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    revision INTEGER NOT NULL,
    lifecycle TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    aliases TEXT NOT NULL,
    tags TEXT NOT NULL,
    meta TEXT NOT NULL,
    body TEXT NOT NULL
  );
  CREATE INDEX records_partition ON records(partition, kind);
  CREATE INDEX records_path_lower ON records(lower(path));
  CREATE TABLE sources (
    partition TEXT NOT NULL,
    source_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    path TEXT NOT NULL,
    descriptor_path TEXT NOT NULL,
    in_history INTEGER NOT NULL,
    attributions TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (partition, source_id)
  );
  CREATE TABLE vault_files (
    path TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns TEXT NOT NULL,
    ino TEXT NOT NULL,
    sha256 TEXT NOT NULL
  );
  CREATE INDEX vault_files_partition ON vault_files(partition);
  CREATE INDEX vault_files_path_lower ON vault_files(lower(path));
  `;

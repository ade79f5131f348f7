/**
 * Read side [READ-1]: an FTS5 index over records' title, aliases and body,
 * the record links behind backlinks, and the inventory's ordering index.
 *
 * Everything here is derived from the `records` table and kept in sync by
 * triggers, so every writer (publications, scans, recovery) maintains it
 * without knowing it exists.
 *
 * - `records_fts_keys` gives each record id a stable integer: FTS5 needs an
 *   integer rowid, and the implicit rowid of `records` (a TEXT primary key)
 *   may be renumbered by VACUUM.
 * - `records_fts` stores its own copy of the text (not external content) so
 *   a row can be removed by rowid alone. Every insert trigger first removes
 *   what is there for the id: an `INSERT OR REPLACE` does not fire delete
 *   triggers unless recursive_triggers is on, and the index must not drift.
 * - Aliases are indexed one per line (not as JSON), so snippets read well.
 * - `facets` indexes what search filters on as opaque tokens: `p<hex of the
 *   partition id>`, `k<hex kind>`, `l<hex lifecycle>`, `t<hex tag>` (hex of
 *   the UTF-8 bytes, so any tag is one exact token). Filters and partition
 *   scoping then become FTS5 terms intersected inside the index instead of
 *   row-by-row joins. Its BM25 weight is 0, and user words are confined to
 *   the other three columns, so facets never affect or match user text.
 * - `record_links` holds the frontmatter links (dependencies, relationship
 *   endpoints). Body wiki-links `[[id]]` cannot be parsed by a trigger; the
 *   read side finds them through the FTS index instead.
 * - Malformed JSON in `meta`/`aliases` never makes a write fail here: it is
 *   indexed as if empty.
 * - Trigger bodies use no `OR IGNORE`: inside a trigger the outer
 *   statement's conflict policy (an upsert's ABORT, a scan's REPLACE) would
 *   override it. They are written so that no conflict can arise instead.
 * - `duplicate_record_ids` is where a scan lists every file whose record id
 *   another file also claims [REC-3]; exact lookup returns no record for
 *   those ids. (`records.id` is a primary key, so the index itself can hold
 *   only one of them.)
 */
export default `
  CREATE TABLE records_fts_keys (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE
  );

  CREATE VIRTUAL TABLE records_fts USING fts5(
    title, aliases, body, facets,
    tokenize = 'unicode61 remove_diacritics 2'
  );
  -- ORDER BY rank: BM25 with title > aliases > body, facets weightless.
  INSERT INTO records_fts(records_fts, rank) VALUES ('rank', 'bm25(10.0, 5.0, 1.0, 0.0)');

  CREATE TABLE record_links (
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('dependency','from','to')),
    PRIMARY KEY (source_id, kind, target_id)
  ) WITHOUT ROWID;
  CREATE INDEX record_links_target ON record_links(target_id);

  -- The inventory's stable order (updated_at desc, id) [READ-1]. strftime
  -- normalises '...:00Z' and '...:00.500Z' to one comparable form.
  CREATE INDEX records_updated ON records(strftime('%Y-%m-%dT%H:%M:%fZ', updated_at) DESC, id);
  CREATE INDEX records_partition_updated ON records(partition, strftime('%Y-%m-%dT%H:%M:%fZ', updated_at) DESC, id);
  CREATE INDEX records_title ON records(title);

  CREATE TABLE duplicate_record_ids (
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    partition TEXT NOT NULL,
    found_at TEXT NOT NULL,
    PRIMARY KEY (id, path)
  ) WITHOUT ROWID;

  CREATE TRIGGER records_read_ai AFTER INSERT ON records BEGIN
    INSERT INTO records_fts_keys(id) SELECT new.id WHERE NOT EXISTS (SELECT 1 FROM records_fts_keys WHERE id = new.id);
    DELETE FROM records_fts WHERE rowid = (SELECT n FROM records_fts_keys WHERE id = new.id);
    INSERT INTO records_fts(rowid, title, aliases, body, facets) VALUES (
      (SELECT n FROM records_fts_keys WHERE id = new.id),
      new.title,
      (SELECT group_concat(value, char(10)) FROM json_each(CASE WHEN json_valid(new.aliases) THEN new.aliases ELSE '[]' END) WHERE type = 'text'),
      new.body,
      'p' || hex(new.partition) || ' k' || hex(new.kind) || ' l' || hex(new.lifecycle) || coalesce(
        (SELECT ' ' || group_concat('t' || hex(value), ' ') FROM json_each(CASE WHEN json_valid(new.tags) THEN new.tags ELSE '[]' END) WHERE type = 'text'), ''));
    DELETE FROM record_links WHERE source_id = new.id;
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT DISTINCT new.id, value, 'dependency' FROM json_each(CASE WHEN json_valid(new.meta) THEN new.meta ELSE '{}' END, '$.dependencies') WHERE type = 'text';
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT new.id, json_extract(new.meta, '$.from'), 'from'
      WHERE json_valid(new.meta) AND json_type(new.meta, '$.from') = 'text';
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT new.id, json_extract(new.meta, '$.to'), 'to'
      WHERE json_valid(new.meta) AND json_type(new.meta, '$.to') = 'text';
  END;

  CREATE TRIGGER records_read_au AFTER UPDATE ON records BEGIN
    DELETE FROM records_fts WHERE rowid = (SELECT n FROM records_fts_keys WHERE id = old.id);
    DELETE FROM record_links WHERE source_id = old.id;
    DELETE FROM records_fts_keys WHERE id = old.id AND old.id <> new.id;
    INSERT INTO records_fts_keys(id) SELECT new.id WHERE NOT EXISTS (SELECT 1 FROM records_fts_keys WHERE id = new.id);
    DELETE FROM records_fts WHERE rowid = (SELECT n FROM records_fts_keys WHERE id = new.id);
    INSERT INTO records_fts(rowid, title, aliases, body, facets) VALUES (
      (SELECT n FROM records_fts_keys WHERE id = new.id),
      new.title,
      (SELECT group_concat(value, char(10)) FROM json_each(CASE WHEN json_valid(new.aliases) THEN new.aliases ELSE '[]' END) WHERE type = 'text'),
      new.body,
      'p' || hex(new.partition) || ' k' || hex(new.kind) || ' l' || hex(new.lifecycle) || coalesce(
        (SELECT ' ' || group_concat('t' || hex(value), ' ') FROM json_each(CASE WHEN json_valid(new.tags) THEN new.tags ELSE '[]' END) WHERE type = 'text'), ''));
    DELETE FROM record_links WHERE source_id = new.id;
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT DISTINCT new.id, value, 'dependency' FROM json_each(CASE WHEN json_valid(new.meta) THEN new.meta ELSE '{}' END, '$.dependencies') WHERE type = 'text';
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT new.id, json_extract(new.meta, '$.from'), 'from'
      WHERE json_valid(new.meta) AND json_type(new.meta, '$.from') = 'text';
    INSERT INTO record_links(source_id, target_id, kind)
      SELECT new.id, json_extract(new.meta, '$.to'), 'to'
      WHERE json_valid(new.meta) AND json_type(new.meta, '$.to') = 'text';
  END;

  CREATE TRIGGER records_read_ad AFTER DELETE ON records BEGIN
    DELETE FROM records_fts WHERE rowid = (SELECT n FROM records_fts_keys WHERE id = old.id);
    DELETE FROM records_fts_keys WHERE id = old.id;
    DELETE FROM record_links WHERE source_id = old.id;
  END;

  -- Records indexed before this migration.

  INSERT OR IGNORE INTO records_fts_keys(id) SELECT id FROM records ORDER BY rowid;
  INSERT INTO records_fts(rowid, title, aliases, body, facets)
    SELECT k.n, r.title,
      (SELECT group_concat(value, char(10)) FROM json_each(CASE WHEN json_valid(r.aliases) THEN r.aliases ELSE '[]' END) WHERE type = 'text'),
      r.body,
      'p' || hex(r.partition) || ' k' || hex(r.kind) || ' l' || hex(r.lifecycle) || coalesce(
        (SELECT ' ' || group_concat('t' || hex(value), ' ') FROM json_each(CASE WHEN json_valid(r.tags) THEN r.tags ELSE '[]' END) WHERE type = 'text'), '')
    FROM records r JOIN records_fts_keys k ON k.id = r.id;
  INSERT OR IGNORE INTO record_links(source_id, target_id, kind)
    SELECT r.id, j.value, 'dependency' FROM records r, json_each(CASE WHEN json_valid(r.meta) THEN r.meta ELSE '{}' END, '$.dependencies') j WHERE j.type = 'text';
  INSERT OR IGNORE INTO record_links(source_id, target_id, kind)
    SELECT id, json_extract(meta, '$.from'), 'from' FROM records WHERE json_valid(meta) AND json_type(meta, '$.from') = 'text';
  INSERT OR IGNORE INTO record_links(source_id, target_id, kind)
    SELECT id, json_extract(meta, '$.to'), 'to' FROM records WHERE json_valid(meta) AND json_type(meta, '$.to') = 'text';
`;

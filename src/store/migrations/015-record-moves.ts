/**
 * `record_moves`: a record's file that a scan found moved (paired by content
 * or by record id), with the path it came from. History goes on from there
 * at a version that added the file, also where no receipt of Knowledge's
 * names the move: a move and rewrite the user committed with their own git,
 * which the scan then saw already on the branch and committed nothing for
 * (read/history.ts).
 */
export default `
  CREATE TABLE record_moves (
    id TEXT NOT NULL,
    to_path TEXT NOT NULL,
    from_path TEXT NOT NULL,
    scan_id TEXT NOT NULL,
    PRIMARY KEY (id, to_path)
  ) WITHOUT ROWID;
`;

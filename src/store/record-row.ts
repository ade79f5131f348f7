/** One row of the `records` index table (migration 001), as every writer stores it. */
export interface RecordRow {
  id: string;
  partition: string;
  path: string;
  kind: string;
  title: string;
  revision: number;
  lifecycle: string;
  sha256: string;
  recorded_at: string;
  updated_at: string;
  /** JSON arrays of strings. */
  aliases: string;
  tags: string;
  /** JSON of the validated frontmatter. */
  meta: string;
  body: string;
}

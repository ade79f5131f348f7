/**
 * Activity reads publications newest first (src/activity.ts), as it reads
 * attachments and scans, by an index on `created_at`: without it each
 * Activity page (the web page asks for one every few seconds) read and sorted
 * the whole table, plans included — 0.2 s at 100k publications.
 */
export default `
  CREATE INDEX IF NOT EXISTS publications_created ON publications(created_at);
`;

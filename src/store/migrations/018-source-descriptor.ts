/**
 * `sources.descriptor`: the exact bytes of the source's descriptor as
 * Knowledge wrote it. A descriptor deleted by hand is put back from them when
 * the same bytes are given again (publish/validate.ts, attach/complete.ts), as
 * the original is. Null for sources retained before: theirs is written again
 * from the row, with the retained file's name for the original one.
 */
export default `
  ALTER TABLE sources ADD COLUMN descriptor BLOB;
`;

/**
 * `batches.observed_tip`: for a scan's checkpoint, the branch tip the scan
 * saw before it read any file (NULL when it could not tell, or a checkpoint
 * was still waiting then). A path the user commits after that is left out
 * of the scan's checkpoint, whose older bytes would otherwise revert it
 * (git/checkpoint.ts, withoutOvertaken).
 */
export default `
  ALTER TABLE batches ADD COLUMN observed_tip TEXT;
`;

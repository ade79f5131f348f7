/**
 * A kept scan's counts in columns, and its kept receipt's diagnostics capped.
 *
 * Activity lists a scan by its counts (added, modified, deleted, renamed,
 * diagnostics). Read from the receipt, every Activity page parsed each scan's
 * whole receipt: a baseline's lists every file it added, and each receipt
 * listed every standing diagnostic, so a vault of 20k hand-written notes
 * (one `invalid-record` line each) made ~2.8 MiB of receipt per scan, and an
 * Activity page of such scans 1-1.5 s. The counts are now columns, written
 * with the row (src/scan/apply.ts), and the receipt is never read for
 * Activity.
 *
 * The receipt kept for `receipt SCAN_ID` holds at most KEPT_DIAGNOSTICS
 * (src/scan/receipt.ts) diagnostics, those of the files the scan found changed
 * first, and `diagnosticsOmitted` counts the rest; the receipt the scan
 * answered with listed them all, and the next scan lists those standing then.
 * Receipts kept before are cut the same way here: those of the files the
 * scan found changed first, then the rest in their order, 200 in all.
 */
export default `
  ALTER TABLE scans ADD COLUMN baseline INTEGER;
  ALTER TABLE scans ADD COLUMN added_count INTEGER;
  ALTER TABLE scans ADD COLUMN modified_count INTEGER;
  ALTER TABLE scans ADD COLUMN deleted_count INTEGER;
  ALTER TABLE scans ADD COLUMN renamed_count INTEGER;
  ALTER TABLE scans ADD COLUMN diagnostics_count INTEGER;
  UPDATE scans SET
    baseline = CASE WHEN json_extract(receipt, '$.baseline') THEN 1 ELSE 0 END,
    added_count = json_array_length(receipt, '$.added'),
    modified_count = json_array_length(receipt, '$.modified'),
    deleted_count = json_array_length(receipt, '$.deleted'),
    renamed_count = json_array_length(receipt, '$.renamed'),
    diagnostics_count = json_array_length(receipt, '$.diagnostics');
  UPDATE scans SET receipt = json_set(receipt,
      '$.diagnostics', json((SELECT json_group_array(json(d.value)) FROM (
        SELECT e.value FROM json_each(scans.receipt, '$.diagnostics') e
        ORDER BY json_extract(e.value, '$.path') IN (
          SELECT value FROM json_each(scans.receipt, '$.added')
          UNION ALL SELECT value FROM json_each(scans.receipt, '$.modified')
          UNION ALL SELECT json_extract(value, '$.to') FROM json_each(scans.receipt, '$.renamed')) DESC, e.key
        LIMIT 200) d)),
      '$.diagnosticsOmitted', diagnostics_count - 200)
    WHERE diagnostics_count > 200;
`;

/** Scans: scan runs, their receipts and diagnostics (issue: scans). */
export default ``;

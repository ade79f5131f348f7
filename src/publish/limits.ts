/** What one publication may hold (a module of its own: the CLI checks file sizes before it reads them). */
export const LIMITS = {
  records: 200,
  recordBytes: 1024 * 1024,
  evidenceFiles: 50,
  evidenceBytes: 256 * 1024 * 1024,
};

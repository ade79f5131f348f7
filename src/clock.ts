/**
 * The one clock of what Knowledge records (journal entries, receipts, scans,
 * the writer lock): an ISO 8601 time in UTC. Records, receipts and Git's
 * author dates hold four-digit years, so a system clock past 9999 (a broken
 * RTC, a test's fake time) is refused with a coded error before anything is
 * written, instead of failing deep inside a write with E_INTERNAL.
 */
import { KnowledgeError } from './errors.js';

/** 10000-01-01T00:00:00Z in milliseconds: the first instant a four-digit year cannot name. */
const YEAR_10000_MS = 253402300800000;

export function nowIso(): string {
  const ms = Date.now();
  if (!(ms < YEAR_10000_MS)) {
    throw new KnowledgeError('E_UNAVAILABLE', `the system clock reads ${new Date(ms).toISOString()}, past the year 9999 that records, receipts and Git history can date: set the clock, then try again; nothing was written`);
  }
  return new Date(ms).toISOString();
}

import { randomBytes } from 'node:crypto';

/**
 * Request ids are UUIDs, and a UUID names the same request in either letter
 * case (RFC 9562): new ones are stored lowercase [PUB-5, ATT-1]. A lookup
 * also tries the id as given and in uppercase, the forms in which stores
 * written before this rule kept them.
 */
export function requestIdForms(id: string): [string, string, string] {
  return [id.toLowerCase(), id, id.toUpperCase()];
}

/** The condition matching every form of {@link requestIdForms}; bind `...requestIdForms(id)` to it. */
export const REQUEST_ID_MATCH = 'request_id IN (?, ?, ?)';

/**
 * A store-assigned id: `<prefix>-<time, base 36>-<10 hex digits>`, sortable
 * by time within a prefix. A clock set before 1970 counts as 1970 (a
 * negative time would put a second dash in the id).
 */
export function newId(prefix: 'rec' | 'pub' | 'att' | 'scan'): string {
  return `${prefix}-${Math.max(0, Date.now()).toString(36)}-${randomBytes(5).toString('hex')}`;
}

/**
 * Query parameters at the HTTP boundary (STYLE habit 6): parsed once, into
 * plain string maps the core service validates further. Unknown or repeated
 * parameters are malformed requests (E_VALIDATION, 400), so a typo such as
 * `?lifecyle=` fails loudly instead of silently returning everything.
 * Pure; table-tested.
 */
import { KnowledgeError } from '../errors.js';
import { isUtf8 } from 'node:buffer';

/** Longest request target the Gateway reads; longer ones are E_TOO_LARGE (413). */
export const MAX_URL_LENGTH = 4096;

export type Params = Partial<Record<string, string>>;

/**
 * The query parameters of `url` restricted to `allowed`. Empty values count
 * as absent (an HTML form sends every field).
 */
export function readParams(url: string, allowed: readonly string[]): Params {
  const u = new URL(url);
  refuseNonUtf8(u.search);
  const search = u.searchParams;
  const out: Params = {};
  const seen = new Set<string>();
  for (const [key, value] of search) {
    if (!allowed.includes(key)) {
      throw new KnowledgeError('E_VALIDATION', `unknown query parameter ${JSON.stringify(key.slice(0, 40))}; allowed: ${allowed.join(', ') || 'none'}`);
    }
    if (seen.has(key)) throw new KnowledgeError('E_VALIDATION', `query parameter ${key} is given more than once`);
    seen.add(key);
    if (value !== '') out[key] = value;
  }
  return out;
}

/**
 * E_VALIDATION when a parameter of the query string `search` percent-decodes
 * to bytes that are not UTF-8 (`q=%FF`): URLSearchParams would replace them
 * with U+FFFD and answer for other text, where the CLI refuses such an
 * argument. `%` without two hex digits stays literal text, as there.
 */
function refuseNonUtf8(search: string): void {
  for (const pair of search.slice(1).split('&')) {
    const [key = '', value = ''] = pair.split(/=(.*)/s);
    for (const part of [key, value]) {
      if (!percentDecodesToUtf8(part)) {
        throw new KnowledgeError('E_VALIDATION', `query parameter ${JSON.stringify(key.slice(0, 40))} is not UTF-8 text once percent-decoded; Knowledge takes text as UTF-8`);
      }
    }
  }
}

/** Whether the percent-decoded bytes of one URL part are UTF-8. */
function percentDecodesToUtf8(part: string): boolean {
  // Escapes are at odd indices of the split; the rest is ASCII (the URL parser percent-encodes anything else).
  return isUtf8(Buffer.concat(part.split(/(%[0-9A-Fa-f]{2})/).map((p, i) => (i % 2 ? Buffer.from([parseInt(p.slice(1), 16)]) : Buffer.from(p, 'utf8')))));
}

/**
 * E_VALIDATION when a segment of the request path percent-decodes to bytes
 * that are not UTF-8 (`/api/records/%FF`): the router would match the raw
 * escape and answer 404 for an id no caller could have meant, where the same
 * id as a query parameter or a CLI argument is refused as malformed.
 */
export function checkPathUtf8(url: string): void {
  const segments = new URL(url).pathname.split('/');
  const bad = segments.findIndex((s) => !percentDecodesToUtf8(s));
  if (bad >= 0) {
    throw new KnowledgeError('E_VALIDATION', `path segment ${bad} (${JSON.stringify(segments[bad]!.slice(0, 40))}) is not UTF-8 text once percent-decoded; Knowledge takes text as UTF-8`);
  }
}

/** Reject request targets longer than {@link MAX_URL_LENGTH}. */
export function checkUrlLength(url: string): void {
  // The path and query as sent; the origin part is the server's own.
  const u = new URL(url);
  const target = u.pathname.length + u.search.length;
  if (target > MAX_URL_LENGTH) {
    throw new KnowledgeError('E_TOO_LARGE', `request target is ${target} characters; at most ${MAX_URL_LENGTH} are allowed`);
  }
}

/** A required parameter, or E_VALIDATION naming it. */
export function required(params: Params, key: string): string {
  const v = params[key];
  if (v === undefined) throw new KnowledgeError('E_VALIDATION', `query parameter ${key} is required`);
  return v;
}

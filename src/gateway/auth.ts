/**
 * Who may talk to the Gateway [SURF-2]. On loopback with no token, anyone on
 * this machine who can reach the port (the same people who can run the CLI);
 * bound elsewhere, only holders of the bearer token. Pure helpers; the
 * middleware in ./app.ts applies them.
 *
 * Two browser attacks are closed here as well:
 * - DNS rebinding: a hostile page whose name resolves to 127.0.0.1 would be
 *   "same origin" with the Gateway. Without a token the Gateway only answers
 *   requests whose Host header names the loopback address it listens on.
 * - Cross-site requests to write routes: they must carry the custom header
 *   `X-Knowledge-Request: 1`, which another origin cannot send without a CORS
 *   preflight the Gateway never grants, and an `Origin`, when present, must
 *   be the Gateway's own.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export const WRITE_HEADER = 'x-knowledge-request';
export const MIN_TOKEN_LENGTH = 16;

/** True for names and addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(?:\.\d{1,3}){3}$/.test(h);
}

/** Constant-time comparison of an `Authorization: Bearer <token>` header with the expected token. */
export function bearerMatches(expected: string, header: string | undefined): boolean {
  if (!header) return false;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!m) return false;
  // Compare digests so the lengths are equal and the time does not depend on the prefix.
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(m[1]!).digest();
  return timingSafeEqual(a, b);
}

/** Host header values a loopback Gateway on `port` answers to. */
export function loopbackHostHeaders(host: string, port: number): string[] {
  const names = new Set(['127.0.0.1', 'localhost', '[::1]']);
  const bound = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  names.add(bound.toLowerCase());
  return [...names].map((n) => `${n}:${port}`);
}

export function hostAllowed(hostHeader: string | undefined, allowed: readonly string[]): boolean {
  return hostHeader !== undefined && allowed.includes(hostHeader.toLowerCase());
}

/** A write request is same-origin when it carries the custom header and no foreign Origin. */
export function sameOriginWrite(headers: { marker: string | undefined; origin: string | undefined }, ownOrigin: string): boolean {
  if (headers.marker !== '1') return false;
  return headers.origin === undefined || headers.origin === ownOrigin;
}

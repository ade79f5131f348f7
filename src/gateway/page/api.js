/* global location, fetch, sessionStorage, history, URLSearchParams */
/**
 * The page's only way out: JSON requests to its own origin, with the
 * Gateway's token when one is needed and the same-origin marker on writes.
 */

export const TOKEN_KEY = 'knowledge-token';

// ---------------------------------------------------------------------------
// The API (same origin only)

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function takeTokenFromHash() {
  const m = /^#token=([^&]*)/.exec(location.hash);
  if (!m) return;
  // Badly escaped (`%E0`): taken as written, and never left in the address bar either.
  let token = m[1];
  try { token = decodeURIComponent(m[1]); } catch { /* as written */ }
  sessionStorage.setItem(TOKEN_KEY, token);
  // Drop the token from the address bar and the history.
  history.replaceState(null, '', `${location.pathname}#/recent`);
}

export async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (method !== 'GET') {
    headers['X-Knowledge-Request'] = '1';
    headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'same-origin' });
  } catch (err) {
    throw new ApiError(0, 'E_NETWORK', `The Gateway did not answer (${err.message}). Is "knowledge serve" still running?`);
  }
  let data;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) {
    const e = data && data.error;
    throw new ApiError(res.status, e?.code ?? `HTTP_${res.status}`, e?.message ?? (res.statusText || 'request failed'));
  }
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}


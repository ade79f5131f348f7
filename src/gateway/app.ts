/**
 * The Gateway's HTTP surface [SURF-2]: a JSON API over the one core service
 * and the Knowledge page. A thin adapter (STYLE habit 3): parse the request
 * -> call the service as the operator -> render JSON. Testable in-process
 * with `app.request()`; ./server.ts binds it to a port.
 *
 * Errors are mapped once, here, from their stable codes (`httpStatus` in
 * ../errors.ts) to `{ error: { code, message } }`.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { KnowledgeError, httpStatus, isDiskFull, isKnowledgeError, type ErrorCode } from '../errors.js';
import { OPERATOR } from '../access.js';
import type { KnowledgeService } from '../service.js';
import { loadAssets, type Asset } from './assets.js';
import { checkPathUtf8, checkUrlLength, readParams, required, type Params } from './params.js';
import { instantOption, MAX_OFFSET } from '../read/query.js';
import { WRITE_HEADER, bearerMatches, hostAllowed, sameOriginWrite } from './auth.js';

export interface GatewayOptions {
  /** When set, every API request needs `Authorization: Bearer <token>` (401 otherwise). */
  token?: string;
  /** Host header values answered; others get 403 (DNS rebinding). Undefined: any. */
  allowedHosts?: readonly string[];
  /** A banner the page shows on every view (the demo store explains itself with it); a function is asked per request. */
  notice?: string | (() => string | null);
  /** The page files; loaded from the package when omitted. */
  assets?: Map<string, Asset>;
  /** Told about unexpected failures (the 500s), e.g. to print them on stderr. */
  onInternalError?: (err: unknown) => void;
  /**
   * Told what went wrong in the work after an earlier request's receipt (an
   * index update that failed, say), at the next request: that work never
   * changes an answer already given [GIT-15].
   */
  onWarning?: (warning: string) => void;
}

/** Largest request body a write route reads (the scan request is a few bytes). */
export const MAX_BODY_BYTES = 16 * 1024;

/**
 * The page may only talk to its own origin and never runs inline script:
 * Markdown is rendered into DOM text nodes, and this policy is the second
 * line of defence against script injection from record text.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface ErrorBody { error: { code: ErrorCode; message: string } }

/** SQLite failures that mean the database file is gone or unusable: the store is unavailable, not broken code. */
const UNAVAILABLE_SQLITE = /^SQLITE_(IOERR|CORRUPT|NOTADB|CANTOPEN|READONLY_DBMOVED)/;

function toKnowledgeError(err: unknown): KnowledgeError | null {
  if (isKnowledgeError(err)) return err;
  if (err instanceof HTTPException && err.status === 413) return new KnowledgeError('E_TOO_LARGE', `request body is larger than ${MAX_BODY_BYTES} bytes`);
  const code = (err as { code?: unknown } | null)?.code;
  // A full disk is E_IO, as the command line and the MCP server say it (README): space freed, the same request works.
  if (isDiskFull(err)) return new KnowledgeError('E_IO', `the disk is full (${String(code)}): ${(err as Error).message}`, { cause: code ?? null, diskFull: true });
  if (typeof code === 'string' && UNAVAILABLE_SQLITE.test(code)) {
    return new KnowledgeError('E_UNAVAILABLE', `the store's database cannot be read (${code}): ${(err as Error).message}`);
  }
  if (err instanceof URIError) return new KnowledgeError('E_VALIDATION', `malformed percent-encoding in the request: ${err.message}`);
  return null;
}

function errorResponse(c: Context, err: KnowledgeError): Response {
  const body: ErrorBody = { error: { code: err.code, message: err.message } };
  if (err.code === 'E_UNAUTHORIZED') c.header('WWW-Authenticate', 'Bearer realm="knowledge"');
  return c.json(body, httpStatus[err.code] as 400);
}

function intParam(params: Params, key: string, min: number, max: number, dflt: number): number {
  const v = params[key];
  if (v === undefined) return dflt;
  const n = /^\d{1,9}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new KnowledgeError('E_VALIDATION', `${key} must be an integer from ${min} to ${max}, got ${JSON.stringify(v.slice(0, 40))}`);
  }
  return n;
}

/** The optional JSON body of POST /api/scan: `{ "partition"?: string }`. */
async function scanBody(c: Context): Promise<{ partition?: string }> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new KnowledgeError('E_VALIDATION', 'the request body must be JSON: {"partition"?: "private" | "conversation:<sessionId>"}');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new KnowledgeError('E_VALIDATION', 'the request body must be a JSON object');
  const extra = Object.keys(body).filter((k) => k !== 'partition');
  if (extra.length) throw new KnowledgeError('E_VALIDATION', `unknown field ${JSON.stringify(extra[0])} in the scan request`);
  const partition = (body as { partition?: unknown }).partition;
  if (partition === undefined || partition === null) return {};
  if (typeof partition !== 'string') throw new KnowledgeError('E_VALIDATION', 'partition must be a string');
  return { partition };
}

export function createApp(svc: KnowledgeService, opts: GatewayOptions = {}): Hono {
  const assets = opts.assets ?? loadAssets();
  const app = new Hono();

  // Write routes run one at a time: two retries must not drain the outbox
  // concurrently (checkpoints are strictly ordered [GIT-5]).
  let writeChain: Promise<unknown> = Promise.resolve();
  const serialWrite = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = writeChain.then(fn, fn);
    writeChain = run.catch(() => undefined);
    return run;
  };

  app.onError((err, c) => {
    const known = toKnowledgeError(err);
    if (known) return errorResponse(c, known);
    opts.onInternalError?.(err);
    return errorResponse(c, new KnowledgeError('E_INTERNAL', `unexpected failure: ${err instanceof Error ? err.message : String(err)}`));
  });

  app.notFound((c) => {
    if (new URL(c.req.url).pathname.startsWith('/api/')) {
      return errorResponse(c, new KnowledgeError('E_NOT_FOUND', `no route ${c.req.method} ${new URL(c.req.url).pathname.slice(0, 200)}`));
    }
    return c.text('Not found. The Knowledge page is at /.', 404);
  });

  app.use('*', async (c, next) => {
    await next();
    c.header('Content-Security-Policy', CSP);
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'no-referrer');
    c.header('X-Frame-Options', 'DENY');
    c.header('Cross-Origin-Resource-Policy', 'same-origin');
    if (!c.res.headers.has('Cache-Control')) c.header('Cache-Control', 'no-store');
  });

  app.use('*', async (c, next) => {
    if (opts.onWarning) for (const w of svc.takeWarnings()) opts.onWarning(w);
    checkUrlLength(c.req.url);
    // The Host header as received, and the request URL's host: the Node adapter builds the URL from the Host header,
    // except for a request target in absolute form (`GET http://127.0.0.1:8484/api/… HTTP/1.1`), whose own host it
    // takes. Both must be this Gateway's, so an absolute target cannot carry a foreign Host past the check.
    if (opts.allowedHosts) {
      const header = c.req.header('host');
      for (const host of [new URL(c.req.url).host, ...(header !== undefined ? [header] : [])]) {
        if (!hostAllowed(host, opts.allowedHosts)) {
          throw new KnowledgeError('E_DENIED', `this Gateway answers only to ${opts.allowedHosts.join(', ')} (Host ${JSON.stringify(host.slice(0, 100))} refused)`);
        }
      }
    }
    await next();
  });

  app.use('/api/*', async (c, next) => {
    if (opts.token !== undefined && !bearerMatches(opts.token, c.req.header('authorization'))) {
      throw new KnowledgeError('E_UNAUTHORIZED', 'this Gateway needs its token: send Authorization: Bearer <token>');
    }
    checkPathUtf8(c.req.url);
    // [LAY-3] a store whose files vanished while served is unavailable, not empty.
    svc.checkAvailable();
    // An operator's edit of writesEnabled in the registry applies to the next request, as it does to the CLI's and MCP's.
    svc.reloadSettings();
    await next();
  });

  // Write routes: same authority as the CLI (the service requires the writer
  // lock and writesEnabled) plus a same-origin check against cross-site requests.
  const writeGuard = async (c: Context, next: () => Promise<void>) => {
    if (!sameOriginWrite({ marker: c.req.header(WRITE_HEADER), origin: c.req.header('origin') }, new URL(c.req.url).origin)) {
      throw new KnowledgeError('E_DENIED', `write requests need the header X-Knowledge-Request: 1 and no foreign Origin (cross-site requests are refused)`);
    }
    await next();
  };
  const limitBody = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: () => { throw new HTTPException(413); } });

  // --- Store -----------------------------------------------------------------
  app.get('/api/store', (c) => {
    readParams(c.req.url, []);
    const s = svc.store;
    return c.json({
      store: s.paths.root,
      vault: s.paths.vault,
      vaultId: s.manifest.vaultId,
      writesEnabled: s.settings.writesEnabled,
      writer: s.writer,
      notice: (typeof opts.notice === 'function' ? opts.notice() : opts.notice) ?? null,
    });
  });

  // --- Reading [READ-1][READ-2] -------------------------------------------------
  app.get('/api/records', (c) => {
    const p = readParams(c.req.url, ['partition', 'kind', 'type', 'tag', 'lifecycle', 'limit', 'offset', 'cursor']);
    return c.json(svc.listRecords(OPERATOR, p as never));
  });

  app.get('/api/records/:id', (c) => {
    readParams(c.req.url, []);
    return c.json(svc.readRecord(OPERATOR, c.req.param('id')));
  });

  app.get('/api/records/:id/history', async (c) => {
    readParams(c.req.url, []);
    return c.json(await svc.recordHistory(OPERATOR, c.req.param('id')));
  });

  app.get('/api/records/:id/diff', async (c) => {
    const p = readParams(c.req.url, ['from', 'to']);
    return c.json(await svc.recordDiff(OPERATOR, c.req.param('id'), required(p, 'from'), required(p, 'to')));
  });

  app.get('/api/lookup', (c) => {
    const p = readParams(c.req.url, ['key']);
    return c.json(svc.lookup(OPERATOR, required(p, 'key')));
  });

  app.get('/api/search', (c) => {
    const p = readParams(c.req.url, ['q', 'mode', 'kind', 'tag', 'lifecycle', 'after', 'before', 'limit', 'offset']);
    const { q, after, before, ...rest } = p;
    return c.json(svc.search(OPERATOR, { ...rest, query: required({ q }, 'q'), updatedAfter: instantOption('after', after), updatedBefore: instantOption('before', before) } as never));
  });

  // --- Activity & issues [SURF-2][GIT-14][GIT-16] --------------------------------
  app.get('/api/activity', (c) => {
    const p = readParams(c.req.url, ['limit', 'offset', 'cursor']);
    return c.json(svc.activity(intParam(p, 'limit', 1, 500, 200), intParam(p, 'offset', 0, MAX_OFFSET, 0), p.cursor));
  });

  app.get('/api/publications/:id', (c) => {
    readParams(c.req.url, []);
    return c.json(svc.publicationReceipt(c.req.param('id')));
  });

  app.get('/api/attachments/:id', (c) => {
    readParams(c.req.url, []);
    return c.json(svc.attachmentReceipt(c.req.param('id')));
  });

  app.get('/api/scans/:id', (c) => {
    readParams(c.req.url, []);
    return c.json(svc.scanReceipt(c.req.param('id')));
  });

  app.post('/api/publications/:id/resume', writeGuard, limitBody, async (c) => {
    readParams(c.req.url, []);
    const id = c.req.param('id');
    return c.json(await serialWrite(() => svc.resume(id)));
  });

  app.post('/api/attachments/:id/resume', writeGuard, limitBody, async (c) => {
    readParams(c.req.url, []);
    const id = c.req.param('id');
    return c.json(await serialWrite(() => svc.attachComplete(id)));
  });

  app.post('/api/scan', writeGuard, limitBody, async (c) => {
    readParams(c.req.url, []);
    const body = await scanBody(c);
    return c.json(await serialWrite(() => svc.scan({ partition: body.partition, caller: OPERATOR })));
  });

  // --- The Knowledge page ---------------------------------------------------------
  for (const [route, asset] of assets) {
    app.get(route, (c) => {
      c.header('Content-Type', asset.contentType);
      c.header('Cache-Control', 'no-cache');
      return c.body(asset.body);
    });
  }

  return app;
}

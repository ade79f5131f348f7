/**
 * Running the Gateway [SURF-2, LAY-4]: the one process that owns a store
 * while it runs. It opens the core service with the single-writer lock and
 * holds it until it stops, so a second Gateway or a writing CLI command is
 * refused with E_LOCKED naming this process; then it binds the HTTP app.
 *
 * Loopback by default. Binding any other address requires a bearer token:
 * the page and the API would otherwise be open to the network.
 */
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { KnowledgeError } from '../errors.js';
import { KnowledgeService } from '../service.js';
import type { GitRunnerOptions } from '../git/runner.js';
import { createApp, type GatewayOptions } from './app.js';
import { MIN_TOKEN_LENGTH, isLoopbackHost, loopbackHostHeaders } from './auth.js';
import { describeWriter } from '../store/lock.js';
import { endBySignal, stopOnSignals } from '../interrupt.js';

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 8484;

export interface GatewayStartOptions {
  storeDir: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  token?: string;
  env?: NodeJS.ProcessEnv;
  git?: GitRunnerOptions;
  notice?: GatewayOptions['notice'];
  onInternalError?: GatewayOptions['onInternalError'];
  onWarning?: GatewayOptions['onWarning'];
}

export interface RunningGateway {
  /** Where to open the page; carries `#token=…` when a token is required (the fragment never reaches the server or its logs). */
  url: string;
  /** `http://host:port`, no token. */
  origin: string;
  host: string;
  port: number;
  service: KnowledgeService;
  /** Stop serving and release the store (idempotent). */
  close(): Promise<void>;
}

/** E_USAGE unless the host/token pair is safe to serve [SURF-2]. */
export function checkBinding(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new KnowledgeError('E_USAGE', `the token must be at least ${MIN_TOKEN_LENGTH} characters (e.g. --token "$(openssl rand -hex 24)")`);
  }
  // An HTTP header carries it: spaces at its ends are dropped on the way, and control characters are not allowed.
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
    throw new KnowledgeError('E_USAGE', 'the token must be printable ASCII without spaces (e.g. --token "$(openssl rand -hex 24)")');
  }
  if (!isLoopbackHost(host) && token === undefined) {
    throw new KnowledgeError('E_USAGE', `binding ${host} exposes the store beyond this machine: give --token (or KNOWLEDGE_TOKEN), at least ${MIN_TOKEN_LENGTH} characters`);
  }
}

/** How long closing waits for requests already taken before it cuts their connections. */
const CLOSE_GRACE_MS = 5000;

function hostForUrl(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolveListen, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      const why = err.code === 'EADDRINUSE' ? `port ${port} on ${host} is already in use (choose another with --port)`
        : err.code === 'EADDRNOTAVAIL' ? `${host} is not an address of this machine`
          : err.code === 'EACCES' ? `not allowed to bind port ${port} on ${host}`
            : err.message;
      reject(new KnowledgeError('E_IO', `cannot serve on ${host}:${port}: ${why}`, { code: err.code }));
    };
    const onListening = () => {
      server.off('error', onError);
      resolveListen(server.address() as AddressInfo);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

export async function startGateway(opts: GatewayStartOptions): Promise<RunningGateway> {
  const host = opts.host ?? DEFAULT_HOST;
  const port = opts.port ?? DEFAULT_PORT;
  checkBinding(host, opts.token);
  // The lock first [LAY-4]: a second Gateway on the same store is told who holds it.
  const service = KnowledgeService.open(opts.storeDir, {
    write: true,
    command: `knowledge serve on ${hostForUrl(host)}:${port === 0 ? '(any port)' : port}`,
    env: opts.env,
    git: opts.git,
  });
  let app: ReturnType<typeof createApp> | null = null;
  // Requests being answered: closing waits for them before it settles and closes the store (and gives up its
  // writer lock), which would otherwise go on under work still running in this process [LAY-4].
  let inFlight = 0;
  let stopping = false;
  let drained: (() => void) | null = null;
  const server = createAdaptorServer({
    fetch: async (req: Request) => {
      if (!app) return new Response('starting', { status: 503 });
      if (stopping) {
        return Response.json({ error: { code: 'E_UNAVAILABLE', message: 'the Gateway is stopping' } }, { status: 503, headers: { connection: 'close' } });
      }
      inFlight++;
      try {
        return await app.fetch(req);
      } finally {
        if (--inFlight === 0) drained?.();
      }
    },
    hostname: host,
  }) as Server;
  // Requests not yet answered, to tell at close which are still waiting for their body.
  const receiving = new Set<IncomingMessage>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    receiving.add(req);
    res.once('close', () => receiving.delete(req));
  });
  let address: AddressInfo;
  try {
    address = await listen(server, port, host);
  } catch (err) {
    service.close();
    throw err;
  }
  app = createApp(service, {
    token: opts.token,
    // Without a token, only requests naming our loopback address are answered (DNS rebinding).
    allowedHosts: opts.token === undefined ? loopbackHostHeaders(host, address.port) : undefined,
    notice: opts.notice,
    onInternalError: opts.onInternalError,
    onWarning: opts.onWarning,
  });
  // Started on any port: a second writer is now told which one it got [LAY-4].
  if (port === 0) {
    try {
      describeWriter(service.store.db, `knowledge serve on ${hostForUrl(host)}:${address.port}`);
    } catch {
      // Only a better description of the lock holder: the Gateway serves without it.
    }
  }
  const origin = `http://${hostForUrl(host)}:${address.port}`;
  let closing: Promise<void> | null = null;
  return {
    url: `${origin}/${opts.token !== undefined ? `#token=${encodeURIComponent(opts.token)}` : ''}`,
    origin,
    host,
    port: address.port,
    service,
    close() {
      closing ??= (async () => {
        stopping = true;
        const closed = new Promise<void>((done) => server.close(() => done()));
        server.closeIdleConnections();
        // Every request already taken is answered first (a second Ctrl-C ends the process at once). One whose body
        // never comes (a client that stalls; Node stops timing requests once the server closes) would hold the
        // Gateway, and its writer lock, for ever: after a grace period the connections of requests whose body has not
        // all arrived are cut, which ends such a read; work already running still finishes, and answers, first.
        if (inFlight > 0) {
          const done = new Promise<void>((resolveDrained) => (drained = resolveDrained));
          // Only requests whose body has not all arrived: one whose handler is at work gets its answer however long.
          const grace = setTimeout(() => {
            for (const req of receiving) if (!req.complete) req.socket.destroy();
          }, CLOSE_GRACE_MS);
          await done;
          clearTimeout(grace);
        }
        // Their responses are written; connections kept alive after them are closed, or cut after a moment.
        server.closeIdleConnections();
        const cut = setTimeout(() => server.closeAllConnections(), 1000);
        await closed;
        clearTimeout(cut);
      })()
        .then(() => service.settle())
        .then((warnings) => { for (const w of warnings) opts.onWarning?.(w); })
        .finally(() => service.close());
      return closing;
    },
  };
}

/**
 * Serve until SIGINT, SIGTERM or SIGHUP, then close cleanly: the requests
 * already taken are answered, and the writer lock is released, so the next
 * writer need not wait for a stale-holder check. SIGINT and SIGTERM then end
 * the command normally; SIGHUP (its terminal closed) ends the process by that
 * signal once closed, as a hang-up ends any command. A signal that arrives
 * while a checkpoint holds the vault's index.lock waits until the index
 * follows the branch and the lock is released (src/interrupt.ts); a second
 * signal then, or any signal while closing, ends the process at once.
 * Installed before the Gateway says where it serves: a signal right after
 * that line is not met by the default action.
 */
export function closeOnSignal(gw: RunningGateway): Promise<void> {
  return new Promise((done) => {
    const uninstall = stopOnSignals((signal, atOnce) => {
      if (atOnce) endBySignal(signal);
      void gw.close().finally(() => {
        if (signal === 'SIGHUP') endBySignal(signal);
        uninstall();
        done();
      });
    });
  });
}

/**
 * The Knowledge page's static files [SURF-2]: one HTML file, vanilla ES
 * modules and a stylesheet, shipped in the package and served from a fixed
 * table. No request path is ever joined onto a directory, so no route can
 * reach another file (path traversal), and nothing is fetched from another
 * origin (no CDN, no web fonts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Asset {
  body: string;
  contentType: string;
}

const FILES: Record<string, { file: string; contentType: string }> = {
  '/': { file: 'index.html', contentType: 'text/html; charset=utf-8' },
  '/app.js': { file: 'app.js', contentType: 'text/javascript; charset=utf-8' },
  '/api.js': { file: 'api.js', contentType: 'text/javascript; charset=utf-8' },
  '/dom.js': { file: 'dom.js', contentType: 'text/javascript; charset=utf-8' },
  '/record.js': { file: 'record.js', contentType: 'text/javascript; charset=utf-8' },
  '/activity.js': { file: 'activity.js', contentType: 'text/javascript; charset=utf-8' },
  '/markdown.js': { file: 'markdown.js', contentType: 'text/javascript; charset=utf-8' },
  '/style.css': { file: 'style.css', contentType: 'text/css; charset=utf-8' },
  '/favicon.svg': { file: 'favicon.svg', contentType: 'image/svg+xml' },
};

/**
 * Where the page lives: beside this module when run from source (tests),
 * in the checkout's src/ when run from dist/ (tsc does not copy non-TS files).
 */
export function pageDir(): string {
  for (const rel of ['./page/', '../../src/gateway/page/']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(`${dir}index.html`)) return dir;
  }
  throw new Error('the Knowledge page files (src/gateway/page/) are missing from this installation');
}

/** Read every page file once; the table is the whole of what `GET /<file>` can serve. */
export function loadAssets(dir = pageDir()): Map<string, Asset> {
  const out = new Map<string, Asset>();
  for (const [route, { file, contentType }] of Object.entries(FILES)) {
    out.set(route, { body: readFileSync(`${dir}${file}`, 'utf8'), contentType });
  }
  return out;
}

/**
 * Pure: which record ids a record points at. Frontmatter links are
 * `dependencies` and a relationship's `from` / `to`; body links are wiki
 * links `[[id]]` or `[[id|label]]` whose target is a syntactically valid
 * record id. Identity is the id, never a title [REC-2], so `[[Some title]]`
 * is not a link.
 */
import { isValidId } from '../records/record.js';

const WIKI_RE = /\[\[([^[\]|\n]{1,128})(?:\|[^[\]\n]*)?\]\]/g;

/** Ids named by `[[id]]` / `[[id|label]]` in a Markdown body, in order of first appearance. */
export function wikiLinks(body: string): string[] {
  const out = new Set<string>();
  for (const m of body.matchAll(WIKI_RE)) {
    const id = m[1]!.trim();
    if (isValidId(id)) out.add(id);
  }
  return [...out];
}

/** Whether `body` links to `id` with a wiki link. */
export function bodyLinksTo(body: string, id: string): boolean {
  return wikiLinks(body).includes(id);
}

/** Frontmatter links: dependencies, then relationship endpoints. */
export function metaLinks(meta: Record<string, unknown>): string[] {
  const out: string[] = [];
  const deps = meta.dependencies;
  if (Array.isArray(deps)) for (const d of deps) if (typeof d === 'string') out.push(d);
  for (const k of ['from', 'to'] as const) {
    const v = meta[k];
    if (typeof v === 'string') out.push(v);
  }
  return out;
}

/** Every id a record points at, de-duplicated, frontmatter first; never itself. */
export function recordLinks(id: string, meta: Record<string, unknown>, body: string): string[] {
  return [...new Set([...metaLinks(meta), ...wikiLinks(body)])].filter((l) => l !== id);
}

/**
 * A fast path for reading record frontmatter during a scan [SCAN-4].
 *
 * The full YAML 1.2 parser costs about 100 µs for a small record, which alone
 * would make a 100k-file baseline slower than `git add -A && git commit`.
 * Frontmatter that Knowledge writes (and most that people write) uses a tiny
 * subset of YAML: `key: scalar` lines, flow lists of scalars (`[ a, b ]`),
 * and block lists (`  - x`) of scalars or of flat `key: scalar` mappings.
 * This module reads exactly that subset and returns null for anything else
 * — comments, anchors, multi-line or escaped strings, numbers other than
 * plain decimal integers, odd indentation, duplicate keys — so the caller
 * falls back to the full parser. When it does answer, the answer equals the
 * full parser's (a property test in frontmatter.test.ts checks that).
 *
 * Pure: text in, data out.
 */

export interface FastRecord {
  data: Record<string, unknown>;
  body: string;
}

type Scalar = string | number | boolean | null;

// Characters that make the subset give up: C0 (but \n), DEL, C1, tab, U+2028/2029, BOM.
// eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
const UNSAFE_RE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\ufeff]/;
// At most 1024 characters: YAML's limit on an implicit key, which the full parser enforces.
const KEY_RE = /^[A-Za-z_][A-Za-z0-9_-]{0,1023}$/;
const KEY_LINE_RE = /^([A-Za-z_][A-Za-z0-9_-]{0,1023}):(?: (.*))?$/;
const ITEM_MAP_RE = /^([A-Za-z_][A-Za-z0-9_-]{0,1023}): (.+)$/;
const RESERVED_KEYS = new Set(['__proto__', 'null', 'Null', 'NULL', 'true', 'True', 'TRUE', 'false', 'False', 'FALSE']);
// Plain scalars may start with a letter, digit, '_', '/', '(' or any non-ASCII character.
const PLAIN_START_RE = /^[A-Za-z0-9_/(\u00a0-\uffff]/;
const INT_RE = /^(?:0|[1-9][0-9]{0,14})$/;
// Every core-schema number that starts with a digit matches this (a superset).
const NUMBERISH_RE = /^[0-9][0-9a-fA-FxXoOeE.+-]*$/;

/** Parse a whole record file in the subset, or null to use the full parser. */
export function fastParseRecord(text: string): FastRecord | null {
  if (!text.startsWith('---\n')) return null;
  const close = text.indexOf('\n---', 3);
  if (close < 0) return null;
  const after = close + 4;
  if (after < text.length && text.charCodeAt(after) !== 10) return null;
  if (close <= 3) return null; // empty frontmatter: the full parser reports it
  const yaml = text.slice(4, close);
  if (UNSAFE_RE.test(yaml)) return null;
  const data = parseLines(yaml.split('\n'));
  if (data === null) return null;
  return { data, body: after >= text.length ? '' : text.slice(after + 1) };
}

function parseLines(lines: string[]): Record<string, unknown> | null {
  const data: Record<string, unknown> = {};
  let i = 0;
  while (i < lines.length) {
    const m = KEY_LINE_RE.exec(lines[i]!);
    if (!m) return null;
    const key = m[1]!;
    if (RESERVED_KEYS.has(key) || Object.prototype.hasOwnProperty.call(data, key)) return null;
    const raw = m[2];
    i++;
    if (raw !== undefined && raw !== '') {
      const v = value(raw);
      if (v === undefined) return null;
      data[key] = v;
      continue;
    }
    // A block list must follow, indented by exactly two spaces.
    if (i >= lines.length || !lines[i]!.startsWith('  - ')) return null;
    const items: unknown[] = [];
    while (i < lines.length && lines[i]!.startsWith('  ')) {
      const line = lines[i]!;
      if (!line.startsWith('  - ')) return null;
      const itemText = line.slice(4);
      const mm = ITEM_MAP_RE.exec(itemText);
      i++;
      if (!mm) {
        const v = scalar(itemText, false);
        if (v === undefined) return null;
        items.push(v);
        continue;
      }
      const obj: Record<string, unknown> = {};
      if (!setItemKey(obj, mm[1]!, mm[2]!)) return null;
      while (i < lines.length && lines[i]!.startsWith('    ')) {
        const cont = lines[i]!.slice(4);
        const cm = ITEM_MAP_RE.exec(cont);
        if (!cm || !setItemKey(obj, cm[1]!, cm[2]!)) return null;
        i++;
      }
      items.push(obj);
    }
    data[key] = items;
  }
  return data;
}

function setItemKey(obj: Record<string, unknown>, key: string, raw: string): boolean {
  if (!KEY_RE.test(key) || RESERVED_KEYS.has(key) || Object.prototype.hasOwnProperty.call(obj, key)) return false;
  const v = value(raw);
  if (v === undefined) return false;
  obj[key] = v;
  return true;
}

/** A value after `key: `: a quoted or plain scalar, or a flow list of scalars. undefined = not in the subset. */
function value(raw: string): Scalar | Scalar[] | undefined {
  if (raw.startsWith('[')) {
    if (!raw.endsWith(']')) return undefined;
    const inner = raw.slice(1, -1);
    if (inner.trim() === '') return inner === '' || inner === ' ' ? [] : undefined;
    const out: Scalar[] = [];
    for (const part of inner.split(',')) {
      const item = part.trim();
      if (item === '' || (part !== item && part !== ` ${item}` && part !== `${item} ` && part !== ` ${item} `)) return undefined;
      const v = scalar(item, true);
      if (v === undefined) return undefined;
      out.push(v);
    }
    return out;
  }
  return scalar(raw, false);
}

function scalar(s: string, inFlow: boolean): Scalar | undefined {
  if (s.length === 0) return undefined;
  if (s.startsWith('"')) {
    const m = /^"([^"\\]*)"$/.exec(s);
    return m ? m[1]! : undefined;
  }
  if (s.startsWith("'")) {
    const m = /^'([^']*)'$/.exec(s);
    return m ? m[1]! : undefined;
  }
  if (!PLAIN_START_RE.test(s) || s !== s.trim()) return undefined;
  if (s.includes(' #') || s.includes(': ') || s.endsWith(':') || /[[\]{}]/.test(s)) return undefined;
  if (inFlow && /[,:#"']/.test(s)) return undefined;
  if (s === 'null' || s === 'Null' || s === 'NULL') return null;
  if (s === 'true' || s === 'True' || s === 'TRUE') return true;
  if (s === 'false' || s === 'False' || s === 'FALSE') return false;
  if (INT_RE.test(s)) return Number(s);
  if (NUMBERISH_RE.test(s)) return undefined;
  return s;
}

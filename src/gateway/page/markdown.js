/**
 * A small, strict Markdown renderer for record bodies [SURF-2].
 *
 * Two halves, so the dangerous one stays tiny:
 * - parseMarkdown(text): pure. Text in, a tree of plain objects out. It knows
 *   headings, paragraphs, emphasis, code, block quotes, lists, rules, simple
 *   tables, links, autolinks and [[record-id]] wiki links. Raw HTML is not a
 *   thing here: it is text like any other.
 * - renderMarkdown(text, document): builds DOM nodes from the tree with
 *   createElement and textContent only (never innerHTML), and sets exactly
 *   one kind of attribute from record text: `href`, after checking it is
 *   http(s) or mailto (or an internal record link it builds itself).
 *   Images are never loaded (the page makes no request beyond the Gateway):
 *   they are shown as a labelled placeholder.
 *
 * Bounded work on hostile input: nesting deeper than MAX_DEPTH is text, and
 * a delimiter with no closer is not searched for again in the same run.
 */

export const MAX_DEPTH = 12;
const MAX_INLINE = 200_000;

// ---------------------------------------------------------------------------
// Block structure

// Every line pattern is matched in time linear in the line: a record line may be a megabyte long, and a pattern
// that backtracks over it (a lazy group before an optional one, two greedy classes that overlap) takes minutes.
// So the opening of a fence and of a heading is a short anchored match, and the rest is read by hand.
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const HEADING_OPEN = /^ {0,3}(#{1,6})(?=[ \t]|$)/;

/** A fence's opening line: its fence and info word, or null. A backtick fence's info may hold no backtick. */
function fenceOpen(line) {
  const m = FENCE_OPEN.exec(line);
  if (!m) return null;
  const rest = line.slice(m[0].length);
  if (m[1][0] === '`' && rest.includes('`')) return null;
  const info = rest.trimStart();
  let end = 0;
  while (end < info.length && !/\s/.test(info[end]) && info[end] !== '`') end++;
  return { fence: m[1], lang: info.slice(0, end) };
}

/** An ATX heading: its level and text (without a closing run of #), or null. */
function headingOf(line) {
  const m = HEADING_OPEN.exec(line);
  if (!m) return null;
  let text = trimEndBlank(line.slice(m[0].length)).trimStart();
  // A closing sequence: #s at the end, after a space or tab (or the whole text).
  let end = text.length;
  while (end > 0 && text[end - 1] === '#') end--;
  if (end < text.length && (end === 0 || text[end - 1] === ' ' || text[end - 1] === '\t')) text = trimEndBlank(text.slice(0, end));
  return { level: m[1].length, text };
}

/** `s` without trailing spaces and tabs (by hand: `/[ \t]+$/` is quadratic on a long run of blanks inside a line). */
function trimEndBlank(s) {
  let end = s.length;
  while (end > 0 && (s[end - 1] === ' ' || s[end - 1] === '\t')) end--;
  return end === s.length ? s : s.slice(0, end);
}

const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
// `s`: the rest of the line is `.*` whatever it holds (U+2028 too), so it never backtracks into the blanks before it.
const QUOTE = /^ {0,3}> ?(.*)$/s;
const BULLET = /^( {0,3})([-*+])([ \t]+)(.*)$/s;
const ORDERED = /^( {0,3})(\d{1,9})([.)])([ \t]+)(.*)$/s;
const SETEXT1 = /^ {0,3}=+[ \t]*$/;
const SETEXT2 = /^ {0,3}-+[ \t]*$/;
/** A table's delimiter row: cells of dashes, each with an optional colon at either end. */
function isTableDelimiter(line) {
  if (!line.includes('-') || /^ {4}/.test(line)) return false;
  return splitRow(line).every((c) => /^:?-+:?$/.test(c));
}

const blank = (line) => /^[ \t]*$/.test(line);

function listMarker(line) {
  let m = BULLET.exec(line);
  if (m) return { ordered: false, bullet: m[2], start: 1, indent: m[1].length + 1 + Math.min(m[3].length, 4), rest: m[4] };
  m = ORDERED.exec(line);
  if (m) return { ordered: true, bullet: m[3], start: Number(m[2]), indent: m[1].length + m[2].length + 1 + Math.min(m[4].length, 4), rest: m[5] };
  return null;
}

function startsBlock(line) {
  return fenceOpen(line) !== null || headingOf(line) !== null || RULE.test(line) || QUOTE.test(line) || listMarker(line) !== null;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && s[i + 1] === '|') { cur += '|'; i++; continue; }
    if (s[i] === '|') { cells.push(cur.trim()); cur = ''; continue; }
    cur += s[i];
  }
  cells.push(cur.trim());
  return cells;
}

/** Remove up to `n` columns of leading indentation. */
function dedent(line, n) {
  let i = 0;
  while (i < n && i < line.length && line[i] === ' ') i++;
  return line.slice(i);
}

/** Parse Markdown text into blocks (pure). */
export function parseMarkdown(text) {
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  return parseBlocks(lines, 0);
}

function parseBlocks(lines, depth) {
  const blocks = [];
  if (depth > MAX_DEPTH) {
    const t = lines.join('\n').trim();
    if (t) blocks.push({ type: 'paragraph', inline: [{ type: 'text', text: t }] });
    return blocks;
  }
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (blank(line)) { i++; continue; }

    const open = fenceOpen(line);
    if (open) {
      const fence = open.fence;
      const body = [];
      i++;
      while (i < lines.length) {
        const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length) { i++; break; }
        body.push(lines[i]);
        i++;
      }
      blocks.push({ type: 'code', lang: open.lang, text: body.join('\n') });
      continue;
    }

    const heading = headingOf(line);
    if (heading) {
      blocks.push({ type: 'heading', level: heading.level, inline: parseInline(heading.text, depth) });
      i++;
      continue;
    }

    if (RULE.test(line)) {
      blocks.push({ type: 'rule' });
      i++;
      continue;
    }

    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        inner.push(QUOTE.exec(lines[i])[1]);
        i++;
      }
      blocks.push({ type: 'quote', blocks: parseBlocks(inner, depth + 1) });
      continue;
    }

    const marker = listMarker(line);
    if (marker) {
      const list = { type: 'list', ordered: marker.ordered, start: marker.start, items: [] };
      while (i < lines.length) {
        const mk = listMarker(lines[i]);
        if (!mk || mk.ordered !== marker.ordered || mk.bullet !== marker.bullet) break;
        const itemLines = [mk.rest];
        i++;
        while (i < lines.length) {
          const l = lines[i];
          if (blank(l)) {
            // A blank line continues the item only when indented content follows.
            const next = lines[i + 1];
            if (next !== undefined && !blank(next) && /^ {2,}/.test(next)) { itemLines.push(''); i++; continue; }
            break;
          }
          if (/^ {2,}/.test(l)) { itemLines.push(dedent(l, mk.indent)); i++; continue; }
          if (startsBlock(l)) break;
          itemLines.push(l); // lazy continuation of the item's paragraph
          i++;
        }
        list.items.push(parseBlocks(itemLines, depth + 1));
        while (i < lines.length && blank(lines[i]) && lines[i + 1] !== undefined && listMarker(lines[i + 1])) i++;
      }
      blocks.push(list);
      continue;
    }

    // A table: a header row, a delimiter row, then rows until a blank line.
    if (line.includes('|') && i + 1 < lines.length && isTableDelimiter(lines[i + 1])) {
      const head = splitRow(line);
      const align = splitRow(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : ''));
      i += 2;
      const rows = [];
      while (i < lines.length && !blank(lines[i]) && lines[i].includes('|')) {
        rows.push(splitRow(lines[i]).map((c) => parseInline(c, depth)));
        i++;
      }
      blocks.push({ type: 'table', align, head: head.map((c) => parseInline(c, depth)), rows });
      continue;
    }

    // A paragraph, possibly underlined into a setext heading.
    const para = [line];
    i++;
    let level = 0;
    while (i < lines.length && !blank(lines[i])) {
      if (SETEXT1.test(lines[i])) { level = 1; i++; break; }
      if (SETEXT2.test(lines[i])) { level = 2; i++; break; }
      if (startsBlock(lines[i])) break;
      para.push(lines[i]);
      i++;
    }
    const joined = para.map((l) => l.replace(/^[ \t]+/, '')).join('\n');
    blocks.push(level ? { type: 'heading', level, inline: parseInline(joined, depth) } : { type: 'paragraph', inline: parseInline(joined, depth) });
  }
  return blocks;
}

// ---------------------------------------------------------------------------
// Inline structure

const PUNCT = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/;
const AUTOLINK = /^<((?:https?|mailto):[^\s<>]*)>/i;
const BARE_URL = /^https?:\/\/[^\s<>"']+/i;

/** Parse inline Markdown (pure). */
export function parseInline(text, depth = 0) {
  if (depth > MAX_DEPTH || text.length > MAX_INLINE) return text ? [{ type: 'text', text }] : [];
  return inlineRun(text, depth, new Set());
}

function inlineRun(text, depth, noCloser) {
  const out = [];
  // The text so far, as pieces joined once when flushed: appending to one string and then reading its end at every
  // line (a hard break is two trailing spaces) flattens V8's concatenated string each time, quadratic in a paragraph.
  // A space is always a piece of its own, so trailing spaces are the last pieces.
  const buf = [];
  const flush = () => { if (buf.length) { const text = buf.join(''); buf.length = 0; if (text) out.push({ type: 'text', text }); } };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = () => text.slice(i, i + 4096);

    if (c === '\\') {
      const n = text[i + 1];
      if (n === '\n') { flush(); out.push({ type: 'break' }); i += 2; continue; }
      if (n !== undefined && PUNCT.test(n)) { buf.push(n); i += 2; continue; }
      buf.push(c); i++; continue;
    }

    if (c === '\n') {
      // Two trailing spaces make a hard break; otherwise a soft one.
      let spaces = 0;
      while (buf.length && buf[buf.length - 1] === ' ') { buf.pop(); spaces++; }
      if (spaces >= 2) { flush(); out.push({ type: 'break' }); } else buf.push('\n');
      i++;
      continue;
    }

    if (c === '`') {
      const run = /^`+/.exec(rest())[0];
      const key = `code${run.length}`;
      const close = noCloser.has(key) ? -1 : findBacktickClose(text, i + run.length, run.length);
      if (close >= 0) {
        flush();
        let code = text.slice(i + run.length, close).replace(/\n/g, ' ');
        if (code.length > 1 && code.startsWith(' ') && code.endsWith(' ') && code.trim()) code = code.slice(1, -1);
        out.push({ type: 'code', text: code });
        i = close + run.length;
        continue;
      }
      noCloser.add(key);
      buf.push(run); i += run.length; continue;
    }

    if (c === '[' && text[i + 1] === '[') {
      const end = text.indexOf(']]', i + 2);
      const inner = end >= 0 ? text.slice(i + 2, end) : '';
      if (end >= 0 && inner.trim() && !inner.includes('\n') && !inner.includes('[')) {
        const bar = inner.indexOf('|');
        const target = (bar >= 0 ? inner.slice(0, bar) : inner).trim();
        const label = (bar >= 0 ? inner.slice(bar + 1) : inner).trim() || target;
        flush();
        out.push({ type: 'wikilink', target, text: label });
        i = end + 2;
        continue;
      }
    }

    if ((c === '!' && text[i + 1] === '[') || c === '[') {
      const isImage = c === '!';
      const open = isImage ? i + 1 : i;
      const link = noCloser.has('link') ? null : parseLinkAt(text, open);
      if (link) {
        flush();
        if (isImage) out.push({ type: 'image', alt: link.label, src: link.href });
        else out.push({ type: 'link', href: link.href, children: inlineRun(link.label, depth + 1, new Set()) });
        i = link.end;
        continue;
      }
      if (!isImage && text.indexOf('](', i) < 0) noCloser.add('link');
      buf.push(c); i++; continue;
    }

    if (c === '<') {
      const m = AUTOLINK.exec(rest());
      if (m) { flush(); out.push({ type: 'link', href: m[1], children: [{ type: 'text', text: m[1] }] }); i += m[0].length; continue; }
    }

    if ((c === 'h' || c === 'H') && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      const m = BARE_URL.exec(rest());
      if (m) {
        const url = m[0].replace(/[.,:;!?)\]]+$/, '');
        flush();
        out.push({ type: 'link', href: url, children: [{ type: 'text', text: url }] });
        i += url.length;
        continue;
      }
    }

    if (c === '*' || c === '_') {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const after = text[i + delim.length];
      const before = i > 0 ? text[i - 1] : ' ';
      // Opening: followed by non-space; `_` must not be inside a word.
      const canOpen = after !== undefined && !/\s/.test(after) && !(c === '_' && /[\p{L}\p{N}]/u.test(before));
      if (canOpen && !noCloser.has(delim)) {
        const close = findDelimClose(text, i + delim.length, delim);
        if (close > i + delim.length) {
          flush();
          out.push({ type: double ? 'strong' : 'em', children: inlineRun(text.slice(i + delim.length, close), depth + 1, new Set()) });
          i = close + delim.length;
          continue;
        }
        if (close < 0) noCloser.add(delim);
      }
      buf.push(delim); i += delim.length; continue;
    }

    buf.push(c);
    i++;
  }
  flush();
  return out;
}

function findBacktickClose(text, from, len) {
  let j = from;
  while (j < text.length) {
    const k = text.indexOf('`', j);
    if (k < 0) return -1;
    let e = k;
    while (text[e] === '`') e++;
    if (e - k === len) return k;
    j = e;
  }
  return -1;
}

function findDelimClose(text, from, delim) {
  let j = from;
  while (j < text.length) {
    const k = text.indexOf(delim, j);
    if (k < 0) return -1;
    const prev = text[k - 1];
    const next = text[k + delim.length];
    const closesHere = prev !== undefined && !/\s/.test(prev) && prev !== '\\' &&
      (delim.length === 2 || next !== delim[0]) &&
      !(delim[0] === '_' && next !== undefined && /[\p{L}\p{N}]/u.test(next));
    if (closesHere) return k;
    j = k + 1;
  }
  return -1;
}

/** `[label](href "title")` starting at `open` (the '['), or null. */
function parseLinkAt(text, open) {
  let depthB = 0;
  let j = open;
  for (; j < text.length; j++) {
    const ch = text[j];
    if (ch === '\\') { j++; continue; }
    if (ch === '[') depthB++;
    else if (ch === ']') { depthB--; if (depthB === 0) break; }
    if (j - open > 1000) return null;
  }
  if (j >= text.length || text[j + 1] !== '(') return null;
  const label = text.slice(open + 1, j);
  let k = j + 2;
  let parens = 0;
  let dest = '';
  for (; k < text.length; k++) {
    const ch = text[k];
    if (ch === '\\' && k + 1 < text.length) { dest += text[k + 1]; k++; continue; }
    if (ch === '(') parens++;
    if (ch === ')') { if (parens === 0) break; parens--; }
    if (ch === '\n' && /\n/.test(dest)) return null;
    dest += ch;
    if (k - j > 4000) return null;
  }
  if (k >= text.length) return null;
  let href = dest.trim();
  const titled = /^(\S+)\s+(?:"[^"]*"|'[^']*'|\([^)]*\))$/.exec(href);
  if (titled) href = titled[1];
  if (href.startsWith('<') && href.endsWith('>')) href = href.slice(1, -1);
  return { label, href, end: k + 1 };
}

// ---------------------------------------------------------------------------
// DOM (the only half that touches the document)

/** The href a link from record text may have, or null: http(s) and mailto only. */
export function safeHref(href) {
  const h = String(href).trim();
  return /^(?:https?:\/\/|mailto:)[^\s]*$/i.test(h) ? h : null;
}

/** The page's own link to a record. */
export function recordHref(id) {
  return `#/record/${encodeURIComponent(id)}`;
}

/**
 * Render Markdown into a DocumentFragment. `headingOffset` shifts heading
 * levels (a record body's `#` sits below the record's own title).
 */
export function renderMarkdown(text, doc, opts = {}) {
  const offset = opts.headingOffset ?? 1;
  const frag = doc.createDocumentFragment();
  for (const b of parseMarkdown(text)) frag.appendChild(blockNode(b, doc, offset));
  return frag;
}

function el(doc, tag, cls) {
  const e = doc.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

function blockNode(b, doc, offset) {
  switch (b.type) {
    case 'heading': {
      const h = el(doc, `h${Math.min(6, b.level + offset)}`);
      appendInline(h, b.inline, doc);
      return h;
    }
    case 'paragraph': {
      const p = el(doc, 'p');
      appendInline(p, b.inline, doc);
      return p;
    }
    case 'code': {
      const pre = el(doc, 'pre');
      const code = el(doc, 'code');
      if (/^[\w+-]{1,30}$/.test(b.lang)) code.dataset.lang = b.lang;
      code.textContent = b.text;
      pre.appendChild(code);
      return pre;
    }
    case 'quote': {
      const q = el(doc, 'blockquote');
      for (const c of b.blocks) q.appendChild(blockNode(c, doc, offset));
      return q;
    }
    case 'list': {
      const l = el(doc, b.ordered ? 'ol' : 'ul');
      if (b.ordered && b.start !== 1) l.setAttribute('start', String(b.start));
      for (const item of b.items) {
        const li = el(doc, 'li');
        // A one-paragraph item renders tight, without a <p>.
        if (item.length === 1 && item[0].type === 'paragraph') appendInline(li, item[0].inline, doc);
        else for (const c of item) li.appendChild(blockNode(c, doc, offset));
        l.appendChild(li);
      }
      return l;
    }
    case 'rule':
      return el(doc, 'hr');
    case 'table': {
      const wrap = el(doc, 'div', 'table-scroll');
      const t = el(doc, 'table');
      const thead = el(doc, 'thead');
      const hr = el(doc, 'tr');
      b.head.forEach((cell, k) => {
        const th = el(doc, 'th');
        th.setAttribute('scope', 'col');
        if (b.align[k]) th.style.textAlign = b.align[k];
        appendInline(th, cell, doc);
        hr.appendChild(th);
      });
      thead.appendChild(hr);
      t.appendChild(thead);
      const tbody = el(doc, 'tbody');
      for (const row of b.rows) {
        const tr = el(doc, 'tr');
        for (let k = 0; k < b.head.length; k++) {
          const td = el(doc, 'td');
          if (b.align[k]) td.style.textAlign = b.align[k];
          appendInline(td, row[k] ?? [], doc);
          tr.appendChild(td);
        }
        tbody.appendChild(tr);
      }
      t.appendChild(tbody);
      wrap.appendChild(t);
      return wrap;
    }
    default:
      return doc.createTextNode('');
  }
}

function appendInline(parent, nodes, doc) {
  for (const n of nodes) parent.appendChild(inlineNode(n, doc));
}

function inlineNode(n, doc) {
  switch (n.type) {
    case 'text':
      return doc.createTextNode(n.text);
    case 'code': {
      const c = el(doc, 'code');
      c.textContent = n.text;
      return c;
    }
    case 'strong':
    case 'em': {
      const e = el(doc, n.type);
      appendInline(e, n.children, doc);
      return e;
    }
    case 'break':
      return el(doc, 'br');
    case 'wikilink': {
      const a = el(doc, 'a', 'wikilink');
      a.setAttribute('href', recordHref(n.target));
      a.textContent = n.text;
      return a;
    }
    case 'link': {
      const href = safeHref(n.href);
      if (!href) {
        // Not a link we follow (javascript:, data:, relative paths…): its text, and the target as a tooltip.
        const s = el(doc, 'span', 'unlinked');
        s.title = `not a web link: ${n.href}`;
        appendInline(s, n.children, doc);
        return s;
      }
      const a = el(doc, 'a', 'external');
      a.setAttribute('href', href);
      a.setAttribute('rel', 'noopener noreferrer nofollow');
      a.setAttribute('target', '_blank');
      appendInline(a, n.children, doc);
      return a;
    }
    case 'image': {
      // Never fetched: the page requests nothing beyond its Gateway.
      const s = el(doc, 'span', 'image-placeholder');
      s.textContent = `[image${n.alt ? `: ${n.alt}` : ''}]`;
      s.title = `image not loaded: ${n.src}`;
      return s;
    }
    default:
      return doc.createTextNode('');
  }
}

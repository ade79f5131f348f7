/* global document, window, location, URLSearchParams, FormData */
/**
 * The Knowledge page [SURF-2]: Recent, Browse, Search, a record page with
 * evidence, links and Git history with diffs, and Activity & issues with a
 * retry control. Vanilla ES modules, no build step, no third-party code.
 * This module is the shell (router, header, banner) and the record lists.
 *
 * Safety rule for every module of the page: text from the store reaches the
 * DOM only via text nodes (./dom.js `h`/`add`) or ./markdown.js, which
 * follows the same rule. No innerHTML anywhere. Every request goes to this
 * page's own origin (the CSP enforces it too).
 */
import { recordHref } from './markdown.js';
import { api, query, takeTokenFromHash } from './api.js';
import { h, when, badge, emptyBox, into, onRerender } from './dom.js';
import { viewRecord, viewDiff } from './record.js';
import { viewActivity, setIssueCount } from './activity.js';

const main = document.getElementById('main');
const KINDS = ['page', 'claim', 'relationship'];
const LIFECYCLES = ['active', 'superseded', 'withdrawn', 'merged'];

// ---------------------------------------------------------------------------
// Records in lists

function snippetNode(hit) {
  // Matched words are where `marks` says (offsets into the snippet): the ** markers around them cannot be told from
  // ** the record's own text holds (Markdown bold, `2 ** 10`). The markers are left out of what is shown.
  const text = String(hit.snippet);
  const parts = [];
  let at = 0;
  for (const [start, end] of Array.isArray(hit.marks) ? hit.marks : []) {
    if (!(start >= at + 2 && end >= start && end + 2 <= text.length)) continue; // not a mark of this snippet
    parts.push(text.slice(at, start - 2), h('mark', {}, text.slice(start, end)));
    at = end + 2;
  }
  parts.push(text.slice(at));
  return h('p', { class: 'snippet' }, parts);
}

function recordItem(r) {
  return h('li', { class: 'record-item' },
    h('a', { class: 'record-link', href: recordHref(r.id) }, r.title || r.id),
    h('div', { class: 'meta-line' },
      badge(r.kind, `kind-${r.kind}`),
      r.lifecycle !== 'active' ? badge(r.lifecycle, 'lifecycle') : null,
      h('span', { class: 'muted' }, r.partition),
      h('span', { class: 'muted' }, `r${r.revision}`),
      h('span', { class: 'muted' }, 'updated ', when(r.updatedAt))),
    r.snippet !== undefined ? snippetNode(r) : null,
    r.tags.length ? h('div', { class: 'tags' }, r.tags.map((t) => h('a', { class: 'tag', href: `#/browse${query({ tag: t })}` }, `#${t}`))) : null);
}

function pager(base, params, offset, limit, returned, total, nextOffset) {
  // Past the end (a stale link): no impossible "101–100 of 72", and Previous goes to the last page there is.
  const past = returned === 0 && offset > 0;
  const range = past ? `nothing past ${total}` : `${total === 0 ? 0 : offset + 1}–${offset + returned} of ${total}`;
  const prevOffset = Math.max(0, past ? Math.floor(Math.max(0, total - 1) / limit) * limit : offset - limit);
  const prev = offset > 0 ? h('a', { class: 'button', href: `${base}${query({ ...params, offset: prevOffset || undefined })}` }, '← Previous') : null;
  const next = nextOffset !== null ? h('a', { class: 'button', href: `${base}${query({ ...params, offset: nextOffset })}` }, 'Next →') : null;
  return h('nav', { class: 'pager', 'aria-label': 'Pages' }, h('span', { class: 'muted' }, range), prev, next);
}

function selectField(name, label, options, value, anyLabel = 'any') {
  const id = `f-${name}`;
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('select', { id, name }, h('option', { value: '' }, anyLabel), options.map(([v, text]) => h('option', { value: v, selected: v === value }, text))));
}

function inputField(name, label, value, attrs = {}) {
  const id = `f-${name}`;
  return h('div', { class: 'field' }, h('label', { for: id }, label), h('input', { id, name, value: value ?? '', ...attrs }));
}

/** A filter form that navigates (so results are linkable and Back works). */
function filterForm(base, fields, submitLabel) {
  const form = h('form', { class: 'filters', role: 'search' }, fields, h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'button primary' }, submitLabel)));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const params = {};
    for (const [k, v] of new FormData(form)) if (String(v).trim() !== '') params[k] = String(v).trim();
    location.hash = `${base}${query(params)}`;
  });
  return form;
}

// ---------------------------------------------------------------------------
// Views

function viewRecent() {
  const box = h('div');
  const view = h('div', {}, h('h1', { tabindex: '-1' }, 'Recent'), h('p', { class: 'lede' }, 'The records changed most recently, newest first.'), box);
  into(box, 'Loading recent records…', () => api('/api/records?limit=25'), (r) => {
    if (r.total === 0) {
      return emptyBox('No records yet.', 'Publish one with ', h('code', {}, 'knowledge publish --store DIR note.md'), ', or let an agent remember something.');
    }
    return h('div', {}, h('ul', { class: 'records' }, r.records.map(recordItem)),
      h('p', { class: 'muted' }, `${r.total} record${r.total === 1 ? '' : 's'} in this store. `, h('a', { href: '#/browse' }, 'Browse all')));
  });
  return view;
}

function viewBrowse(params) {
  const limit = 50;
  const offset = Number(params.get('offset') ?? 0) || 0;
  const filters = {
    partition: params.get('partition') ?? undefined,
    kind: params.get('kind') ?? undefined,
    type: params.get('type') ?? undefined,
    tag: params.get('tag') ?? undefined,
    lifecycle: params.get('lifecycle') ?? undefined,
  };
  const form = filterForm('#/browse', [
    inputField('partition', 'Partition', filters.partition, { placeholder: 'private or conversation:<id>', autocomplete: 'off' }),
    selectField('kind', 'Kind', KINDS.map((k) => [k, k]), filters.kind),
    inputField('type', 'Type', filters.type, { placeholder: 'claim kind or relationship type', autocomplete: 'off' }),
    inputField('tag', 'Tag', filters.tag, { autocomplete: 'off' }),
    selectField('lifecycle', 'Lifecycle', LIFECYCLES.map((k) => [k, k]), filters.lifecycle),
  ], 'Show');
  const box = h('div');
  into(box, 'Loading records…', () => api(`/api/records${query({ ...filters, limit, offset: offset || undefined })}`), (r) => {
    if (r.total === 0) return emptyBox('No records match these filters.', h('a', { href: '#/browse' }, 'Clear the filters'));
    return h('div', {}, pager('#/browse', filters, offset, limit, r.records.length, r.total, r.nextOffset),
      h('ul', { class: 'records' }, r.records.map(recordItem)),
      pager('#/browse', filters, offset, limit, r.records.length, r.total, r.nextOffset));
  });
  return h('div', {}, h('h1', { tabindex: '-1' }, 'Browse'), h('p', { class: 'lede' }, 'Every record, by partition, kind, type, tag and lifecycle.'), form, box);
}

function viewSearch(params) {
  const limit = 20;
  const offset = Number(params.get('offset') ?? 0) || 0;
  const q = {
    q: params.get('q') ?? undefined,
    mode: params.get('mode') ?? undefined,
    kind: params.get('kind') ?? undefined,
    tag: params.get('tag') ?? undefined,
    lifecycle: params.get('lifecycle') ?? undefined,
    after: params.get('after') ?? undefined,
    before: params.get('before') ?? undefined,
  };
  const form = filterForm('#/search', [
    h('div', { class: 'field wide' }, h('label', { for: 'f-q' }, 'Words'), h('input', { id: 'f-q', name: 'q', type: 'search', value: q.q ?? '', maxlength: '500', autocomplete: 'off', placeholder: 'title, alias or body words' })),
    selectField('mode', 'Match', [['all', 'all words'], ['any', 'any word'], ['phrase', 'exact phrase']], q.mode, 'all words (default)'),
    selectField('kind', 'Kind', KINDS.map((k) => [k, k]), q.kind),
    inputField('tag', 'Tag', q.tag, { autocomplete: 'off' }),
    selectField('lifecycle', 'Lifecycle', LIFECYCLES.map((k) => [k, k]), q.lifecycle),
    inputField('after', 'Updated from', q.after, { type: 'date' }),
    inputField('before', 'Updated before', q.before, { type: 'date' }),
  ], 'Search');
  const box = h('div');
  if (!q.q) {
    box.append(emptyBox('Search titles, aliases and bodies.', 'Results are ranked by relevance (BM25): a match in the title counts most.'));
  } else {
    into(box, 'Searching…', () => api(`/api/search${query({ ...q, limit, offset: offset || undefined })}`), (r) => {
      if (r.total === 0) return emptyBox(`Nothing matches “${q.q}”.`, 'Try fewer words, “any word”, or other filters.');
      return h('div', {}, pager('#/search', q, offset, limit, r.results.length, r.total, r.nextOffset),
        h('ul', { class: 'records' }, r.results.map(recordItem)));
    });
  }
  return h('div', {}, h('h1', { tabindex: '-1' }, 'Search'), form, box);
}


// ---------------------------------------------------------------------------
// Router and shell

function parseRoute() {
  const raw = location.hash.startsWith('#/') ? location.hash.slice(2) : 'recent';
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const params = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  const parts = path.split('/').map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { name: parts[0] || 'recent', parts, params };
}

const TITLES = { recent: 'Recent', browse: 'Browse', search: 'Search', activity: 'Activity & issues' };

/** Move focus to the new view's heading after a navigation (not on first load), for keyboard and screen-reader users. */
function focusHeading(view) {
  view.querySelector('h1')?.focus({ preventScroll: true });
}

let routed = false;

function route() {
  const { name, parts, params } = parseRoute();
  let view;
  switch (name) {
    case 'recent': view = viewRecent(); break;
    case 'browse': view = viewBrowse(params); break;
    case 'search': view = viewSearch(params); break;
    case 'record': view = viewRecord(parts.slice(1).join('/'), routed ? focusHeading : null, route); break;
    case 'diff': view = viewDiff(parts.slice(1).join('/'), params); break;
    case 'activity': view = viewActivity(params, refreshNotice); break;
    default: view = h('div', {}, h('h1', { tabindex: '-1' }, 'Not found'), emptyBox('There is no such view.', h('a', { href: '#/recent' }, 'Go to Recent')));
  }
  document.title = `${TITLES[name] ?? 'Knowledge'} — Knowledge`;
  for (const a of document.querySelectorAll('[data-nav]')) {
    const current = a.getAttribute('data-nav') === name;
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren(view);
  window.scrollTo(0, 0);
  if (name !== 'record' && routed) focusHeading(view);
  routed = true;
}

async function refreshNotice() {
  try {
    const s = await api('/api/store');
    const notice = document.getElementById('notice');
    notice.hidden = !s.notice;
    notice.textContent = s.notice ?? '';
    document.getElementById('store-path').textContent = `${s.store}${s.writesEnabled ? '' : ' (read-only)'}`;
  } catch { /* the view shows the error */ }
}

/** What the shell shows besides the view: the store line, the notice, the issue count. */
async function refreshShell() {
  await refreshNotice();
  try { setIssueCount(await api('/api/activity')); } catch { /* shown by the views */ }
}

async function start() {
  takeTokenFromHash();
  // After a token is entered in the form: the view and the shell, which could not load without it.
  onRerender(() => { route(); void refreshShell(); });
  window.addEventListener('hashchange', () => { if (location.hash.startsWith('#/') || location.hash === '') route(); });
  document.getElementById('quick-search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = ev.target.elements.q.value.trim();
    location.hash = `#/search${query({ q })}`;
  });
  // "/" jumps to the search box, as on many sites.
  document.addEventListener('keydown', (ev) => {
    if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t instanceof window.HTMLInputElement || t instanceof window.HTMLTextAreaElement || t instanceof window.HTMLSelectElement) return;
    ev.preventDefault();
    document.getElementById('quick-q').focus();
  });
  document.getElementById('skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    (main.querySelector('h1') ?? main).focus();
  });
  route();
  await refreshShell();
}

start();

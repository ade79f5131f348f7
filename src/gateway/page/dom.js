/* global document, window, sessionStorage, Node */
/**
 * DOM helpers and the designed states (loading, empty, error) of the
 * Knowledge page. The one way text reaches the DOM: `h`/`add` append strings
 * as text nodes, never as markup.
 */
import { TOKEN_KEY } from './api.js';

let rerender = () => {};
/** The router registers how to redraw the current view (after a token is entered). */
export function onRerender(fn) {
  rerender = fn;
}

// ---------------------------------------------------------------------------
// DOM and formatting helpers

/** Build an element; string children become text nodes, never markup. */
export function h(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  return add(e, ...children);
}

/** Append children: strings become text nodes, arrays are flattened, null/undefined/false are skipped. */
export function add(parent, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(c instanceof Node ? c : String(c));
  }
  return parent;
}

export const enc = encodeURIComponent;
const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function when(iso) {
  const d = new Date(iso);
  return h('time', { datetime: iso, title: iso }, Number.isNaN(d.getTime()) ? iso : dateFmt.format(d));
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

export const short = (commit) => (commit ? commit.slice(0, 10) : '');

export function badge(text, cls = '') {
  return h('span', { class: `badge ${cls}`.trim() }, text);
}

export function announce(text) {
  const live = document.getElementById('live');
  live.textContent = '';
  // A fresh text node makes screen readers speak it even when it repeats.
  window.setTimeout(() => { live.textContent = text; }, 30);
}

export function section(title, ...content) {
  const id = `sec-${title.toLowerCase().replace(/[^a-z]+/g, '-')}`;
  return h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id }, title), ...content);
}


// ---------------------------------------------------------------------------
// Designed states: loading, empty, error

export function loadingBox(label) {
  return h('div', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), ` ${label}`);
}

export function emptyBox(title, ...hint) {
  return h('div', { class: 'state empty' }, h('p', { class: 'state-title' }, title), hint.length ? h('p', {}, ...hint) : null);
}

export function errorBox(err, retry) {
  const again = retry ? h('button', { type: 'button', class: 'button', onclick: retry }, 'Try again') : null;
  if (err.code === 'E_UNAUTHORIZED') {
    const input = h('input', { type: 'password', id: 'token-input', autocomplete: 'off', required: true, minlength: '16' });
    const form = h('form', { class: 'token-form', onsubmit: (ev) => { ev.preventDefault(); sessionStorage.setItem(TOKEN_KEY, input.value.trim()); rerender(); } },
      h('label', { for: 'token-input' }, 'Token'), input, h('button', { type: 'submit', class: 'button primary' }, 'Use token'));
    return h('div', { class: 'state error', role: 'alert' },
      h('p', { class: 'state-title' }, 'This Gateway needs its token'),
      h('p', {}, 'Open the address printed by ', h('code', {}, 'knowledge serve'), ' (it ends in #token=…), or paste the token here. It is kept for this tab only.'),
      form);
  }
  if (err.code === 'E_UNAVAILABLE') {
    return h('div', { class: 'state error', role: 'alert' },
      h('p', { class: 'state-title' }, 'The store is unavailable'),
      h('p', {}, err.message),
      h('p', {}, 'Knowledge never recreates a missing store empty. Put the store folder back (vault/, vault/vault.json and state.sqlite together), then try again.'),
      again);
  }
  if (err.code === 'E_NETWORK') {
    return h('div', { class: 'state error', role: 'alert' }, h('p', { class: 'state-title' }, 'The Gateway is not answering'), h('p', {}, err.message), again);
  }
  if (err.code === 'E_NOT_FOUND') {
    return h('div', { class: 'state error', role: 'alert' }, h('p', { class: 'state-title' }, 'Not found'), h('p', {}, err.message),
      h('p', {}, h('a', { href: '#/search' }, 'Search the store'), ' or ', h('a', { href: '#/browse' }, 'browse every record'), '.'));
  }
  return h('div', { class: 'state error', role: 'alert' },
    h('p', { class: 'state-title' }, 'Something went wrong'),
    h('p', {}, h('code', {}, err.code ?? 'E_INTERNAL'), ' ', err.message ?? String(err)),
    again);
}

/** Run `load` into `box`, showing a loading state and, on failure, an error state with a retry. */
export async function into(box, label, load, render) {
  box.replaceChildren(loadingBox(label));
  box.setAttribute('aria-busy', 'true');
  try {
    const data = await load();
    box.replaceChildren(render(data));
  } catch (err) {
    box.replaceChildren(errorBox(err, () => into(box, label, load, render)));
  } finally {
    box.removeAttribute('aria-busy');
  }
}


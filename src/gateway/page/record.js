/* global document, location */
/**
 * A record's page [SURF-2, READ-2]: body, frontmatter, evidence, links,
 * backlinks and its revision history from Git, and the diff view.
 */
import { renderMarkdown, recordHref } from './markdown.js';
import { api, query } from './api.js';
import { h, add, enc, when, bytes, short, badge, section, loadingBox, emptyBox, errorBox, into } from './dom.js';

function metaValue(v) {
  if (Array.isArray(v)) {
    if (v.every((x) => typeof x !== 'object' || x === null)) return v.length ? v.join(', ') : '—';
    return h('pre', { class: 'inline-json' }, JSON.stringify(v, null, 2));
  }
  if (v !== null && typeof v === 'object') return h('pre', { class: 'inline-json' }, JSON.stringify(v, null, 2));
  return String(v);
}

function evidenceItem(e) {
  const cite = e.citation ?? {};
  const citeBits = [
    cite.lines ? `lines ${Array.isArray(cite.lines) ? cite.lines.join('–') : cite.lines}` : null,
    cite.quote ? `“${cite.quote}”` : null,
  ].filter(Boolean).join(' · ');
  if (!e.known) {
    return h('li', { class: 'evidence missing' }, h('code', {}, e.sourceId), ' — not a source this store knows.', citeBits ? h('p', {}, citeBits) : null);
  }
  return h('li', { class: 'evidence' },
    h('div', { class: 'evidence-head' }, h('strong', {}, e.path.split('/').pop()), ' ', badge(e.mediaType), ' ', badge(bytes(e.size)),
      e.inHistory ? badge('in Git history', 'ok') : badge('kept out of Git history', 'warn')),
    citeBits ? h('p', { class: 'citation' }, citeBits) : null,
    h('dl', { class: 'facts' },
      h('dt', {}, 'Source id'), h('dd', {}, h('code', {}, e.sourceId)),
      h('dt', {}, 'Retained at'), h('dd', {}, h('code', {}, e.path)),
      h('dt', {}, 'Descriptor'), h('dd', {}, h('code', {}, e.descriptorPath)),
      h('dt', {}, 'SHA-256'), h('dd', {}, h('code', { class: 'hash' }, e.sha256)),
      e.attributions?.length ? [h('dt', {}, 'Attribution'), h('dd', {}, e.attributions.map((a) => h('div', {}, a.attribution, a.at ? [' · ', when(a.at)] : null)))] : null));
}

export function actorBadge(actor) {
  return badge(actor, `actor actor-${actor}`);
}

/** `loaded`: the history already fetched, shown at first (a retry fetches it again). */
function historyPanel(id, title, loaded = null) {
  const box = h('div');
  let first = loaded;
  const load = () => {
    const given = first;
    first = null;
    return given ? Promise.resolve(given) : api(`/api/records/${enc(id)}/history`);
  };
  into(box, 'Reading the Git history…', load, (hist) => {
    const notes = [];
    if (hist.git.state === 'absent') notes.push(h('p', { class: 'note' }, 'No Git history yet: ', hist.git.reason));
    if (hist.git.state === 'pending' || hist.git.state === 'unavailable') {
      notes.push(h('p', { class: 'note warn' }, `Git history cannot be read right now (${hist.git.state}${hist.git.code ? `, ${hist.git.code}` : ''}): `, hist.git.reason));
    }
    if (hist.queued > 0) {
      notes.push(h('p', { class: 'note warn' }, `${hist.queued} newer version${hist.queued === 1 ? ' is' : 's are'} waiting for a checkpoint. `, h('a', { href: '#/activity?show=issues' }, 'See Activity & issues'), '.'));
    }
    if (hist.offBranch) {
      notes.push(h('p', { class: 'note warn' }, `${hist.offBranch} commit${hist.offBranch === 1 ? '' : 's'} Knowledge made of this record's file ${hist.offBranch === 1 ? 'is' : 'are'} not on the branch (was it reset, or .git replaced?); `, h('code', {}, 'knowledge verify'), ' names them.'));
    }
    if (hist.versions.length === 0) return h('div', {}, notes, emptyBox('No committed versions yet.'));
    const name = `v-${Math.random().toString(36).slice(2)}`;
    const compare = h('button', { type: 'button', class: 'button primary' }, 'Compare selected versions');
    // Pick two versions to compare (only when there are two).
    const several = hist.versions.length > 1;
    const rows = hist.versions.map((v, k) => {
      const older = hist.versions[k + 1];
      return h('tr', {},
        several ? h('td', { class: 'pick' },
          h('input', { type: 'radio', name: `${name}-from`, value: v.commit, 'aria-label': `compare from ${short(v.commit)}`, checked: k === 1 }),
          h('input', { type: 'radio', name: `${name}-to`, value: v.commit, 'aria-label': `compare to ${short(v.commit)}`, checked: k === 0 })) : null,
        h('td', {}, h('code', { title: v.commit }, short(v.commit))),
        h('td', {}, v.revision === null ? '—' : `r${v.revision}`),
        h('td', {}, when(v.date)),
        h('td', {}, actorBadge(v.actor)),
        h('td', { class: 'subject' }, v.subject),
        h('td', {}, older ? h('a', { href: `#/diff/${enc(id)}${query({ from: older.commit, to: v.commit })}`, 'aria-label': `changes in ${short(v.commit)}` }, 'changes') : h('span', { class: 'muted' }, 'first')));
    });
    const table = h('div', { class: 'table-scroll' }, h('table', { class: 'history' },
      h('caption', { class: 'sr-only' }, `Committed versions of ${title}, newest first`),
      h('thead', {}, h('tr', {}, several ? h('th', { scope: 'col' }, 'From / to') : null, h('th', { scope: 'col' }, 'Commit'), h('th', { scope: 'col' }, 'Rev.'), h('th', { scope: 'col' }, 'Date'),
        h('th', { scope: 'col' }, 'Actor'), h('th', { scope: 'col', class: 'subject-col' }, 'Subject'), h('th', { scope: 'col' }, 'Diff'))),
      h('tbody', {}, rows)));
    compare.addEventListener('click', () => {
      const from = box.querySelector(`input[name="${name}-from"]:checked`)?.value;
      const to = box.querySelector(`input[name="${name}-to"]:checked`)?.value;
      if (!from || !to) return;
      location.hash = `#/diff/${enc(id)}${query({ from, to })}`;
    });
    return h('div', {}, notes, table, several ? h('div', { class: 'row-actions' }, compare) : null,
      h('p', { class: 'muted small' }, 'Actor labels (agent, operator, external) are coarse provenance from commit trailers, not authenticated identity.'));
  });
  return box;
}

/** `focus` moves focus to the heading once loaded (null on the first view of a visit). */
export function viewRecord(id, focus, retry) {
  const view = h('div', {}, loadingBox('Loading the record…'));
  api(`/api/records/${enc(id)}`).then((v) => {
    const r = v.record;
    document.title = `${r.title} — Knowledge`;
    const m = r.meta ?? {};
    const sub = m.claim_kind ? `claim · ${m.claim_kind}` : m.relationship_type ? `relationship · ${m.relationship_type}` : r.kind;
    const warnings = [];
    if (r.onDisk === 'changed') warnings.push(h('p', { class: 'note warn', role: 'note' }, 'The file on disk was edited outside Knowledge since it was indexed. The next scan records the change; the raw file below shows what is on disk now.'));
    if (r.onDisk === 'missing') warnings.push(h('p', { class: 'note warn', role: 'note' }, 'The file is missing from the vault. The next scan records the deletion.'));
    const body = h('article', { class: 'markdown' });
    if (r.body.trim()) body.append(renderMarkdown(r.body, document, { headingOffset: 1 }));
    else body.append(h('p', { class: 'muted' }, 'This record has no body.'));
    const metaList = h('dl', { class: 'facts' }, Object.entries(m).flatMap(([k, val]) => [h('dt', {}, k), h('dd', {}, metaValue(val))]));
    const rel = m.from && m.to
      ? h('p', { class: 'relationship' }, h('a', { href: recordHref(String(m.from)) }, String(m.from)), ` — ${m.relationship_type ?? 'relates to'} → `, h('a', { href: recordHref(String(m.to)) }, String(m.to)))
      : null;
    view.replaceChildren();
    add(view,
      h('p', { class: 'crumbs' }, h('a', { href: `#/browse${query({ partition: r.partition })}` }, r.partition), ' / ', h('code', {}, r.path)),
      h('h1', { tabindex: '-1' }, r.title),
      h('div', { class: 'meta-line' }, badge(sub, `kind-${r.kind}`), badge(r.lifecycle, r.lifecycle === 'active' ? 'ok' : 'lifecycle'), badge(`revision ${r.revision}`),
        h('span', { class: 'muted' }, 'updated ', when(r.updatedAt), ' · recorded ', when(r.recordedAt)),
        h('span', { class: 'muted' }, 'id ', h('code', {}, r.id))),
      r.tags.length ? h('div', { class: 'tags' }, r.tags.map((t) => h('a', { class: 'tag', href: `#/browse${query({ tag: t })}` }, `#${t}`))) : null,
      r.aliases.length ? h('p', { class: 'muted' }, 'Also known as: ', r.aliases.join(', ')) : null,
      warnings,
      rel,
      h('div', { class: 'record-grid' },
        h('div', { class: 'record-main' },
          section('Content', body),
          section('History', historyPanel(r.id, r.title))),
        h('aside', { class: 'record-side' },
          section(`Evidence (${v.evidence.length})`, v.evidence.length ? h('ul', { class: 'evidence-list' }, v.evidence.map(evidenceItem)) : h('p', { class: 'muted' }, r.kind === 'page' ? 'No evidence cited (pages may cite evidence).' : 'No evidence cited.')),
          section(`Links (${v.links.length})`, v.links.length ? h('ul', { class: 'links' }, v.links.map((l) => h('li', {}, h('a', { href: recordHref(l) }, l)))) : h('p', { class: 'muted' }, 'This record links to no other record.')),
          section(`Backlinks (${v.backlinksTotal})`, v.backlinks.length ? h('ul', { class: 'links' }, v.backlinks.map((b) => h('li', {}, h('a', { href: recordHref(b.id) }, b.title), ' ', h('span', { class: 'muted' }, b.kind)))) : h('p', { class: 'muted' }, 'No record links here.'),
            v.backlinksTotal > v.backlinks.length ? h('p', { class: 'muted' }, `Showing the newest ${v.backlinks.length}.`) : null),
          section('Frontmatter', metaList,
            h('details', { class: 'raw' }, h('summary', {}, 'Raw file'), r.text === null ? h('p', { class: 'muted' }, 'The file is missing.') : h('pre', {}, r.text))))));
    focus?.(view);
  }).catch(async (err) => {
    // A record whose file was deleted: its committed versions are still in the history [READ-2].
    const gone = err.code === 'E_NOT_FOUND' ? await api(`/api/records/${enc(id)}/history`).catch(() => null) : null;
    if (gone && gone.versions.length > 0) {
      document.title = `${id} (deleted) — Knowledge`;
      view.replaceChildren(
        h('p', { class: 'crumbs' }, h('code', {}, gone.path)),
        h('h1', { tabindex: '-1' }, id, ' ', h('span', { class: 'muted' }, '(deleted)')),
        h('p', { class: 'note warn', role: 'note' }, 'This record\'s file was deleted from the vault. Every committed version stays in the Git history below; compare them, or restore one with git.'),
        section('History', historyPanel(id, id, gone)));
      focus?.(view);
      return;
    }
    view.replaceChildren(errorBox(err, retry));
  });
  return view;
}

function patchNode(patch) {
  const pre = h('pre', { class: 'diff', tabindex: '0', 'aria-label': 'Unified diff' });
  for (const line of patch.split('\n')) {
    const cls = line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ') || line.startsWith('index ') ? 'meta'
      : line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : 'ctx';
    pre.append(h('span', { class: `line ${cls}` }, line), '\n');
  }
  return pre;
}

export function viewDiff(id, params) {
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  const box = h('div');
  const view = h('div', {}, h('p', { class: 'crumbs' }, h('a', { href: recordHref(id) }, '← Back to the record')), h('h1', { tabindex: '-1' }, 'Changes'), box);
  // A deleted record has no current view, only its history and diffs: its id stands for its title.
  const current = api(`/api/records/${enc(id)}`).catch((err) => (err.code === 'E_NOT_FOUND' ? { record: { title: id } } : Promise.reject(err)));
  into(box, 'Computing the diff…', () => Promise.all([current, api(`/api/records/${enc(id)}/history`), api(`/api/records/${enc(id)}/diff${query({ from, to })}`)]), ([v, hist, diff]) => {
    document.title = `Changes to ${v.record.title} — Knowledge`;
    const vf = hist.versions.find((x) => x.commit === diff.from);
    const vt = hist.versions.find((x) => x.commit === diff.to);
    const side = (label, ver, commit) => h('div', { class: 'diff-side' }, h('span', { class: 'muted' }, label), ' ', h('code', { title: commit }, short(commit)),
      ver ? [' ', ver.revision !== null ? `r${ver.revision}` : '', ' · ', when(ver.date), ' · ', actorBadge(ver.actor), h('div', { class: 'subject' }, ver.subject)] : null);
    return h('div', {},
      h('p', {}, h('a', { href: recordHref(id) }, v.record.title), ' ', h('code', { class: 'muted' }, diff.path)),
      h('div', { class: 'diff-sides' }, side('from', vf, diff.from), side('to', vt, diff.to)),
      diff.patch.trim() ? patchNode(diff.patch) : emptyBox('These two versions are identical.'));
  });
  return view;
}


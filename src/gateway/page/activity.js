/* global document */
/**
 * Activity & issues [SURF-2, GIT-14, GIT-16]: every publication, attachment
 * and scan with its Git state, the reason and what to do about a pending
 * one, a scan's validation findings, and Retry, which updates the entry in
 * place (no reload). Nothing here retries by itself.
 */
import { recordHref } from './markdown.js';
import { api } from './api.js';
import { h, add, enc, when, bytes, short, badge, section, announce, loadingBox, emptyBox, errorBox, into } from './dom.js';
import { actorBadge } from './record.js';


/** What a person can do about each pending reason (the reason itself says what Git found). */
const HINTS = {
  locked: 'A Git lock file is in the way. If no git command is running, the lock is stale: delete the file named above yourself (Knowledge never removes a lock another program left), then press Retry.',
  'detached-head': 'The vault repository is on a detached HEAD. Check out a branch (git -C <vault> switch main), then press Retry.',
  'unborn-branch': 'The current branch has no commit and cannot be used as is. Check out a branch with history, then press Retry.',
  'linked-worktree': 'The vault is a linked worktree or uses a separate git dir; Knowledge only commits to a repository whose .git folder is inside the vault.',
  'operation-in-progress': 'A merge, rebase, cherry-pick, revert or bisect is in progress in the vault repository. Finish or abort it, then press Retry.',
  unmerged: 'The vault repository has unmerged paths. Resolve them, then press Retry.',
  malformed: 'The vault repository looks damaged. Inspect it with git fsck; Knowledge never repairs or re-initialises .git.',
  permission: 'Knowledge may not write the vault repository. Fix the permissions of vault/.git, then press Retry.',
  'disk-full': 'The disk holding the vault repository is full. Free some space, then press Retry.',
  'dubious-ownership': 'Git refuses a repository owned by another user. Run Knowledge as the owner of the vault, then press Retry.',
  'branch-moved': 'The branch moved while Knowledge was committing. Press Retry.',
  'not-vault-root': 'The repository found is not rooted at the vault.',
  timeout: 'Git took too long. Press Retry.',
  'git-error': 'Git reported an error (see above). Fix it, then press Retry.',
  waiting: 'This checkpoint waits for an earlier one: fix that one and press Retry (every waiting checkpoint is then committed, in order).',
  abandoned: 'This publication was never applied: a file it would write changed on disk before it could be installed. No retry can apply it; publish it again if it is still wanted.',
};

function gitStateNode(git) {
  switch (git.state) {
    case 'committed':
      return h('span', { class: 'state-chip committed' }, 'committed', git.commit ? [' ', h('code', { title: git.commit }, short(git.commit))] : null);
    case 'pending':
      return h('span', { class: 'state-chip pending' }, 'pending', ' · ', git.code);
    case 'unavailable':
      return h('span', { class: 'state-chip unavailable' }, 'unavailable');
    default:
      return h('span', { class: 'state-chip' }, String(git.state));
  }
}

const isIssue = (e) => e.git.state !== 'committed';
/** An abandoned publication is an issue nothing can retry (resume would refuse it). */
const isRetryable = (e) => isIssue(e) && e.git.code !== 'abandoned';

function entryTitle(e) {
  const d = e.detail ?? {};
  if (e.kind === 'publication') {
    const what = typeof d.title === 'string' ? `Published “${d.title}”${d.records > 1 ? ` and ${d.records - 1} more` : ''}` : 'Publication';
    return `${what}${d.partition ? ` in ${d.partition}` : ''}`;
  }
  if (e.kind === 'attachment') return `Attachment${d.filename ? ` ${d.filename}` : ''}`;
  const counts = ['added', 'modified', 'deleted', 'renamed'].filter((k) => d[k]).map((k) => `${d[k]} ${k}`).join(', ');
  return `Scan${d.partition ? ` of ${d.partition}` : ''}${d.baseline ? ' (baseline)' : ''}${counts ? `: ${counts}` : ''}`;
}

async function loadDetails(e) {
  if (e.kind === 'publication') {
    const r = await api(`/api/publications/${enc(e.id)}`);
    return h('div', {},
      h('p', {}, 'Request ', h('code', {}, r.requestId)),
      h('ul', { class: 'links' }, r.records.map((x) => h('li', {}, h('a', { href: recordHref(x.id) }, x.id), ` r${x.revision} `, h('code', { class: 'muted' }, x.path)))),
      r.evidence.length ? h('ul', { class: 'links' }, r.evidence.map((x) => h('li', {}, 'evidence ', h('code', {}, x.path), ` ${bytes(x.size)}${x.inHistory ? '' : ' (kept out of history)'}`))) : null);
  }
  if (e.kind === 'attachment') {
    const r = await api(`/api/attachments/${enc(e.id)}`);
    return h('dl', { class: 'facts' }, h('dt', {}, 'File'), h('dd', {}, h('code', {}, r.path)), h('dt', {}, 'Size'), h('dd', {}, bytes(r.size)),
      h('dt', {}, 'Media type'), h('dd', {}, r.mediaType), h('dt', {}, 'SHA-256'), h('dd', {}, h('code', { class: 'hash' }, r.sha256)),
      h('dt', {}, 'History'), h('dd', {}, r.inHistory ? 'exact copy in Git history' : 'kept out of Git history (media, or 100 MiB or more)'));
  }
  const r = await api(`/api/scans/${enc(e.id)}`);
  return scanSummary(r);
}

function findingsList(diags) {
  if (!diags.length) return h('p', { class: 'muted' }, 'No validation findings.');
  return h('ul', { class: 'findings' }, diags.map((d) => h('li', {}, badge(d.code, 'warn'), ' ', h('code', {}, d.path), ' — ', d.reason)));
}

function scanSummary(r) {
  const paths = (label, list) => (list.length ? h('div', {}, h('strong', {}, `${label} (${list.length})`), h('ul', { class: 'links' }, list.slice(0, 50).map((p) => h('li', {}, h('code', {}, typeof p === 'string' ? p : `${p.from} → ${p.to}${p.edited ? ' (and edited)' : ''}`))))) : null);
  return h('div', { class: 'scan-summary' },
    h('p', {}, `Walked ${r.partitions.join(', ') || 'nothing'}: ${r.hashed} file(s) read, ${r.unchanged} recognised unchanged.`),
    paths('Added', r.added), paths('Modified', r.modified), paths('Deleted', r.deleted), paths('Renamed', r.renamed),
    h('h3', {}, `Validation findings (${r.diagnostics.length + (r.diagnosticsOmitted ?? 0)})`), findingsList(r.diagnostics),
    r.diagnosticsOmitted ? h('p', { class: 'muted' }, `… and ${r.diagnosticsOmitted} more findings, not kept with this scan's receipt: Scan the vault to list those that stand now.`) : null);
}

function activityEntry(e, onRetried) {
  const d = e.detail ?? {};
  const headingId = `entry-${e.kind}-${e.id}`;
  const li = h('li', { class: `entry ${isIssue(e) ? 'issue' : ''}`, 'data-entry-id': e.id, 'data-state': e.git.state });
  const retryBtn = isRetryable(e) ? h('button', { type: 'button', class: 'button primary retry', 'aria-describedby': headingId }, 'Retry') : null;
  const errorSlot = h('div', { class: 'entry-error' });
  const details = h('details', { class: 'entry-details' }, h('summary', {}, 'Details'));
  let loaded = false;
  details.addEventListener('toggle', () => {
    if (!details.open || loaded) return;
    loaded = true;
    const box = h('div');
    details.append(box);
    into(box, 'Loading the receipt…', () => loadDetails(e), (node) => node);
  });
  add(li,
    h('div', { class: 'entry-head' },
      h('h3', { id: headingId }, badge(e.kind, `kind-${e.kind}`), ' ', entryTitle(e)),
      gitStateNode(e.git)),
    h('div', { class: 'meta-line' }, when(e.createdAt), actorBadge(e.actor), h('code', { class: 'muted', title: 'id' }, e.id),
      d.status && d.status !== 'acknowledged' && d.status !== 'completed' ? badge(String(d.status), 'warn') : null),
    e.kind === 'scan' && d.diagnostics ? h('p', { class: 'note warn' }, `${d.diagnostics} validation finding${d.diagnostics === 1 ? '' : 's'} — open Details to see them.`) : null,
    e.git.state !== 'committed' ? h('div', { class: 'reason' },
      h('p', { class: 'reason-text' }, e.git.reason),
      h('p', { class: 'hint' }, e.git.state === 'unavailable'
        ? 'Git cannot be run at all. Install Git (2.36 or newer) or fix KNOWLEDGE_GIT, then press Retry: every queued version is committed in order.'
        : HINTS[e.git.code] ?? 'Fix the repository, then press Retry.')) : null,
    retryBtn ? h('div', { class: 'row-actions' }, retryBtn) : null,
    errorSlot,
    details);
  if (retryBtn) {
    retryBtn.addEventListener('click', async () => {
      retryBtn.disabled = true;
      retryBtn.textContent = 'Retrying…';
      li.setAttribute('aria-busy', 'true');
      errorSlot.replaceChildren();
      try {
        let git;
        if (e.kind === 'publication') git = (await api(`/api/publications/${enc(e.id)}/resume`, { method: 'POST' })).git;
        else if (e.kind === 'attachment') git = (await api(`/api/attachments/${enc(e.id)}/resume`, { method: 'POST' })).git;
        else {
          // [GIT-16] any scan retries every waiting checkpoint; then read this scan's own state.
          await api('/api/scan', { method: 'POST', body: d.partition && d.partition !== 'all' ? { partition: d.partition } : {} });
          git = (await api(`/api/scans/${enc(e.id)}`)).git ?? e.git;
        }
        const next = activityEntry({ ...e, git }, onRetried);
        li.replaceWith(next);
        announce(git.state === 'committed' ? `Checkpoint committed: ${short(git.commit)}` : `Still ${git.state}: ${git.reason}`);
        next.querySelector('.state-chip')?.setAttribute('tabindex', '-1');
        next.querySelector('.state-chip')?.focus();
        onRetried?.();
      } catch (err) {
        li.removeAttribute('aria-busy');
        retryBtn.disabled = false;
        retryBtn.textContent = 'Retry';
        errorSlot.replaceChildren(h('p', { class: 'note error', role: 'alert' }, h('code', {}, err.code), ' ', err.message));
      }
    });
  }
  return li;
}

export function setIssueCount(entries) {
  const n = entries.filter(isIssue).length;
  const el = document.getElementById('issue-count');
  el.hidden = n === 0;
  el.textContent = String(n);
  el.setAttribute('aria-label', `${n} issue${n === 1 ? '' : 's'}`);
}

/** `onChange` is told after a retry or scan changed something (the shell refreshes its banner). */
/** Entries a page of Activity shows; older ones are a page further (`offset`). */
const PAGE = 200;
/** The API's largest offset (read/query.ts MAX_OFFSET). */
const MAX_OFFSET = 1_000_000;

export function viewActivity(params, onChange) {
  const onlyIssues = params.get('show') === 'issues';
  // At most the API's own largest offset; one entry more than a page is asked for, to know whether older ones exist.
  const offset = /^\d{1,7}$/.test(params.get('offset') ?? '') ? Math.min(Number(params.get('offset')), MAX_OFFSET) : 0;
  const pageUrl = `/api/activity?limit=${PAGE + 1}${offset ? `&offset=${offset}` : ''}`;
  const pageHref = (o) => `#/activity${[onlyIssues ? 'show=issues' : '', o ? `offset=${o}` : ''].filter(Boolean).join('&').replace(/^./, (c) => `?${c}`)}`;
  const box = h('div');
  const summary = h('div', { class: 'summary', role: 'status' });
  const scanResult = h('div');
  const refreshBtn = h('button', { type: 'button', class: 'button' }, 'Refresh');
  const scanBtn = h('button', { type: 'button', class: 'button' }, 'Scan the vault');
  const toggle = h('div', { class: 'segmented', role: 'group', 'aria-label': 'Show' },
    h('a', { class: 'button', href: '#/activity', 'aria-current': onlyIssues ? null : 'true' }, 'Everything'),
    h('a', { class: 'button', href: '#/activity?show=issues', 'aria-current': onlyIssues ? 'true' : null }, 'Issues only'));

  const renderList = (asked) => {
    const more = asked.length > PAGE;
    const entries = asked.slice(0, PAGE);
    setIssueCount(entries);
    const issues = entries.filter(isIssue);
    summary.replaceChildren(issues.length
      ? h('p', { class: 'note warn' }, `${issues.length} checkpoint${issues.length === 1 ? ' is' : 's are'} not in Git yet. Your records are safe in the vault and the journal; fix the reason shown and press Retry.`)
      : h('p', { class: 'note ok' }, entries.length ? 'Every publication, attachment and scan is committed to the local Git history.' : ''));
    const shown = onlyIssues ? issues : entries;
    if (shown.length === 0) {
      if (offset > 0) return h('div', {}, emptyBox(onlyIssues && entries.length ? 'No issues on this page.' : 'No entries this far back.', h('a', { href: pageHref(0) }, 'Show the newest')), olderNewer(entries.length, more));
      return onlyIssues && entries.length
        ? emptyBox('No issues.', 'Every checkpoint is committed. ', h('a', { href: '#/activity' }, 'Show everything'))
        : emptyBox('No activity yet.', 'Publications, attachments and scans appear here with their Git state.');
    }
    return h('div', {}, h('ol', { class: 'entries' }, shown.map((e) => activityEntry(e, quietRefresh))), olderNewer(entries.length, more));
  };
  // Every entry can be reached: a full page has older ones after it.
  const olderNewer = (returned, more) => (offset > 0 || more
    ? h('nav', { class: 'pager', 'aria-label': 'Pages' },
      h('span', { class: 'muted' }, returned ? `entries ${offset + 1}–${offset + returned}, newest first` : 'no entries this far back'),
      offset > 0 ? h('a', { class: 'button', href: pageHref(Math.max(0, offset - PAGE)) }, '← Newer') : null,
      more && offset + PAGE <= MAX_OFFSET ? h('a', { class: 'button', href: pageHref(offset + PAGE) }, 'Older →') : null)
    : null);

  // After a retry other entries may have changed too (batches commit in order):
  // update the list in place, keeping the retried entry's focus.
  async function quietRefresh() {
    try {
      const entries = (await api(pageUrl)).slice(0, PAGE);
      setIssueCount(entries);
      const list = box.querySelector('ol.entries');
      if (!list) return;
      const byId = new Map(entries.map((e) => [e.id, e]));
      for (const li of [...list.children]) {
        const e = byId.get(li.getAttribute('data-entry-id'));
        if (e && e.git.state !== li.getAttribute('data-state') && !li.contains(document.activeElement)) li.replaceWith(activityEntry(e, quietRefresh));
      }
      const issues = entries.filter(isIssue).length;
      summary.replaceChildren(issues ? h('p', { class: 'note warn' }, `${issues} checkpoint${issues === 1 ? ' is' : 's are'} not in Git yet.`) : h('p', { class: 'note ok' }, 'Every publication, attachment and scan is committed to the local Git history.'));
      onChange?.();
    } catch { /* the next explicit refresh shows the error */ }
  }

  const load = () => into(box, 'Loading activity…', () => api(pageUrl), renderList);
  refreshBtn.addEventListener('click', load);
  scanBtn.addEventListener('click', async () => {
    scanBtn.disabled = true;
    scanBtn.textContent = 'Scanning…';
    scanResult.replaceChildren(loadingBox('Scanning every partition…'));
    try {
      const r = await api('/api/scan', { method: 'POST', body: {} });
      const retried = r.retried?.length ? h('p', {}, `Retried ${r.retried.length} waiting checkpoint(s): `, r.retried.map((x) => [x.kind, ' ', gitStateNode(x.git), ' '])) : null;
      scanResult.replaceChildren(section('Scan result', h('p', {}, r.git ? ['Checkpoint: ', gitStateNode(r.git)] : 'Nothing changed outside Knowledge; no checkpoint needed.'), retried, scanSummary(r)));
      announce(`Scan finished: ${r.diagnostics.length} validation finding(s).`);
      void quietRefresh();
      if (r.git) load();
    } catch (err) {
      scanResult.replaceChildren(errorBox(err));
    } finally {
      scanBtn.disabled = false;
      scanBtn.textContent = 'Scan the vault';
    }
  });
  load();
  return h('div', {},
    h('h1', { tabindex: '-1' }, 'Activity & issues'),
    h('p', { class: 'lede' }, 'Every publication, attachment and scan with its Git checkpoint. Nothing retries in the background: fix the reason, then press Retry.'),
    h('div', { class: 'toolbar' }, toggle, refreshBtn, scanBtn),
    summary, scanResult, box);
}


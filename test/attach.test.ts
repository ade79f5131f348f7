import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appendFileSync, closeSync, existsSync, linkSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import YAML from 'yaml';
import { makeSandbox, storeSandbox, cli, cliPath, userGit, canMountTmpfs, runUnshared, type Sandbox } from './helpers.js';
import { KnowledgeService } from '../src/service.js';
import { isKnowledgeError } from '../src/errors.js';

/**
 * Attachments [ATT-1..3] and the history rule for originals [GIT-9], driven
 * through the real CLI (`knowledge attach FILE`) and, for the chunk protocol
 * that the Gateway and agent tools expose, through the core service itself.
 */
let sb: Sandbox;
let store: string;
let vault: string;
beforeEach(() => {
  ({ sb, vault } = storeSandbox());
  store = join(sb.dir, 'st');
});
afterEach(() => sb.cleanup());

const MiB = 1024 * 1024;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const fileSha = (p: string) => sha(readFileSync(p));

function write(name: string, data: string | Buffer): string {
  writeFileSync(join(sb.dir, name), data);
  return name;
}

/** A text file of `bytes` bytes written in 1 MiB pieces (never whole in memory); `seed` makes its content unique. */
function textFile(name: string, bytes: number, seed: string): string {
  const line = Buffer.from(`${seed} ${'lorem ipsum dolor sit amet '.repeat(3)}\n`);
  const block = Buffer.alloc(MiB);
  for (let i = 0; i < MiB; i++) block[i] = line[i % line.length]!;
  const fd = openSync(join(sb.dir, name), 'w');
  try {
    for (let left = bytes; left > 0; left -= MiB) writeSync(fd, block, 0, Math.min(MiB, left));
  } finally {
    closeSync(fd);
  }
  return name;
}

function attach(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = cli(sb, ['attach', '--store', 'st', '--json', ...args], { env });
  return { ...r, receipt: r.code === 0 ? JSON.parse(r.stdout) : null };
}

function activity(): Array<{ kind: string; id: string; actor: string; git: { state: string }; detail: Record<string, unknown> }> {
  const r = cli(sb, ['activity', '--store', 'st', '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

function treeFiles(rev = 'HEAD'): string[] {
  return userGit(sb, vault, ['ls-tree', '-r', '--name-only', rev]).trim().split('\n').filter(Boolean);
}

function commitsFor(attachmentId: string): string[] {
  return userGit(sb, vault, ['log', '--format=%H', `--grep=Knowledge-Attachment: ${attachmentId}`, 'main']).trim().split('\n').filter(Boolean);
}

function partFiles(): string[] {
  const dir = join(vault, '.knowledge-history', 'uploads');
  return existsSync(dir) ? readdirSync(dir) : [];
}

function db<T>(fn: (d: Database.Database) => T): T {
  const d = new Database(join(store, 'state.sqlite'), { readonly: true });
  try {
    return fn(d);
  } finally {
    d.close();
  }
}

function withService<T>(fn: (s: KnowledgeService) => T): T {
  const s = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
  try {
    return fn(s);
  } finally {
    s.close();
  }
}

async function withServiceAsync<T>(fn: (s: KnowledgeService) => Promise<T>): Promise<T> {
  const s = KnowledgeService.open(store, { write: true, env: sb.env, git: { pathEnv: sb.env.PATH } });
  try {
    return await fn(s);
  } finally {
    s.close();
  }
}

function errorCode(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    if (!isKnowledgeError(err)) throw err;
    return err.code;
  }
}

async function asyncErrorCode(fn: () => Promise<unknown>): Promise<string | null> {
  try {
    await fn();
    return null;
  } catch (err) {
    if (!isKnowledgeError(err)) throw err;
    return err.code;
  }
}

describe('as a new user: a PDF, a PNG and a 150 MiB log, cited from a claim [ATT-1..3, GIT-9]', () => {
  it('keeps exactly the PDF in history, all three in the vault, with truthful receipts', () => {
    write('paper.pdf', '%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n');
    write('chart.png', Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(200, 7)]));
    textFile('server.log', 150 * MiB, 'log-150');

    const pdf = attach(['paper.pdf', '--attribution', 'downloaded from the journal']);
    const png = attach(['chart.png']);
    const log = attach(['server.log']);
    for (const r of [pdf, png, log]) expect(r.code, r.stderr).toBe(0);

    expect(pdf.receipt).toMatchObject({
      kind: 'attachment', partition: 'private', actor: 'operator', filename: 'paper.pdf', mediaType: 'application/pdf',
      size: readFileSync(join(sb.dir, 'paper.pdf')).length, sha256: fileSha(join(sb.dir, 'paper.pdf')), inHistory: true, newSource: true,
      git: { state: 'committed' },
    });
    expect(pdf.receipt.attachmentId).toMatch(/^att-/);
    expect(pdf.receipt.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(pdf.receipt.sourceId).toBe(`src-${pdf.receipt.sha256.slice(0, 24)}`);
    expect(pdf.receipt.path).toBe(`private/evidence/${pdf.receipt.sourceId.slice(4, 6)}/${pdf.receipt.sourceId}/paper.pdf`);
    expect(png.receipt).toMatchObject({ mediaType: 'image/png', inHistory: false, git: { state: 'committed' } });
    expect(log.receipt).toMatchObject({ size: 150 * MiB, mediaType: 'text/plain', inHistory: false, git: { state: 'committed' } });

    // All three retained, byte for byte.
    for (const r of [pdf, png, log]) expect(fileSha(join(vault, r.receipt.path))).toBe(r.receipt.sha256);

    // A claim cites all three by source id; the publication resolves them.
    write('claim.md', `---\nkind: claim\nclaim_kind: fact\ntitle: The service logs errors after the upgrade\nevidence:\n${[pdf, png, log].map((r) => `  - source: ${r.receipt.sourceId}\n`).join('')}---\nSee the log.\n`);
    const pub = cli(sb, ['publish', '--store', 'st', '--json', 'claim.md']);
    expect(pub.code, pub.stderr).toBe(0);
    const receipt = JSON.parse(pub.stdout);
    expect(receipt.git.state).toBe('committed');
    const claim = YAML.parse(readFileSync(join(vault, receipt.records[0].path), 'utf8').split('---\n')[1]!);
    expect(claim.evidence.map((e: { source: string }) => e.source)).toEqual([pdf, png, log].map((r) => r.receipt.sourceId));

    // History: exactly the PDF among the originals, as an exact blob; every descriptor; the .gitignore of the excluded ones.
    const tree = treeFiles();
    const originals = tree.filter((p) => /\/evidence\/[0-9a-f]{2}\/src-[0-9a-f]+\/[^.]/.test(p));
    expect(originals).toEqual([pdf.receipt.path]);
    expect(userGit(sb, vault, ['rev-parse', `HEAD:${pdf.receipt.path}`]).trim()).toBe(userGit(sb, vault, ['hash-object', join(vault, pdf.receipt.path)]).trim());
    for (const r of [pdf, png, log]) expect(tree).toContain(r.receipt.descriptorPath);
    for (const r of [png, log]) expect(tree).toContain(`private/evidence/${r.receipt.sourceId.slice(4, 6)}/${r.receipt.sourceId}/.gitignore`);
    // Excluded originals make no `git status` noise, and nothing of the user's config was touched.
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    expect(userGit(sb, vault, ['status', '--porcelain', '--ignored', '--untracked-files=all'])).toMatch(new RegExp(`!! ${png.receipt.path}`));

    // Each attachment is its own commit, labelled with its actor and attachment id.
    for (const r of [pdf, png, log]) expect(commitsFor(r.receipt.attachmentId)).toEqual([r.receipt.git.commit]);
    expect(userGit(sb, vault, ['log', '-1', '--format=%B', pdf.receipt.git.commit])).toMatch(/Knowledge-Actor: operator/);

    // The descriptor says what the receipt says.
    const d = YAML.parse(readFileSync(join(vault, log.receipt.descriptorPath), 'utf8'));
    expect(d).toMatchObject({ format: 'knowledge-source-v1', source_id: log.receipt.sourceId, retained_path: log.receipt.path, sha256: log.receipt.sha256, size: 150 * MiB, in_history: false, original_name: 'server.log' });

    // Activity, newest first: the publication, then the three attachments.
    const act = activity();
    expect(act.map((a) => a.kind)).toEqual(['publication', 'attachment', 'attachment', 'attachment']);
    expect(act.slice(1).map((a) => a.id)).toEqual([log, png, pdf].map((r) => r.receipt.attachmentId));
    expect(act[1]).toMatchObject({ actor: 'operator', git: { state: 'committed' }, detail: { status: 'completed', inHistory: false } });

    // receipt and resume find attachments by attachment id and by request id.
    const again = cli(sb, ['receipt', '--store', 'st', '--json', pdf.receipt.requestId]);
    expect(JSON.parse(again.stdout)).toEqual(pdf.receipt);
    const resumed = cli(sb, ['resume', '--store', 'st', '--json', png.receipt.attachmentId]);
    expect(JSON.parse(resumed.stdout)).toEqual(png.receipt);
    // Nothing of the uploads is left behind.
    expect(partFiles()).toEqual([]);
    expect(db((x) => x.prepare('SELECT count(*) AS n FROM attachment_chunks').get())).toEqual({ n: 0 });
  });
});

describe('[GIT-9] which originals stay out of history', () => {
  it('media by content (a PNG named .txt) and by extension (an .mp3 of text) stay out; other files go in', () => {
    write('disguised.txt', Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from('not really text')]));
    write('voice.mp3', 'plain words, but an audio extension\n');
    write('notes.csv', 'a,b\n1,2\n');
    const png = attach(['disguised.txt']).receipt;
    const mp3 = attach(['voice.mp3']).receipt;
    const csv = attach(['notes.csv']).receipt;
    expect(png).toMatchObject({ mediaType: 'image/png', inHistory: false });
    expect(mp3).toMatchObject({ inHistory: false });
    expect(csv).toMatchObject({ mediaType: 'text/csv', inHistory: true });
    const tree = treeFiles();
    expect(tree).toContain(csv.path);
    expect(tree).not.toContain(png.path);
    expect(tree).not.toContain(mp3.path);
  });

  it('100 MiB is the line: one byte less goes in, exactly 100 MiB stays out (git unavailable, so only the queued bytes are compared)', () => {
    textFile('under.log', 100 * MiB - 1, 'under');
    textFile('at.log', 100 * MiB, 'at');
    const noGit = { KNOWLEDGE_GIT: join(sb.dir, 'no-such-git') };
    const under = attach(['under.log'], noGit);
    const at = attach(['at.log'], noGit);
    expect(under.code, under.stderr).toBe(0);
    expect(under.receipt).toMatchObject({ inHistory: true, git: { state: 'unavailable' } });
    expect(at.receipt).toMatchObject({ inHistory: false, git: { state: 'unavailable' } });
    const queued = db((x) => x.prepare('SELECT b.ref_id, f.path, length(f.bytes) AS n FROM batch_files f JOIN batches b USING (batch_id) ORDER BY f.path').all()) as Array<{ ref_id: string; path: string; n: number }>;
    expect(queued.filter((q) => q.ref_id === under.receipt.attachmentId).map((q) => q.path)).toContain(under.receipt.path);
    expect(queued.find((q) => q.path === under.receipt.path)?.n).toBe(100 * MiB - 1);
    expect(queued.filter((q) => q.ref_id === at.receipt.attachmentId).map((q) => q.path).sort()).toEqual([
      at.receipt.descriptorPath, `private/evidence/${at.receipt.sourceId.slice(4, 6)}/${at.receipt.sourceId}/.gitignore`,
    ].sort());
  });
});

describe('[GIT-9] what an attachment is, and putting a kept-out original back', () => {
  it('a file whose extension is a name of Object.prototype completes like any other (it once failed every retry)', () => {
    write('notes.constructor', 'hello\n');
    const r = attach(['notes.constructor']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.receipt).toMatchObject({ mediaType: 'application/octet-stream', inHistory: true, git: { state: 'committed' } });
    expect(partFiles()).toEqual([]);
  });

  it('the installed original has the mode every file Knowledge writes has (0644 less the umask), not a private 0600', () => {
    write('notes.txt', 'shared notes\n');
    // Under umask 027 a publication's files are 0640; an attachment's original and descriptor too.
    const r = spawnSync('sh', ['-c', `umask 027 && exec "${process.execPath}" "${cliPath}" attach --store st --json notes.txt`], { cwd: sb.dir, env: sb.env, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const receipt = JSON.parse(r.stdout) as { path: string; descriptorPath: string };
    const mode = (p: string) => statSync(join(vault, p)).mode & 0o777;
    expect(mode(receipt.descriptorPath).toString(8)).toBe('640');
    expect(mode(receipt.path).toString(8)).toBe('640');
  });

  it('an original kept out of history and deleted by hand comes back with its .gitignore: git status stays clean', () => {
    write('pic.png', Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), Buffer.from('fakepng')]));
    const first = attach(['pic.png']).receipt;
    expect(first.inHistory).toBe(false);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
    rmSync(join(vault, first.path, '..'), { recursive: true });
    const again = attach(['pic.png']);
    expect(again.code, again.stderr).toBe(0);
    expect(existsSync(join(vault, first.path))).toBe(true);
    expect(userGit(sb, vault, ['status', '--porcelain'])).toBe('');
  });
});

describe('[GIT-9] evidence given with a publication: its declared type, and the same bytes twice', () => {
  const claim = '---\nkind: claim\nclaim_kind: fact\ntitle: Seen\n---\nb\n';
  it('a declared type is lowercased (Video/MP4 is video: kept out) and one not of the form type/subtype is E_VALIDATION', async () => {
    await withServiceAsync(async (s) => {
      const r = await s.publish({ partition: 'private', actor: 'agent', records: [claim], evidence: [{ name: 'clip.dat', bytes: Buffer.from('frames'), mediaType: 'Video/MP4' }] });
      expect(r.evidence[0]).toMatchObject({ inHistory: false });
      const err = await s.publish({ partition: 'private', actor: 'agent', records: [claim.replace('Seen', 'Odd')], evidence: [{ name: 'odd.dat', bytes: Buffer.from('odd'), mediaType: 'not a type at all' }] }).catch((e: unknown) => e);
      expect(isKnowledgeError(err) && err.code).toBe('E_VALIDATION');
      expect((err as Error).message).toMatch(/evidence #1 \(odd\.dat\): media type "not a type at all" is not of the form type\/subtype/);
      await s.settle();
    });
    const types = db((x) => x.prepare('SELECT media_type FROM sources').pluck().all());
    expect(types).toEqual(['video/mp4']);
  });

  it('the same bytes twice in one publication are one source with both attributions', async () => {
    const r = await withServiceAsync(async (s) => {
      const out = await s.publish({
        partition: 'private', actor: 'agent', records: [claim],
        evidence: [
          { name: 'a.txt', bytes: Buffer.from('same bytes\n'), attribution: 'from Alice' },
          { name: 'b.txt', bytes: Buffer.from('same bytes\n'), attribution: 'from Bob' },
          { name: 'c.txt', bytes: Buffer.from('same bytes\n'), attribution: 'from Alice' },
        ],
      });
      await s.settle();
      return out;
    });
    expect(r.evidence).toHaveLength(1);
    const attributions = db((x) => JSON.parse(x.prepare('SELECT attributions FROM sources').pluck().get() as string) as Array<{ attribution: string }>);
    expect(attributions.map((a) => a.attribution)).toEqual(['from Alice', 'from Bob']);
  });
});

describe('content addressing: the same bytes attached twice are one source', () => {
  it('keeps one file and one commit, and both attributions', () => {
    write('a.txt', 'the same bytes\n');
    write('b.txt', 'the same bytes\n');
    const first = attach(['a.txt', '--attribution', 'first reader']).receipt;
    const second = attach(['b.txt', '--attribution', 'second reader', '--actor', 'agent']).receipt;
    expect(second).toMatchObject({ sourceId: first.sourceId, path: first.path, newSource: false, actor: 'agent', git: { state: 'committed', commit: first.git.commit } });
    expect(second.attachmentId).not.toBe(first.attachmentId);
    expect(readdirSync(join(vault, 'private', 'evidence', first.sourceId.slice(4, 6), first.sourceId))).toEqual(['a.txt']);
    expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('1');
    const attributions = db((x) => JSON.parse((x.prepare('SELECT attributions FROM sources WHERE source_id = ?').get(first.sourceId) as { attributions: string }).attributions));
    expect(attributions).toEqual([
      expect.objectContaining({ attribution: 'first reader', attachmentId: first.attachmentId }),
      expect.objectContaining({ attribution: 'second reader', attachmentId: second.attachmentId }),
    ]);
    expect(activity().filter((a) => a.kind === 'attachment')).toHaveLength(2);
  });

  it('bytes published as --evidence and then attached are one source too', () => {
    write('ev.txt', 'evidence first published\n');
    write('p.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Published first\n---\n');
    const pub = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'p.md']).stdout);
    const att = attach(['ev.txt']).receipt;
    expect(att).toMatchObject({ sourceId: pub.evidence[0].sourceId, path: pub.evidence[0].path, newSource: false, git: { state: 'committed', commit: pub.git.commit } });
  });

  it('the same request id with the same arguments returns the same receipt; with other arguments it is E_CONFLICT', () => {
    write('a.txt', 'once\n');
    const rid = '3f6c2b1a-9d8e-4f7a-b6c5-d4e3f2a1b0c9';
    const a = attach(['a.txt', '--request-id', rid]);
    const b = attach(['a.txt', '--request-id', rid]);
    expect(b.receipt).toEqual(a.receipt);
    write('a.txt', 'changed\n');
    const c = attach(['a.txt', '--request-id', rid]);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/^E_CONFLICT: request id .* different attachment/);
    write('a.txt', 'once\n');
    expect(attach(['a.txt', '--request-id', rid, '--attribution', 'other']).stderr).toMatch(/^E_CONFLICT: /);
    expect(activity()).toHaveLength(1);
    expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('1');
    // One request id names one request, whatever its kind (and letter case): receipt ID finds exactly it.
    write('p.md', '---\nkind: page\ntitle: Not under this id\n---\n');
    const pub = cli(sb, ['publish', '--store', 'st', '--request-id', rid.toUpperCase(), 'p.md']);
    expect(pub.code).toBe(1);
    expect(pub.stderr).toMatch(/^E_CONFLICT: request id .* already used for an attachment/);
    const pubRid = '0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5';
    expect(cli(sb, ['publish', '--store', 'st', '--request-id', pubRid, 'p.md']).code).toBe(0);
    write('b.txt', 'other bytes\n');
    expect(attach(['b.txt', '--request-id', pubRid]).stderr).toMatch(/^E_CONFLICT: request id .* already used for a publication/);
    expect(JSON.parse(cli(sb, ['receipt', '--store', 'st', '--json', rid]).stdout)).toEqual(a.receipt);
    expect(activity()).toHaveLength(2);
  });
});

describe('the same bytes again, after the retained original was deleted or a crash left it behind', () => {
  const sourceDir = (r: { sourceId: string }) => join(vault, 'private', 'evidence', r.sourceId.slice(4, 6), r.sourceId);
  /** `first` attached as request `rid` and killed after its install, overtaken by `second` (the same bytes), then retried. */
  function overtakenThenRetried(first: string, second: string, rid: string) {
    const killed = attach(['--request-id', rid, first], { KNOWLEDGE_CRASH_AT: 'attach-after-install' });
    expect(killed.code, killed.stderr).toBeNull();
    const other = attach([second]);
    expect(other.code, other.stderr).toBe(0);
    const retry = attach(['--request-id', rid, first]);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.receipt).toMatchObject({ sourceId: other.receipt.sourceId, path: other.receipt.path, newSource: false });
    return other.receipt as { sourceId: string; path: string };
  }

  it('files of a new source already at its paths (copied by hand from another partition, then edited) are refused before anything is written, as a publication refuses them', () => {
    write('notes.txt', 'alpha\nbeta\n');
    const first = attach(['notes.txt']).receipt;
    const shard = first.path.split('/').slice(0, 3).join('/'); // private/evidence/<hh>
    mkdirSync(join(vault, 'conversations/abc/evidence'), { recursive: true });
    spawnSync('cp', ['-a', join(vault, shard), join(vault, 'conversations/abc/evidence/')]);
    const copied = join(vault, first.path.replace(/^private\//, 'conversations/abc/'));
    appendFileSync(copied, 'my own edits\n');
    const before = spawnSync('find', [join(vault, 'conversations'), '-type', 'f', '-exec', 'sha256sum', '{}', ';'], { encoding: 'utf8' }).stdout;
    const r = attach(['--partition', 'conversation:abc', 'notes.txt']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: attachment att-\S+ \(notes\.txt\): conversations\/abc\/evidence\/\S+ is already in the vault, but conversation:abc has no source src-\S+ recorded \(the vault came without the store's state, as a clone does, or it was copied there by hand\?\); run `knowledge scan`: it adopts a source whose descriptor and original agree where they lie; or move it away; then retry the same request/m);
    expect(spawnSync('find', [join(vault, 'conversations'), '-type', 'f', '-exec', 'sha256sum', '{}', ';'], { encoding: 'utf8' }).stdout).toBe(before);
    expect(readFileSync(copied, 'utf8')).toBe('alpha\nbeta\nmy own edits\n');
    // Asked again (a new request; the refused one is still there, unfinished): refused again, nothing replaced.
    const again = attach(['--partition', 'conversation:abc', 'notes.txt']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^E_CONFLICT: /);
    expect(spawnSync('find', [join(vault, 'conversations'), '-type', 'f', '-exec', 'sha256sum', '{}', ';'], { encoding: 'utf8' }).stdout).toBe(before);
  });

  it('attaching them again puts the original back where the source says it is', () => {
    write('a.txt', 'kept out of sight\n');
    write('b.txt', 'kept out of sight\n');
    const first = attach(['a.txt']).receipt;
    rmSync(join(vault, first.path));
    const second = attach(['b.txt']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.receipt).toMatchObject({ sourceId: first.sourceId, path: first.path, newSource: false });
    expect(readFileSync(join(vault, first.path), 'utf8')).toBe('kept out of sight\n');
    expect(readdirSync(sourceDir(first))).toEqual(['a.txt']);
    expect(partFiles()).toEqual([]);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
  });

  it('an original kept out of history (its only copy) is put back too', () => {
    const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(64, 7)]);
    write('p.png', png);
    const first = attach(['p.png']).receipt;
    expect(first.inHistory).toBe(false);
    rmSync(join(vault, first.path));
    const second = attach(['p.png']);
    expect(second.code, second.stderr).toBe(0);
    expect(readFileSync(join(vault, first.path)).equals(png)).toBe(true);
  });

  it('publishing them again as --evidence puts the original back too', () => {
    write('ev.txt', 'evidence deleted by hand\n');
    write('p.md', '---\nkind: claim\nclaim_kind: fact\ntitle: First cite\n---\n');
    write('q.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Second cite\n---\n');
    const pub = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'p.md']).stdout);
    rmSync(join(vault, pub.evidence[0].path));
    const again = cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'q.md']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).evidence[0]).toMatchObject({ sourceId: pub.evidence[0].sourceId, path: pub.evidence[0].path });
    expect(readFileSync(join(vault, pub.evidence[0].path), 'utf8')).toBe('evidence deleted by hand\n');
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
  });

  it('publishing them again puts back a descriptor deleted by hand (its very bytes) and an original whose deletion the user committed, both into history; an original edited by hand is refused, untouched', () => {
    const userCommit = (msg: string) => userGit(sb, vault, ['-c', 'user.name=u', '-c', 'user.email=u@example.com', 'commit', '-q', '-m', msg]);
    write('ev.txt', 'evidence the user tidies away\n');
    write('p.md', '---\nkind: claim\nclaim_kind: fact\ntitle: First cite\n---\n');
    write('q.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Second cite\n---\n');
    write('r.md', '---\nkind: claim\nclaim_kind: fact\ntitle: Third cite\n---\n');
    const pub = JSON.parse(cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'p.md']).stdout);
    const ev = pub.evidence[0] as { path: string; sourceId: string };
    const descriptor = `${dirname(ev.path)}.yaml`;
    const descriptorBytes = readFileSync(join(vault, descriptor));
    // The descriptor deleted (a scan commits that), the original deleted with `git rm` and committed by the user.
    rmSync(join(vault, descriptor));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    userGit(sb, vault, ['rm', '-q', ev.path]);
    userCommit('user: original gone');
    expect(treeFiles()).not.toContain(descriptor);
    expect(treeFiles()).not.toContain(ev.path);
    const again = cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'q.md']);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(join(vault, descriptor)).equals(descriptorBytes)).toBe(true);
    expect(readFileSync(join(vault, ev.path), 'utf8')).toBe('evidence the user tidies away\n');
    expect(treeFiles()).toEqual(expect.arrayContaining([descriptor, ev.path]));
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    // Edited by hand: the user's bytes stay, and the publication is refused before anything is written.
    writeFileSync(join(vault, ev.path), 'evidence the user tidies away, and edits\n');
    const edited = cli(sb, ['publish', '--store', 'st', '--json', '--evidence', 'ev.txt', 'r.md']);
    expect(edited.code).toBe(1);
    expect(edited.stderr).toMatch(new RegExp(`^E_CONFLICT: evidence ev\\.txt: ${ev.path} no longer holds the bytes of source ${ev.sourceId} \\(edited or replaced by hand\\?\\); move it away, then publish again`));
    expect(readFileSync(join(vault, ev.path), 'utf8')).toBe('evidence the user tidies away, and edits\n');
  });

  it('attaching them again puts back a deleted descriptor (its very bytes), which the next scan commits again; an edited original is refused', () => {
    write('a.txt', 'attached, then tidied away\n');
    const first = attach(['a.txt']).receipt as { path: string; descriptorPath: string; sourceId: string };
    const descriptorBytes = readFileSync(join(vault, first.descriptorPath));
    rmSync(join(vault, first.descriptorPath));
    rmSync(join(vault, first.path));
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0); // commits the descriptor's deletion
    expect(treeFiles()).not.toContain(first.descriptorPath);
    const head = userGit(sb, vault, ['rev-parse', 'HEAD']).trim();
    const again = attach(['a.txt']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.receipt).toMatchObject({ sourceId: first.sourceId, newSource: false });
    expect(userGit(sb, vault, ['rev-parse', 'HEAD']).trim()).toBe(head); // no checkpoint of its own
    expect(readFileSync(join(vault, first.descriptorPath)).equals(descriptorBytes)).toBe(true);
    expect(readFileSync(join(vault, first.path), 'utf8')).toBe('attached, then tidied away\n');
    expect(cli(sb, ['scan', '--store', 'st']).code).toBe(0);
    expect(treeFiles()).toEqual(expect.arrayContaining([first.descriptorPath, first.path]));
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    writeFileSync(join(vault, first.path), 'attached, then edited by hand\n');
    const edited = attach(['a.txt']);
    expect(edited.code).toBe(1);
    expect(edited.stderr).toMatch(/^E_CONFLICT: attachment att-\S+ \(a\.txt\): \S+ no longer holds the bytes of source src-\S+ \(edited or replaced by hand\?\)/);
    expect(readFileSync(join(vault, first.path), 'utf8')).toBe('attached, then edited by hand\n');
  });

  it('a source retained before descriptors were kept (migration 018) gets its descriptor back as an attachment wrote it', () => {
    write('My Notes.TXT', 'notes from before\n');
    const first = attach(['My Notes.TXT']).receipt as { descriptorPath: string; sourceId: string };
    const descriptorBytes = readFileSync(join(vault, first.descriptorPath));
    const d = new Database(join(store, 'state.sqlite'));
    d.prepare('UPDATE sources SET descriptor = NULL WHERE source_id = ?').run(first.sourceId);
    d.close();
    rmSync(join(vault, first.descriptorPath));
    const again = attach(['My Notes.TXT']);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(join(vault, first.descriptorPath), 'utf8')).toBe(descriptorBytes.toString('utf8'));
  });

  it('an empty file: an original edited by hand, or a hand-copied source in another partition, is refused as for any other', () => {
    write('empty.txt', '');
    const first = attach(['empty.txt']).receipt as { path: string; descriptorPath: string };
    writeFileSync(join(vault, first.path), 'no longer empty\n');
    const edited = attach(['empty.txt']);
    expect(edited.code).toBe(1);
    expect(edited.stderr).toMatch(/^E_CONFLICT: .* no longer holds the bytes of source/);
    expect(readFileSync(join(vault, first.path), 'utf8')).toBe('no longer empty\n');
    // Copied by hand into another partition, its descriptor edited there.
    writeFileSync(join(vault, first.path), '');
    mkdirSync(join(vault, 'conversations/abc/evidence'), { recursive: true });
    spawnSync('cp', ['-a', join(vault, first.path.split('/').slice(0, 3).join('/')), join(vault, 'conversations/abc/evidence/')]);
    const copiedDescriptor = join(vault, first.descriptorPath.replace(/^private\//, 'conversations/abc/'));
    appendFileSync(copiedDescriptor, '# my notes\n');
    const copied = attach(['--partition', 'conversation:abc', 'empty.txt']);
    expect(copied.code).toBe(1);
    expect(copied.stderr).toMatch(/^E_CONFLICT: .* is already in the vault, but conversation:abc has no source/);
    expect(readFileSync(copiedDescriptor, 'utf8')).toMatch(/# my notes\n$/);
  });

  it('a request killed after its install, overtaken by another with the same bytes, completes on retry without leaving a copy behind', () => {
    write('a.txt', 'raced bytes\n');
    write('b.txt', 'raced bytes\n');
    const other = overtakenThenRetried('a.txt', 'b.txt', '7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d');
    expect(readdirSync(sourceDir(other))).toEqual(['b.txt']);
    expect(readFileSync(join(vault, other.path), 'utf8')).toBe('raced bytes\n');
    expect(partFiles()).toEqual([]);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
  });

  it('the same, when both requests name the same file', () => {
    write('a.txt', 'raced bytes, one name\n');
    const other = overtakenThenRetried('a.txt', 'a.txt', '8b7c6d5e-4f3a-4b2c-8d9e-0f1a2b3c4d5e');
    expect(readdirSync(sourceDir(other))).toEqual(['a.txt']);
  });

  it('an empty file killed after its install, or after its descriptor too, completes on retry; overtaken by another with the same (empty) bytes, it leaves no copy behind', () => {
    write('e.txt', '');
    write('f.txt', '');
    for (const [i, point] of ['attach-after-install', 'attach-before-acknowledge'].entries()) {
      const rid = `9c8d7e6f-5a4b-4c3d-8e2f-1a0b9c8d7e6${i}`;
      const killed = attach(['--request-id', rid, '--partition', `conversation:k${i}`, 'e.txt'], { KNOWLEDGE_CRASH_AT: point });
      expect(killed.code, killed.stderr).toBeNull();
      const retry = attach(['--request-id', rid, '--partition', `conversation:k${i}`, 'e.txt']);
      expect(retry.code, retry.stderr).toBe(0);
      expect(retry.receipt).toMatchObject({ newSource: true, git: { state: 'committed' } });
    }
    const other = overtakenThenRetried('e.txt', 'f.txt', '9c8d7e6f-5a4b-4c3d-8e2f-1a0b9c8d7e6f');
    expect(readdirSync(sourceDir(other))).toEqual(['f.txt']);
    expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
  });

  it('a partial file left by a kill after a duplicate was acknowledged is removed by the next writer', () => {
    write('a.txt', 'duplicate bytes\n');
    expect(attach(['a.txt']).code).toBe(0);
    const killed = attach(['a.txt'], { KNOWLEDGE_CRASH_AT: 'attach-after-acknowledge' });
    expect(killed.code, killed.stderr).toBeNull();
    expect(partFiles()).toHaveLength(1);
    write('p.md', '---\nkind: page\ntitle: Any write\n---\n');
    expect(cli(sb, ['publish', '--store', 'st', 'p.md']).code).toBe(0);
    expect(partFiles()).toEqual([]);
  });
});

describe('[ATT-1, ATT-2] the chunk protocol (core service)', () => {
  const data = Buffer.from('0123456789abcdefghijklmnopqrstuvwxyz'.repeat(100)); // 3600 bytes
  const start = (s: KnowledgeService, over: Record<string, unknown> = {}) =>
    s.attachStart({ requestId: '7a1e2d3c-4b5a-4697-8887-a9b8c7d6e5f4', partition: 'private', actor: 'agent', filename: 'data.txt', size: data.length, sha256: sha(data), ...over });

  it('commits chunks as they arrive, resumes under the same request id, never stores a retried chunk twice', async () => {
    const first = withService((s) => {
      const st = start(s);
      expect(st).toMatchObject({ state: 'receiving', received: 0, size: 3600 });
      expect(s.attachChunk(st.attachmentId, 0, data.subarray(0, 1000)).received).toBe(1000);
      // The same chunk again (a retry after a lost response): accepted, nothing added.
      expect(s.attachChunk(st.requestId, 0, data.subarray(0, 1000)).received).toBe(1000);
      expect(s.attachChunk(st.attachmentId, 1000, data.subarray(1000, 2000)).received).toBe(2000);
      return st;
    });
    // A new process: starting again with the same arguments says where to continue.
    const receipt = await withServiceAsync(async (s) => {
      const again = start(s);
      expect(again).toMatchObject({ attachmentId: first.attachmentId, received: 2000 });
      expect(db((x) => x.prepare('SELECT offset, length FROM attachment_chunks ORDER BY offset').all())).toEqual([{ offset: 0, length: 1000 }, { offset: 1000, length: 1000 }]);
      s.attachChunk(again.attachmentId, 2000, data.subarray(2000));
      return s.attachComplete(again.requestId);
    });
    expect(receipt).toMatchObject({ kind: 'attachment', actor: 'agent', size: 3600, sha256: sha(data), inHistory: true, git: { state: 'committed' } });
    expect(readFileSync(join(vault, receipt.path))).toEqual(data);
    if (receipt.git.state !== 'committed') throw new Error(`expected a commit, got ${JSON.stringify(receipt.git)}`);
    expect(userGit(sb, vault, ['show', `${receipt.git.commit}:${receipt.path}`])).toBe(data.toString());
    // Chunks released once the file was durable.
    expect(db((x) => x.prepare('SELECT count(*) AS n FROM attachment_chunks').get())).toEqual({ n: 0 });
    expect(partFiles()).toEqual([]);
    // Completing again returns the same receipt; a late chunk is a conflict.
    expect(await withServiceAsync((s) => s.attachComplete(first.attachmentId))).toEqual(receipt);
    expect(withService((s) => errorCode(() => s.attachChunk(first.attachmentId, 0, data.subarray(0, 10))))).toBe('E_CONFLICT');
  });

  it('bytes past the committed length of the partial file (an interrupted write) are cut off, never installed', async () => {
    const st = withService((s) => {
      const st = start(s);
      s.attachChunk(st.attachmentId, 0, data.subarray(0, 1000));
      return st;
    });
    const part = join(vault, '.knowledge-history', 'uploads', `${st.attachmentId}.part`);
    writeFileSync(part, Buffer.alloc(5000, 0x58), { flag: 'a' }); // written but never committed
    const receipt = await withServiceAsync(async (s) => {
      s.attachChunk(st.attachmentId, 1000, data.subarray(1000, 2000));
      expect(readFileSync(part).length).toBe(2000);
      s.attachChunk(st.attachmentId, 2000, data.subarray(2000));
      return s.attachComplete(st.attachmentId);
    });
    expect(readFileSync(join(vault, receipt.path))).toEqual(data);
  });

  it('a partial file that lost committed bytes restarts the upload at offset 0 (E_CONFLICT), never installs a short file', () => {
    withService((s) => {
      const st = start(s);
      s.attachChunk(st.attachmentId, 0, data.subarray(0, 1000));
      writeFileSync(join(vault, '.knowledge-history', 'uploads', `${st.attachmentId}.part`), data.subarray(0, 10));
      expect(errorCode(() => s.attachChunk(st.attachmentId, 1000, data.subarray(1000, 2000)))).toBe('E_CONFLICT');
      expect(s.attachStatus(st.attachmentId).received).toBe(0);
      s.attachChunk(st.attachmentId, 0, data);
      expect(s.attachStatus(st.attachmentId).received).toBe(data.length);
    });
  });

  it('refuses out-of-order, overlapping, oversized and beyond-size chunks without changing anything', () => {
    withService((s) => {
      const st = start(s);
      s.attachChunk(st.attachmentId, 0, data.subarray(0, 1000));
      expect(errorCode(() => s.attachChunk(st.attachmentId, 1500, data.subarray(1500, 2000)))).toBe('E_VALIDATION'); // gap
      expect(errorCode(() => s.attachChunk(st.attachmentId, 500, data.subarray(500, 1500)))).toBe('E_VALIDATION'); // overlap
      expect(errorCode(() => s.attachChunk(st.attachmentId, 0, Buffer.from('X'.repeat(1000))))).toBe('E_VALIDATION'); // same offset, other bytes
      expect(errorCode(() => s.attachChunk(st.attachmentId, 0, data.subarray(0, 999)))).toBe('E_VALIDATION'); // same offset, other length
      expect(errorCode(() => s.attachChunk(st.attachmentId, 1000, Buffer.alloc(2601)))).toBe('E_VALIDATION'); // beyond the declared size
      expect(errorCode(() => s.attachChunk(st.attachmentId, 1000, Buffer.alloc(0)))).toBe('E_VALIDATION');
      expect(errorCode(() => s.attachChunk('att-nope', 0, data))).toBe('E_NOT_FOUND');
      expect(s.attachStatus(st.attachmentId).received).toBe(1000);
    });
    withService((s) => {
      const big = s.attachStart({ partition: 'private', actor: 'agent', filename: 'big.bin', size: 64 * MiB, sha256: 'ab'.repeat(32) });
      expect(errorCode(() => s.attachChunk(big.attachmentId, 0, Buffer.alloc(8 * MiB + 1)))).toBe('E_TOO_LARGE');
    });
    expect(db((x) => x.prepare('SELECT count(*) AS n FROM attachment_chunks').get())).toEqual({ n: 1 });
  });

  it('completing before every declared byte arrived is E_VALIDATION and keeps the chunks for resume', async () => {
    const code = await withServiceAsync(async (s) => {
      const st = start(s);
      s.attachChunk(st.attachmentId, 0, data.subarray(0, 3000));
      return asyncErrorCode(() => s.attachComplete(st.attachmentId));
    });
    expect(code).toBe('E_VALIDATION');
    expect(db((x) => x.prepare('SELECT received FROM attachments').get())).toEqual({ received: 3000 });
    expect(existsSync(join(vault, 'private'))).toBe(false);
    const act = activity();
    expect(act).toEqual([expect.objectContaining({ kind: 'attachment', git: expect.objectContaining({ state: 'pending', code: 'waiting' }), detail: expect.objectContaining({ status: 'receiving', received: 3000, size: 3600 }) })]);
  });

  it('bytes that do not match the declared SHA-256 are E_VALIDATION: nothing installed, chunks released, the request can be sent again', async () => {
    const wrong = Buffer.from(data);
    wrong[1234] = 0x21;
    const st = withService((s) => {
      const st = start(s);
      s.attachChunk(st.attachmentId, 0, wrong);
      return st;
    });
    const code = await withServiceAsync((s) => asyncErrorCode(() => s.attachComplete(st.attachmentId)));
    expect(code).toBe('E_VALIDATION');
    expect(existsSync(join(vault, 'private'))).toBe(false);
    expect(partFiles()).toEqual([]);
    expect(db((x) => x.prepare('SELECT count(*) AS n FROM attachment_chunks').get())).toEqual({ n: 0 });
    expect(db((x) => x.prepare('SELECT received, failure FROM attachments').get())).toEqual({ received: 0, failure: expect.stringMatching(/verification failed/) });
    // The same request, sent again with the right bytes, completes.
    const receipt = await withServiceAsync(async (s) => {
      const again = start(s);
      expect(again.received).toBe(0);
      s.attachChunk(again.attachmentId, 0, data);
      return s.attachComplete(again.attachmentId);
    });
    expect(fileSha(join(vault, receipt.path))).toBe(sha(data));
  });

  it('a request id reused with other arguments is E_CONFLICT; a read-only store refuses uploads', () => {
    withService((s) => {
      start(s);
      expect(errorCode(() => start(s, { size: data.length + 1 }))).toBe('E_CONFLICT');
      expect(errorCode(() => start(s, { filename: 'other.txt' }))).toBe('E_CONFLICT');
    });
    const ro = makeSandbox();
    try {
      expect(cli(ro, ['init', 'ro', '--read-only']).code).toBe(0);
      writeFileSync(join(ro.dir, 'x.txt'), 'x');
      const r = cli(ro, ['attach', '--store', 'ro', 'x.txt']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^E_READ_ONLY: /);
    } finally {
      ro.cleanup();
    }
  });

  it('an empty original is a valid attachment', async () => {
    const receipt = await withServiceAsync(async (s) => {
      const st = s.attachStart({ partition: 'conversation:s-1', actor: 'agent', filename: 'empty.txt', size: 0, sha256: sha('') });
      return s.attachComplete(st.attachmentId);
    });
    expect(receipt).toMatchObject({ size: 0, partition: 'conversation:s-1', inHistory: true, git: { state: 'committed' } });
    expect(receipt.path).toMatch(/^conversations\/s-1\/evidence\/[0-9a-f]{2}\/src-/);
    expect(readFileSync(join(vault, receipt.path)).length).toBe(0);
  });
});

describe('[ATT-3] attach FILE accepts regular files under the allowed root only', () => {
  it('refuses symlinks, directories, devices, FIFOs, paths outside the root and hard links to outside files; installs nothing', () => {
    write('real.txt', 'real\n');
    symlinkSync(join(sb.dir, 'real.txt'), join(sb.dir, 'link.txt'));
    mkdirSync(join(sb.dir, 'dir'));
    execFileSync('mkfifo', [join(sb.dir, 'pipe')]);
    mkdirSync(join(sb.dir, 'work'));
    linkSync(join(sb.dir, 'real.txt'), join(sb.dir, 'work', 'alias.txt'));
    symlinkSync(sb.dir, join(sb.dir, 'work', 'up'));
    const cases: Array<[string, string[], string, RegExp]> = [
      ['a symlink', ['link.txt'], sb.dir, /^E_VALIDATION: .*symbolic link/],
      ['a directory', ['dir'], sb.dir, /^E_VALIDATION: .*directory/],
      ['a FIFO', ['pipe'], sb.dir, /^E_VALIDATION: .*FIFO/],
      ['a device', ['--root', '/', '/dev/null'], sb.dir, /^E_VALIDATION: .*character device/],
      ['a path outside the root (the current directory)', ['../real.txt'], join(sb.dir, 'work'), /^E_DENIED: .*outside the allowed root/],
      ['a path outside --root', ['--root', 'work', 'real.txt'], sb.dir, /^E_DENIED: .*outside the allowed root/],
      ['a symlinked directory leading outside', ['up/real.txt'], join(sb.dir, 'work'), /^E_DENIED: /],
      ['a hard link whose other name is outside the root', ['alias.txt'], join(sb.dir, 'work'), /^E_DENIED: .*hard links/],
      ['a missing file', ['missing.txt'], sb.dir, /^E_VALIDATION: .*no such file/],
    ];
    for (const [what, args, cwd, re] of cases) {
      const r = cli(sb, ['attach', '--store', join(sb.dir, 'st'), ...args], { cwd });
      expect(r.code, `${what}: ${r.stderr}`).toBe(1);
      expect(r.stderr, what).toMatch(re);
      expect(r.stderr.trim().split('\n'), what).toHaveLength(1);
    }
    expect(existsSync(join(vault, 'private'))).toBe(false);
    expect(activity()).toEqual([]);
    // The same hard-linked file is fine when both of its names are under the root.
    const ok = cli(sb, ['attach', '--store', 'st', '--json', 'work/alias.txt']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ filename: 'alias.txt', sha256: sha('real\n') });
  });

  it('usage errors exit 2', () => {
    expect(cli(sb, ['attach', '--store', 'st']).code).toBe(2);
    write('a.txt', 'a');
    expect(cli(sb, ['attach', '--store', 'st', 'a.txt', 'a.txt']).code).toBe(2);
    expect(cli(sb, ['attach', '--store', 'st', '--actor', 'robot', 'a.txt']).code).toBe(2);
    expect(cli(sb, ['attach', 'a.txt']).code).toBe(2);
  });
});

describe('[ATT-1, ATT-2, GIT-6] an attachment killed mid-upload or mid-install is finished exactly once', () => {
  beforeEach(() => {
    // An earlier publication, so the crash happens on a repository with history (as in crash.test.ts).
    write('first.md', '---\nkind: page\ntitle: First\n---\nfirst\n');
    expect(cli(sb, ['publish', '--store', 'st', 'first.md']).code).toBe(0);
  });
  const RID = '5c4b3a29-1807-4f6e-9d5c-4b3a29180706';
  const SIZE = 10 * MiB; // 4 MiB chunks, each committed on its own: chunks end at 4, 8 and 10 MiB
  const points: Array<[string, number | null]> = [
    // [crash point, where the retry resumes (null: nothing left to send)]
    ['attach-before-chunk-commit', 4 * MiB], // 8 MiB written, 4 MiB committed: the uncommitted tail is cut off
    ['attach-mid-upload', 8 * MiB], // 8 MiB committed
    ['attach-after-install', null], // the original renamed into the vault, descriptor and acknowledgement missing
    ['attach-after-acknowledge', null],
    ['after-commit-object', null],
    ['after-update-ref', null],
    ['before-record-commit', null],
  ];
  for (const [point, resumeAt] of points) {
    it(`killed at ${point}: retrying the request completes one verified file and one commit`, () => {
      textFile('big.log', SIZE, 'crash');
      const env = { KNOWLEDGE_ATTACH_COMMIT_BYTES: '1' };
      const killed = attach(['--request-id', RID, 'big.log'], { ...env, KNOWLEDGE_CRASH_AT: point });
      expect(killed.code, killed.stderr).toBeNull(); // really killed (SIGKILL)
      if (resumeAt !== null) {
        // The interrupted upload is visible, with what it kept.
        const a = activity().filter((e) => e.kind === 'attachment');
        expect(a).toEqual([expect.objectContaining({ detail: expect.objectContaining({ status: 'receiving', received: resumeAt }) })]);
      }
      const retry = attach(['--request-id', RID, 'big.log'], env);
      expect(retry.code, retry.stderr).toBe(0);
      if (resumeAt !== null) expect(retry.stderr).toBe(`resumed the upload at byte ${resumeAt} of ${SIZE}\n`);
      else expect(retry.stderr).toBe('');
      const r = retry.receipt;
      expect(r).toMatchObject({ requestId: RID, size: SIZE, inHistory: true, git: { state: 'committed' } });
      expect(fileSha(join(vault, r.path))).toBe(fileSha(join(sb.dir, 'big.log')));
      expect(commitsFor(r.attachmentId)).toEqual([r.git.commit]);
      expect(userGit(sb, vault, ['rev-parse', `${r.git.commit}:${r.path}`]).trim()).toBe(userGit(sb, vault, ['hash-object', join(sb.dir, 'big.log')]).trim());
      expect(userGit(sb, vault, ['rev-list', '--count', 'main']).trim()).toBe('2');
      expect(activity().filter((a) => a.kind === 'attachment')).toHaveLength(1);
      expect(partFiles()).toEqual([]);
      expect(readdirSync(join(vault, '.knowledge-history', 'staging')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
      expect(db((x) => x.prepare('SELECT count(*) AS n FROM attachment_chunks').get())).toEqual({ n: 0 });
      expect(userGit(sb, vault, ['status', '--porcelain', '--untracked-files=all'])).toBe('');
    });
  }
});

const canMount = canMountTmpfs('the full-disk test');

describe('a disk that fills up mid-upload', () => {
  it.skipIf(!canMount)('is a clean E_IO with nothing in the partitions, and the same request resumes once there is room', () => {
    textFile('big.log', 24 * MiB, 'full-disk');
    mkdirSync(join(sb.dir, 'mnt'));
    const rid = '0e1d2c3b-4a59-4687-9766-554433221100';
    const k = `${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath)}`;
    const read = runUnshared(sb, [
      'set -u',
      'mount -t tmpfs -o size=16m tmpfs mnt',
      `${k} init mnt/st >/dev/null || exit 90`,
      `KNOWLEDGE_ATTACH_COMMIT_BYTES=1 ${k} attach --store mnt/st --request-id ${rid} --json big.log >out1 2>err1; echo $? >code1`,
      'find mnt/st/vault -path "*/.git" -prune -o -type f -print | sort >files1',
      'ls -l mnt/st/vault/.knowledge-history/uploads >uploads1 2>&1',
      'mount -o remount,size=256m mnt',
      `${k} attach --store mnt/st --request-id ${rid} --json big.log >out2 2>err2; echo $? >code2`,
      'sha256sum mnt/st/vault/private/evidence/*/*/big.log >sha2 2>&1',
      'git -C mnt/st/vault status --porcelain --untracked-files=all >status2 2>&1',
      'exit 0',
    ]);
    expect(read('code1').trim()).toBe('1');
    expect(read('err1')).toMatch(/^E_IO: .*disk is full.* bytes are kept: retry with request id 0e1d2c3b-4a59-4687-9766-554433221100 to resume/);
    expect(read('err1').trim().split('\n')).toHaveLength(1);
    // Nothing of the upload in any partition: only the recovery area holds the committed part.
    expect(read('files1').split('\n').filter((p) => p.includes('/private/') || p.includes('/conversations/'))).toEqual([]);
    const kept = Number(/(\d+) of \d+ bytes are kept/.exec(read('err1'))![1]);
    expect(kept).toBeGreaterThan(0);
    expect(kept % (4 * MiB)).toBe(0);
    expect(read('uploads1')).toContain(` ${kept} `); // the partial file was cut back to its committed bytes
    // Resumed where it stopped, verified, committed.
    expect(read('code2').trim(), read('err2')).toBe('0');
    expect(read('err2')).toBe(`resumed the upload at byte ${kept} of ${24 * MiB}\n`);
    const receipt = JSON.parse(read('out2'));
    expect(receipt).toMatchObject({ size: 24 * MiB, git: { state: 'committed' } });
    expect(read('sha2').split(' ')[0]).toBe(fileSha(join(sb.dir, 'big.log')));
    expect(read('status2')).toBe('');
  });
});

describe('[PUB-3] an attachment is installed only into real folders of the vault', () => {
  it('an evidence folder that is a symbolic link out of the vault is refused with E_CONFLICT, nothing lands there, and the upload can be finished once it is fixed', () => {
    const outside = join(sb.dir, 'outside');
    mkdirSync(outside);
    mkdirSync(join(vault, 'private'), { recursive: true });
    symlinkSync(outside, join(vault, 'private', 'evidence'));
    write('a.txt', 'hello\n');
    const r = cli(sb, ['attach', '--store', 'st', '--json', 'a.txt']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(/^E_CONFLICT: cannot write private\/evidence\/.*private\/evidence is a symbolic link/);
    expect(readdirSync(outside)).toEqual([]);
    const [att] = JSON.parse(cli(sb, ['activity', '--store', 'st', '--json']).stdout) as Array<{ id: string; git: { state: string; reason: string } }>;
    // Activity says why it waits.
    expect(att!.git).toMatchObject({ state: 'pending', reason: expect.stringMatching(/^cannot write private\/evidence\/.*private\/evidence is a symbolic link/) });
    // The user replaces the link with a real folder: the upload finishes where it belongs.
    rmSync(join(vault, 'private', 'evidence'));
    const done = cli(sb, ['resume', '--store', 'st', '--json', att!.id]);
    expect(done.code, done.stderr).toBe(0);
    const receipt = JSON.parse(done.stdout) as { path: string; sha256: string };
    expect(fileSha(join(vault, receipt.path))).toBe(sha('hello\n'));
    expect(readdirSync(outside)).toEqual([]);
  });
});

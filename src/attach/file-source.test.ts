import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isKnowledgeError } from '../errors.js';
import { closeFile, countLinksUnder, hashOpenFile, isInside, openRegularFile } from './file-source.js';
import { createHash } from 'node:crypto';

let dir: string;
let root: string;
let outside: string;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'kn-file-source-')));
  root = join(dir, 'root');
  outside = join(dir, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function refusal(path: string, r = root): { code: string; message: string } | null {
  try {
    closeFile(openRegularFile(path, r));
    return null;
  } catch (err) {
    if (!isKnowledgeError(err)) throw err;
    return { code: err.code, message: err.message };
  }
}

describe('[ATT-3] openRegularFile accepts regular files under the allowed root only', () => {
  it('opens a regular file and streams its digest', async () => {
    writeFileSync(join(root, 'a.txt'), 'hello\n');
    const f = openRegularFile(join(root, 'a.txt'), root);
    try {
      expect(f.name).toBe('a.txt');
      expect(await hashOpenFile(f, 2)).toEqual({ sha256: createHash('sha256').update('hello\n').digest('hex'), size: 6 });
    } finally {
      closeFile(f);
    }
  });

  it('refuses a symlink, even one pointing inside the root', () => {
    writeFileSync(join(root, 'a.txt'), 'x');
    symlinkSync(join(root, 'a.txt'), join(root, 'link.txt'));
    expect(refusal(join(root, 'link.txt'))).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/symbolic link/) });
  });

  it('refuses a directory', () => {
    mkdirSync(join(root, 'd'));
    expect(refusal(join(root, 'd'))).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/directory/) });
  });

  it('refuses a FIFO without blocking on it', () => {
    execFileSync('mkfifo', [join(root, 'pipe')]);
    expect(refusal(join(root, 'pipe'))).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/FIFO/) });
  });

  it('refuses a character device', () => {
    expect(refusal('/dev/null', '/')).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/character device/) });
  });

  it('refuses a path outside the root, also through .. and through a symlinked directory', () => {
    writeFileSync(join(outside, 'secret.txt'), 'x');
    expect(refusal(join(outside, 'secret.txt'))?.code).toBe('E_DENIED');
    expect(refusal(join(root, '..', 'outside', 'secret.txt'))?.code).toBe('E_DENIED');
    symlinkSync(outside, join(root, 'door'));
    expect(refusal(join(root, 'door', 'secret.txt'))?.code).toBe('E_DENIED');
  });

  it('a folder outside the root is refused the same whether it exists or not; inside, a missing file is E_VALIDATION', () => {
    const existing = refusal(join(outside, 'nothing.txt'));
    const missing = refusal(join(dir, 'no-such-folder', 'nothing.txt'));
    expect(existing?.code).toBe('E_DENIED');
    expect(missing?.code).toBe('E_DENIED');
    expect(refusal(join(root, 'no-such-folder', 'nothing.txt'))?.code).toBe('E_VALIDATION');
    expect(refusal(join(root, 'nothing.txt'))?.code).toBe('E_VALIDATION');
  });

  it('refuses a path holding a control character (a NUL above all) with E_VALIDATION', () => {
    writeFileSync(join(root, 'a.txt'), 'x');
    for (const p of [join(root, 'a\u0000.txt'), join(root, 'a\n.txt'), `${join(root, 'a.txt')}\u0000`]) {
      expect(refusal(p), JSON.stringify(p)).toMatchObject({ code: 'E_VALIDATION', message: expect.stringMatching(/control character/) });
    }
  });

  it('follows a symlinked directory that stays inside the root', () => {
    mkdirSync(join(root, 'real'));
    writeFileSync(join(root, 'real', 'a.txt'), 'x');
    symlinkSync(join(root, 'real'), join(root, 'alias'));
    expect(refusal(join(root, 'alias', 'a.txt'))).toBeNull();
  });

  it('a sibling directory whose name starts like the root is outside it', () => {
    mkdirSync(`${root}-evil`);
    writeFileSync(join(`${root}-evil`, 'a.txt'), 'x');
    expect(refusal(join(`${root}-evil`, 'a.txt'))?.code).toBe('E_DENIED');
    expect(isInside('/a/b', '/a/b-c')).toBe(false);
    expect(isInside('/', '/a')).toBe(true);
  });

  it('accepts a hard-linked file when every link is inside the root', () => {
    mkdirSync(join(root, 'sub'));
    writeFileSync(join(root, 'a.txt'), 'x');
    linkSync(join(root, 'a.txt'), join(root, 'sub', 'b.txt'));
    expect(refusal(join(root, 'sub', 'b.txt'))).toBeNull();
  });

  it('refuses a hard link whose other name is outside the root (E_DENIED)', () => {
    writeFileSync(join(outside, 'secret.txt'), 'x');
    linkSync(join(outside, 'secret.txt'), join(root, 'alias.txt'));
    expect(refusal(join(root, 'alias.txt'))).toMatchObject({ code: 'E_DENIED', message: expect.stringMatching(/hard links/) });
  });

  it('refuses a missing file and a missing root clearly', () => {
    expect(refusal(join(root, 'nope.txt'))?.code).toBe('E_VALIDATION');
    expect(refusal(join(root, 'a.txt'), join(dir, 'no-root'))?.code).toBe('E_VALIDATION');
  });
});

describe('countLinksUnder', () => {
  it('counts names of one inode under a tree and stops at its limit', () => {
    writeFileSync(join(root, 'a'), 'x');
    mkdirSync(join(root, 'd'));
    linkSync(join(root, 'a'), join(root, 'd', 'b'));
    for (let i = 0; i < 20; i++) writeFileSync(join(root, `f${i}`), 'y');
    const f = openRegularFile(join(root, 'a'), root);
    try {
      expect(countLinksUnder(root, f.stat.dev, f.stat.ino, 1000)).toEqual({ count: 2, complete: true });
      expect(countLinksUnder(root, f.stat.dev, f.stat.ino, 5).complete).toBe(false);
    } finally {
      closeFile(f);
    }
  });
});

import { describe, expect, it } from 'vitest';
import { inScanScope, isIgnoredName, isScannedFileName, pathProblem, showRawName } from './scope.js';
import { progressLine, terminalProgress } from './progress.js';

describe('what a scan ignores is fixed [SCAN-1]', () => {
  const ignored = ['.git', '.obsidian', '.trash', '.DS_Store', '.note.md.swp', '.#note.md', 'note.md~', '#note.md#', '~$note.md', '4913', 'note.md.tmp', 'x.crswap', 'state.sqlite-wal'];
  for (const name of ignored) it(`ignores ${name}`, () => expect(isIgnoredName(name)).toBe(true));
  for (const name of ['note.md', 'Note.MD', 'data.yaml', 'x.yml', 'long.markdown']) {
    it(`scans ${name}`, () => expect(isScannedFileName(name)).toBe(true));
  }
  for (const name of ['picture.png', 'doc.pdf', 'notes.txt', '.hidden.md']) {
    it(`does not scan ${name}`, () => expect(isScannedFileName(name)).toBe(false));
  }
  it('descriptors are scanned, retained originals and hidden folders are not', () => {
    expect(inScanScope('private/evidence/src-1.yaml', 'private')).toBe(true);
    expect(inScanScope('private/evidence/src-1/notes.md', 'private')).toBe(false);
    // Sharded evidence: descriptors in evidence/<hh>/ are scanned, source folders are not.
    expect(inScanScope('private/evidence/ab/src-ab12.yaml', 'private')).toBe(true);
    expect(inScanScope('private/evidence/ab/src-ab12/notes.md', 'private')).toBe(false);
    expect(inScanScope('private/evidence/ab/src-ab12/deeper/notes.md', 'private')).toBe(false);
    expect(inScanScope('private/.trash/old.md', 'private')).toBe(false);
    expect(inScanScope('conversations/s1/pages/a.md', 'conversations/s1')).toBe(true);
    expect(inScanScope('conversations/s10/pages/a.md', 'conversations/s1')).toBe(false);
  });
  it('names Git cannot take portably are refused with a reason', () => {
    expect(pathProblem('private/a\\b.md')).toMatch(/backslash/);
    expect(pathProblem('private/a\nb.md')).toMatch(/control/);
    expect(pathProblem('private/ok.md')).toBeNull();
  });
  it('refuses the names Git takes for its own .git folder (core.protectNTFS / protectHFS), and only those', () => {
    for (const p of ['private/git~1/a.md', 'private/GIT~1/a.md', 'private/x/git~1. . /a.md', 'private/\u200c.git/a.md', 'private/.g\u200dit/a.md', 'private/git~1:stream/a.md']) {
      expect(pathProblem(p), p).toMatch(/Git takes .* for its own \.git folder/);
    }
    for (const p of ['private/git~1.md', 'private/git~2/a.md', 'private/git/a.md', 'private/dotgit/a.md', 'private/my.git/a.md', 'private/git~10/a.md']) {
      expect(pathProblem(p), p).toBeNull();
    }
  });
  it('applies Git\'s HFS and NTFS rules each on its own, as git 2.39 with core.protectHFS and core.protectNTFS does: never the two combined', () => {
    // Each checked against `git -c core.protectNTFS=true -c core.protectHFS=true update-index --add`.
    const refused = ['.git', '.GIT', '.git. ', '.git:x', 'GiT~1 .:', '.g\u200cit', '\u200c.git', '.git\u200c', '.GI\ufeffT', '\u202e.git', '.\u206fg\u206ei\u206dt\ufeff'];
    const accepted = ['g\u200cit~1', '\u200cgit~1', 'git~1\u200c', 'g\u200dit~1:x', '.g\u200cit.', '.g\u200cit ', '.g\u200cit:x', '\u200c.git.', '.git\u200c.', '.g\u200cit~1', '.git~1', 'git~1~', '.gıt', '.gİt'];
    for (const c of refused) expect(pathProblem(`private/${c}/a.md`), JSON.stringify(c)).toMatch(/Git takes .* for its own \.git folder/);
    for (const c of accepted) expect(pathProblem(`private/${c}/a.md`), JSON.stringify(c)).toBeNull();
  });
  it('shows bytes that are not UTF-8 as \\xNN and keeps the rest', () => {
    expect(showRawName(Buffer.from([0x61, 0xff, 0xc3, 0xa9, 0x2e, 0x6d, 0x64]))).toBe('a\\xffé.md');
  });
});

describe('progress bar [SCAN-4]', () => {
  it('draws a bar against the files Knowledge knew', () => {
    expect(progressLine({ phase: 'walk', seen: 50, expected: 100, hashed: 3 }, 10)).toBe('scanning [#####-----] 50% 50/100 files, 3 read');
    expect(progressLine({ phase: 'walk', seen: 7, expected: 0, hashed: 0 })).toBe('scanning 7 files');
  });
  it('while sources found on disk are adopted, counts their originals hashed', () => {
    expect(progressLine({ phase: 'adopt', seen: 900, expected: 0, hashed: 900, adopting: { done: 3, of: 12 } }, 8)).toBe('adopting sources [##------] 25% 3/12 originals hashed');
  });
  it('stays silent for short scans and clears its line at the end', () => {
    let t = 0;
    const out: string[] = [];
    const bar = terminalProgress((s) => out.push(s), { delayMs: 500, intervalMs: 100, now: () => t });
    bar.update({ phase: 'walk', seen: 1, expected: 2, hashed: 0 });
    expect(out).toEqual([]);
    t = 600;
    bar.update({ phase: 'walk', seen: 2, expected: 2, hashed: 0 });
    t = 650;
    bar.update({ phase: 'walk', seen: 2, expected: 2, hashed: 0 }); // throttled
    bar.done();
    expect(out).toHaveLength(2);
    expect(out[0]).toContain('100%');
    expect(out[1]).toBe('\r\x1b[2K');
  });
});

import { describe, expect, it } from 'vitest';
import { errorLine } from './main.js';
import { KnowledgeError } from '../errors.js';
import { keptButUnfinished } from '../service.js';

/** Appendix A: a rejected request prints one line on stderr, starting with a stable code. */
describe('errorLine', () => {
  const sqliteFull = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
  const bug = new TypeError('x is not a function\nsecond line');

  it('a KnowledgeError is its code and message on one line', () => {
    expect(errorLine(new KnowledgeError('E_CONFLICT', 'two\nlines'), {})).toBe('E_CONFLICT: two lines\n');
  });

  it('a message naming a path or text with control characters shows them as \\xNN: it cannot send escape sequences to the terminal', () => {
    expect(errorLine(new KnowledgeError('E_VALIDATION', 'cannot read a\u001b[2J\u009b\u0007.md: no such file'), {})).toBe('E_VALIDATION: cannot read a\\x1b[2J\\x9b\\x07.md: no such file\n');
    expect(errorLine(new TypeError('bad \u001b]0;title\u0007'), {})).toMatch(/^E_INTERNAL: bad \\x1b\]0;title\\x07 /);
  });

  it('a full disk met unexpectedly (SQLite or the file system) is E_IO naming the cause', () => {
    expect(errorLine(sqliteFull, {})).toMatch(/^E_IO: the disk is full \(SQLITE_FULL: database or disk is full\); free space, then knowledge activity shows what was kept: resume a kept request[^\n]*\n$/);
    expect(errorLine(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }), {})).toMatch(/^E_IO: the disk is full \(ENOSPC/);
  });

  it('an I/O error (SQLite or the file system) is E_IO, not a bug', () => {
    expect(errorLine(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_FSYNC' }), {})).toMatch(/^E_IO: the disk or file system failed \(SQLITE_IOERR_FSYNC: disk I\/O error\); check it, then /);
    expect(errorLine(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }), {})).toMatch(/^E_IO: the disk or file system failed \(EIO/);
  });

  it('any other error is one E_INTERNAL line; its stack only with KNOWLEDGE_DEBUG=1', () => {
    const line = errorLine(bug, {});
    expect(line).toBe('E_INTERNAL: x is not a function second line (a bug: KNOWLEDGE_DEBUG=1 shows where)\n');
    const debug = errorLine(bug, { KNOWLEDGE_DEBUG: '1' });
    expect(debug.startsWith(line)).toBe(true);
    expect(debug.slice(line.length)).toMatch(/^TypeError: x is not a function/);
  });

  it('a publication kept after its journal: a file-system error is E_IO, a bug E_INTERNAL with its own stack on request', () => {
    const errno = (code: string) => Object.assign(new Error(`${code}: refused, mkdir '/v/private'`), { code });
    for (const code of ['EACCES', 'EPERM', 'EMFILE', 'ENOSPC', 'EIO']) expect(keptButUnfinished(errno(code), 'pub-1', 'req-1').code, code).toBe('E_IO');
    expect(keptButUnfinished(sqliteFull, 'pub-1', 'req-1').code).toBe('E_IO');
    expect(keptButUnfinished(new KnowledgeError('E_TOO_LARGE', 'x'), 'pub-1', 'req-1').code).toBe('E_TOO_LARGE');
    const wrapped = keptButUnfinished(bug, 'pub-1', 'req-1');
    expect(wrapped.code).toBe('E_INTERNAL');
    expect(errorLine(wrapped, {})).toMatch(/^E_INTERNAL: publication pub-1 \(request req-1\) is journaled and kept, but could not be installed and acknowledged: x is not a function;[^\n]*\n$/);
    expect(errorLine(wrapped, { KNOWLEDGE_DEBUG: '1' })).toMatch(/\nTypeError: x is not a function/);
  });
});

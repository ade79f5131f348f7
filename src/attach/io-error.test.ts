import { describe, expect, it } from 'vitest';
import { ioError } from './io-error.js';
import { KnowledgeError } from '../errors.js';

describe('ioError', () => {
  it('a file-system or SQLite failure is E_IO with its cause; a full disk says so', () => {
    expect(ioError(Object.assign(new Error('write failed'), { code: 'ENOSPC' }), 'ctx')).toMatchObject({ code: 'E_IO', message: 'ctx: the disk is full (ENOSPC)', details: { cause: 'ENOSPC', diskFull: true } });
    expect(ioError(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_WRITE' }), 'ctx')).toMatchObject({ code: 'E_IO', message: 'ctx: disk I/O error' });
    expect(ioError(Object.assign(new Error('permission denied'), { code: 'EACCES' }), 'ctx')).toMatchObject({ code: 'E_IO' });
  });

  it('a fault of the program (a TypeError) is E_INTERNAL, not an E_IO that asks for a retry failing the same way', () => {
    expect(ioError(new TypeError('t.startsWith is not a function'), 'ctx')).toMatchObject({ code: 'E_INTERNAL', message: 'ctx: t.startsWith is not a function' });
  });

  it('a KnowledgeError passes through', () => {
    const e = new KnowledgeError('E_CONFLICT', 'taken');
    expect(ioError(e, 'ctx')).toBe(e);
  });
});

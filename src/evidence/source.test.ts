import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { createHash } from 'node:crypto';
import { descriptorBytesOf, type RetainedSource } from './source.js';
import { vaultFileHolds } from '../fsutil.js';

describe('a source\'s files, put back', () => {
  const row: RetainedSource = {
    source_id: 'src-0123456789abcdef01234567', sha256: 'ab'.repeat(32), size: 12, media_type: 'text/plain',
    path: 'private/evidence/01/src-0123456789abcdef01234567/notes.txt', descriptor_path: 'private/evidence/01/src-0123456789abcdef01234567.yaml',
    in_history: 1, attributions: JSON.stringify([{ attribution: 'design review', publicationId: 'pub-1', at: 't' }, { attribution: 'later' }]),
    created_at: '2026-12-01T00:00:00.000Z', descriptor: null, attached_name: null,
  };

  it('the descriptor kept with the row is put back byte for byte', () => {
    expect(descriptorBytesOf({ ...row, descriptor: Buffer.from('exact: bytes\n') }).toString()).toBe('exact: bytes\n');
  });

  it('a source retained before descriptors were kept (migration 018) gets one written from its row', () => {
    expect(YAML.parse(descriptorBytesOf(row).toString())).toEqual({
      format: 'knowledge-source-v1', source_id: row.source_id, retained_path: row.path, sha256: row.sha256, size: 12,
      media_type: 'text/plain', original_name: 'notes.txt', attribution: 'design review', retained_at: row.created_at, in_history: true,
    });
  });

  it('one an attachment retained before then names its original as the attachment did', () => {
    expect(YAML.parse(descriptorBytesOf({ ...row, attached_name: 'My Notes.TXT' }).toString())).toMatchObject({ original_name: 'My Notes.TXT' });
  });

  it('vaultFileHolds: the same bytes only, never through a symbolic link', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kn-src-'));
    try {
      const bytes = Buffer.from('exact bytes\n');
      const sha = createHash('sha256').update(bytes).digest('hex');
      writeFileSync(join(dir, 'a'), bytes);
      writeFileSync(join(dir, 'b'), 'other bytes\n'); // same size, other bytes
      symlinkSync(join(dir, 'a'), join(dir, 'link'));
      expect(vaultFileHolds(dir, 'a', sha, bytes.length)).toBe(true);
      expect(vaultFileHolds(dir, 'b', sha, bytes.length)).toBe(false);
      expect(vaultFileHolds(dir, 'a', sha, bytes.length + 1)).toBe(false);
      expect(vaultFileHolds(dir, 'link', sha, bytes.length)).toBe(false);
      expect(vaultFileHolds(dir, 'missing', sha, bytes.length)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Evidence sources: content-addressed retained originals with an immutable
 * YAML descriptor (source id, retained path, SHA-256, size, media type,
 * attribution). Same bytes in a partition -> the same source.
 */
import { join, posix } from 'node:path';
import { onDiskAt, vaultFileHolds } from '../fsutil.js';
import { yaml } from '../yaml-lazy.js';
import { slugForTitle } from '../records/filename.js';
import { KnowledgeError } from '../errors.js';
import type { DB } from '../store/db.js';

export const SOURCE_FORMAT = 'knowledge-source-v1';

export function sourceIdFor(sha256: string): string {
  return `src-${sha256.slice(0, 24)}`;
}

/** A safe file name for the retained original: slug of the stem + a safe extension. */
export function retainedFileName(original: string): string {
  const base = original.split(/[\\/]/).pop() ?? 'original';
  const dot = base.lastIndexOf('.');
  const stem = dot > 0 ? base.slice(0, dot) : base;
  const extRaw = dot > 0 ? base.slice(dot + 1) : '';
  const ext = /^[A-Za-z0-9]{1,12}$/.test(extRaw) ? `.${extRaw.toLowerCase()}` : '';
  const slug = slugForTitle(stem) || 'original';
  return `${slug}${ext}`;
}

export interface SourceDescriptor {
  format: typeof SOURCE_FORMAT;
  source_id: string;
  retained_path: string;
  sha256: string;
  size: number;
  media_type: string;
  original_name: string;
  attribution: string;
  retained_at: string;
  in_history: boolean;
}

export function descriptorText(d: SourceDescriptor): string {
  return yaml().stringify(d, { version: '1.2' });
}

/**
 * Where a source lives: `<partition>/evidence/<hh>/<sourceId>/<file>` and its
 * descriptor beside that folder, `<hh>` being the first two hex digits of the
 * content hash in the source id. Like record folders (records/filename.ts),
 * the 256 shards keep every Git tree small: each new source adds two entries
 * to its folder, and a commit rewrites every folder it touches.
 */
export function sourcePaths(partitionDir: string, sourceId: string, fileName: string): { dir: string; path: string; descriptorPath: string } {
  const shard = /^src-([0-9a-f]{2})/.exec(sourceId)?.[1];
  if (!shard) throw new TypeError(`not a source id: ${JSON.stringify(sourceId)}`);
  const dir = `${partitionDir}/evidence/${shard}/${sourceId}`;
  return { dir, path: `${dir}/${fileName}`, descriptorPath: `${dir}.yaml` };
}

/**
 * For originals kept out of history [GIT-9]: a .gitignore beside the original,
 * committed with the publication, keeps it out of the user's `git status`
 * without touching any Git configuration.
 */
export const EXCLUDED_GITIGNORE = '# Knowledge: this retained original stays out of automatic history [GIT-9]\n*\n!.gitignore\n';

/**
 * A new source's paths (original, descriptor, the .gitignore of one kept out
 * of history) that already hold something, when the partition has no such
 * source recorded (a vault cloned or restored without the store's state, or
 * files copied there by hand from another partition, say): E_CONFLICT before
 * anything is written, so nothing of the user's is replaced [PUB-1]. The
 * error names the remedy: a scan adopts such a source when its descriptor
 * and original agree (scan/adopt.ts), else move the files away.
 */
export function refuseOccupiedSourcePaths(vault: string, what: string, partition: string, sourceId: string, paths: readonly string[], then: string): void {
  for (const p of paths) {
    if (onDiskAt(join(vault, p))) {
      throw new KnowledgeError('E_CONFLICT', `${what}: ${p} is already in the vault, but ${partition} has no source ${sourceId} recorded (the vault came without the store's state, as a clone does, or it was copied there by hand?); run \`knowledge scan\`: it adopts a source whose descriptor and original agree where they lie; or move it away; then ${then}`);
    }
  }
}

/** One attribution of a source: who gave its bytes, and when (a publication, an attachment, or a scan that adopted it). */
export interface SourceAttribution {
  attribution: string;
  publicationId?: string;
  attachmentId?: string;
  /** The scan that adopted a source found on disk (scan/adopt.ts). */
  scanId?: string;
  at: string;
}

/** A source's bytes and where its files lie: what a new `sources` row and a publication's plan both name. */
export interface SourceFiles {
  sourceId: string;
  sha256: string;
  size: number;
  mediaType: string;
  /** The retained original. */
  path: string;
  descriptorPath: string;
  inHistory: boolean;
}

/** The `.gitignore` beside an original kept out of history, which keeps it out of your own commits too. */
export function ignoreBeside(originalPath: string): string {
  return `${posix.dirname(originalPath)}/.gitignore`;
}

/** A new `sources` row: what a publication, an attachment or a scan's adoption records. */
export interface NewSource extends SourceFiles {
  partition: string;
  attributions: readonly SourceAttribution[];
  createdAt: string;
  /** The descriptor's exact bytes (migration 018). */
  descriptor: Buffer | null;
}

/** The one statement that records a new source, prepared once for a transaction's rows. */
export function sourceInserter(db: DB): (s: NewSource) => void {
  const ins = db.prepare(
    `INSERT INTO sources(partition, source_id, sha256, size, media_type, path, descriptor_path, in_history, attributions, created_at, descriptor)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  return (s) => {
    ins.run(s.partition, s.sourceId, s.sha256, s.size, s.mediaType, s.path, s.descriptorPath, s.inHistory ? 1 : 0,
      JSON.stringify(s.attributions), s.createdAt, s.descriptor);
  };
}

/** A `sources` row as far as putting its files back needs it. */
export interface RetainedSource {
  source_id: string;
  sha256: string;
  size: number;
  media_type: string;
  path: string;
  descriptor_path: string;
  in_history: number;
  attributions: string;
  created_at: string;
  /** Migration 018: null for a source retained before it. */
  descriptor: Buffer | null;
  /** The file name of the attachment that retained it, if one did (RETAINED_SOURCE_COLUMNS). */
  attached_name: string | null;
}

/**
 * The descriptor a source's row says it has: the bytes Knowledge wrote
 * (migration 018), or, for a source retained before they were kept, written
 * again from the row — as it was for one an attachment retained (its file
 * name is kept with the attachment), with the retained file's name standing
 * for the original one for one a publication retained.
 */
export function descriptorBytesOf(row: RetainedSource): Buffer {
  if (row.descriptor !== null) return row.descriptor;
  const first = (JSON.parse(row.attributions) as Array<{ attribution?: string }>)[0];
  return Buffer.from(descriptorText({
    format: SOURCE_FORMAT, source_id: row.source_id, retained_path: row.path, sha256: row.sha256, size: row.size,
    media_type: row.media_type, original_name: row.attached_name ?? posix.basename(row.path), attribution: first?.attribution ?? '', retained_at: row.created_at,
    in_history: row.in_history === 1,
  }), 'utf8');
}

/** The refusal for a source whose original no longer holds its bytes: the user's file is theirs to move, never replaced. */
function changedOriginal(what: string, path: string, sourceId: string, then: string): KnowledgeError {
  return new KnowledgeError('E_CONFLICT', `${what}: ${path} no longer holds the bytes of source ${sourceId} (edited or replaced by hand?); move it away, then ${then}: the same bytes given again put the original back`);
}

/** The `sources` columns of a {@link RetainedSource}. */
export const RETAINED_SOURCE_COLUMNS = `source_id, sha256, size, media_type, path, descriptor_path, in_history, attributions, created_at, descriptor,
  (SELECT a.filename FROM attachments a WHERE a.partition = sources.partition AND a.sha256 = sources.sha256 AND a.state = 'completed'
     AND sources.created_at IN (a.created_at, a.completed_at) LIMIT 1) AS attached_name`;

/** What of an existing source is gone from the vault, to put back when its bytes are given again. */
export interface SourcePutBack {
  /** The original was deleted by hand (for one kept out of history, its only copy). */
  original: boolean;
  /** The .gitignore beside a kept-out original, gone with it (history holds it). */
  gitignore: string | null;
  /** The descriptor's bytes, when it was deleted by hand. */
  descriptor: Buffer | null;
}

/**
 * The same bytes given again for an existing source (publish and attach):
 * which of its files to put back, or E_CONFLICT for an original that no
 * longer holds its bytes (edited or replaced by hand: the user's to move,
 * never overwritten, and scans never record originals, so those bytes are in
 * no history).
 */
export function sourcePutBack(vault: string, existing: RetainedSource, what: string, then: string): SourcePutBack {
  const out: SourcePutBack = { original: false, gitignore: null, descriptor: null };
  if (!onDiskAt(join(vault, existing.path))) {
    out.original = true;
    const ignore = ignoreBeside(existing.path);
    if (existing.in_history === 0 && !onDiskAt(join(vault, ignore))) out.gitignore = ignore;
  } else if (!vaultFileHolds(vault, existing.path, existing.sha256, existing.size)) {
    throw changedOriginal(what, existing.path, existing.source_id, then);
  }
  if (!onDiskAt(join(vault, existing.descriptor_path))) out.descriptor = descriptorBytesOf(existing);
  return out;
}

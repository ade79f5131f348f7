/**
 * Evidence sources: content-addressed retained originals with an immutable
 * YAML descriptor (source id, retained path, SHA-256, size, media type,
 * attribution). Same bytes in a partition -> the same source.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { yaml } from '../yaml-lazy.js';
import { slugForTitle } from '../records/filename.js';
import { KnowledgeError } from '../errors.js';

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

/** Whether anything is at `abs` (not following a link); a file where a folder should be is the writer's check to report. */
export function onDiskAt(abs: string): boolean {
  try {
    return lstatSync(abs, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

/**
 * A new source's paths (original, descriptor, the .gitignore of one kept out
 * of history) that already hold something, when the partition has no such
 * source recorded (copied there by hand from another partition, say): E_CONFLICT
 * before anything is written, so nothing of the user's is replaced [PUB-1].
 */
export function refuseOccupiedSourcePaths(vault: string, what: string, partition: string, sourceId: string, paths: readonly string[], then: string): void {
  for (const p of paths) {
    if (onDiskAt(join(vault, p))) {
      throw new KnowledgeError('E_CONFLICT', `${what}: ${p} is already in the vault, but ${partition} has no source ${sourceId} recorded (copied there by hand?); move it away, then ${then}`);
    }
  }
}

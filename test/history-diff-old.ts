/**
 * recordDiff as it was before it read only its two versions: the whole
 * history first, then its versions (the test's reference for equivalence).
 */
import { expect } from 'vitest';
import { KnowledgeError } from '../src/errors.js';
import { diffVersions } from '../src/read/history.js';
import { isFullCommitId } from '../src/read/query.js';
import type { Caller } from '../src/access.js';
import type { KnowledgeService } from '../src/service.js';
import type { RecordDiff } from '../src/read/types.js';

export async function oldRecordDiff(svc: KnowledgeService, caller: Caller, id: string, from: string, to: string): Promise<RecordDiff> {
  const idLike = /^[0-9a-f]{7,64}$/;
  if (!idLike.test(from) || !idLike.test(to)) {
    throw new KnowledgeError('E_VALIDATION', 'from and to must be commit ids: hexadecimal, whole or at least their first 7 digits');
  }
  const history = await svc.recordHistory(caller, id);
  const whole = (c: string): string => {
    if (isFullCommitId(c)) return c;
    const matches = [...new Set(history.versions.map((v) => v.commit).filter((v) => v.startsWith(c)))];
    if (matches.length > 1) throw new KnowledgeError('E_VALIDATION', `commit ${c} names ${matches.length} versions of ${id}; give more digits`);
    return matches[0] ?? c;
  };
  return diffVersions(svc.runner, svc.store.paths.vault, history, whole(from), whole(to));
}

type Outcome = { ok: RecordDiff } | { error: unknown; code: string; message: string };

async function outcome(p: () => Promise<RecordDiff>): Promise<Outcome> {
  try {
    return { ok: await p() };
  } catch (error) {
    return { error, code: error instanceof KnowledgeError ? error.code : 'not a KnowledgeError', message: String((error as Error).message) };
  }
}

/** `svc` with a recordDiff that checks each answer (diff or error) against the old code path's. */
export function checkingDiffs(svc: KnowledgeService): KnowledgeService {
  const fast = svc.recordDiff.bind(svc);
  svc.recordDiff = async (caller, id, from, to) => {
    const got = await outcome(() => fast(caller, id, from, to));
    const want = await outcome(() => oldRecordDiff(svc, caller, id, from, to));
    const shown = (o: Outcome) => ('ok' in o ? o : { code: o.code, message: o.message });
    expect(shown(got), `recordDiff(${id}, ${from}, ${to})`).toEqual(shown(want));
    if ('ok' in got) return got.ok;
    throw got.error;
  };
  return svc;
}

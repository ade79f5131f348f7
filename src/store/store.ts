/**
 * Creating and opening a store [LAY-1..4]. Creating is an explicit act; a
 * store that lost its vault, manifest or database is E_UNAVAILABLE and is
 * never recreated empty [LAY-3].
 */
import { existsSync, readdirSync, readFileSync, lstatSync, statfsSync, type Stats } from 'node:fs';
import Database from 'better-sqlite3';
import { dirname, join, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import { atomicWrite, clearStaleTemps, mkdirDurable, isDirectory, isFile } from '../fsutil.js';
import { KnowledgeError, isKnowledgeError, isDiskFull, isErrnoError, isIoError } from '../errors.js';
import { crashPoint } from '../faults.js';
import { openDatabase, getMeta, setMeta, type DB } from './db.js';
import { storePaths, VAULT_FORMAT, type StorePaths } from './layout.js';
import { Registry, knowledgeHome, type StoreSettings } from './registry.js';
import { acquireWriterLock, releaseWriterLock } from './lock.js';
import { nowIso } from '../clock.js';

export interface VaultManifest {
  format: typeof VAULT_FORMAT;
  vaultId: string;
  createdAt: string;
}

export interface Store {
  paths: StorePaths;
  db: DB;
  manifest: VaultManifest;
  settings: StoreSettings;
  /** Whether `settings` come from the registry's entry; false: it lists no such store, and they are the store's own. */
  registered: boolean;
  /** The path the registry's entry is under, when registered: this store's root, its real path, or (moved, copied) another path of its vault id. */
  registeredAs: string | null;
  registry: Registry;
  /** True while this process holds the single-writer lock. */
  writer: boolean;
  /**
   * Read `settings` again from the registry: a long-running process (the
   * Gateway) calls it per request, so an operator's edit of `writesEnabled`
   * takes effect without a restart, as it does for the CLI and MCP, which
   * open the store per command or call.
   */
  reloadSettings(): void;
  close(): void;
}

export interface InitResult { store: string; vault: string; vaultId: string; writesEnabled: boolean; created: boolean }

export function initStore(dir: string, opts: { readOnly?: boolean; env?: NodeJS.ProcessEnv } = {}): InitResult {
  const root = resolve(dir);
  const paths = storePaths(root);
  const registry = new Registry(knowledgeHome(opts.env));
  const known = registry.get(root);
  const vaultStat = lstatOrNull(paths.vault);
  const hasVault = vaultStat !== null;
  const hasManifest = existsSync(paths.manifest);
  const hasDb = existsSync(paths.database);
  if (hasManifest && hasDb) {
    // Already a store: init is idempotent, but never changes an existing vault id.
    const manifest = readManifest(paths);
    requireDatabaseOpens(paths);
    // Registered here for the first time: as the registry has it under another path of the same store (moved, copied,
    // reached through a symbolic link — read-only wherever one entry says so, as an open takes it), else as it was
    // created (another KNOWLEDGE_HOME made it); whatever this init asks.
    const settings = known ?? registry.putIfAbsent(root, {
      vaultId: manifest.vaultId,
      writesEnabled: registry.settingsOf(root, manifest.vaultId)?.writesEnabled ?? createdWritable(paths) ?? !opts.readOnly,
      createdAt: manifest.createdAt,
    });
    return { store: root, vault: paths.vault, vaultId: manifest.vaultId, writesEnabled: settings.writesEnabled, created: false };
  }
  const enclosing = !known && !hasManifest && !hasDb ? enclosingStore(root) : null;
  if (!known && !hasVault && !hasManifest && !hasDb && enclosing === null && looksLikeVault(root)) {
    // A store made here would put its own vault (and repository) inside this one's work tree.
    throw new KnowledgeError('E_VALIDATION', `${root} is not a store: ${VAULT_NOT_STORE(root)}`);
  }
  if (enclosing !== null) {
    // A store inside a vault would put its state.sqlite in that vault (and in its Git history's work tree).
    throw new KnowledgeError(
      'E_VALIDATION',
      `${root} is inside the vault of the store ${enclosing}: a store keeps its state.sqlite outside its vault; use that store (--store ${enclosing}) or create one in a folder outside it`,
    );
  }
  // An init cut short (killed, or a full disk) after its database but before its manifest: never a store anyone
  // used (it had no manifest, so nothing opened it), so this init finishes it, under the id it had drawn.
  const unfinished = hasDb && !hasManifest && !known ? unfinishedInit(paths) : null;
  if ((known || hasManifest || hasDb) && unfinished === null) {
    throw new KnowledgeError(
      'E_UNAVAILABLE',
      `store ${root} is incomplete (${describeMissing(hasVault, hasManifest, hasDb)}); refusing to recreate it [LAY-3]` +
        (known && !hasManifest && !hasDb ? `; if you removed it on purpose, remove its entry from ${registry.file} first` : lostState(root, hasVault, hasManifest, hasDb, registry, known !== undefined)),
    );
  }
  // Adopting an existing folder of Markdown is allowed (scans will baseline it); anything else there is not.
  if (vaultStat?.isSymbolicLink()) {
    throw new KnowledgeError('E_VALIDATION', `${paths.vault} is a symbolic link; a vault must be a folder of its own (Knowledge never follows links out of it)`);
  }
  if (vaultStat && !vaultStat.isDirectory()) throw new KnowledgeError('E_VALIDATION', `${paths.vault} is not a directory`);
  const tooLong = databasePathTooLong(paths);
  if (tooLong) throw new KnowledgeError('E_VALIDATION', `cannot create the store ${root}: ${tooLong}; choose a shorter path`);
  // Where the registry lives must hold it before anything is created, or a store would be left unregistered.
  registry.requireWritable();
  const resumed = unfinished !== null && unfinished !== 'no-id' ? unfinished : null;
  const manifest: VaultManifest = resumed
    ? { format: VAULT_FORMAT, vaultId: resumed.vaultId, createdAt: resumed.createdAt }
    : { format: VAULT_FORMAT, vaultId: randomUUID(), createdAt: nowIso() };
  const writesEnabled = resumed ? resumed.writesEnabled : !opts.readOnly;
  try {
    mkdirDurable(paths.vault);
    mkdirDurable(paths.staging);
    // Keep our recovery files out of the user's `git status` without touching
    // any git configuration: a .gitignore inside the folder ignores the folder.
    atomicWrite(`${paths.history}/.gitignore`, '# Knowledge recovery files: never committed [GIT-13]\n*\n');
    if (!resumed) {
      const db = openDatabase(paths.database, { create: true });
      try {
        // Marked unfinished first, in the same transaction as the id: an init cut short from here on is finished by the next.
        db.transaction(() => {
          setMeta(db, INIT_UNFINISHED_META, '1');
          setMeta(db, 'vault_id', manifest.vaultId);
          setMeta(db, 'created_at', manifest.createdAt);
          setMeta(db, WRITES_ENABLED_META, writesEnabled ? '1' : '0');
        })();
      } finally {
        db.close();
      }
    }
    crashPoint('init-before-manifest');
    atomicWrite(paths.manifest, JSON.stringify(manifest, null, 2) + '\n');
    registry.put(root, { vaultId: manifest.vaultId, writesEnabled, createdAt: manifest.createdAt });
  } catch (err) {
    throw creationFailure(err, `cannot create the store ${root}`);
  }
  clearUnfinishedMark(paths);
  return { store: root, vault: paths.vault, vaultId: manifest.vaultId, writesEnabled, created: true };
}

/**
 * SQLite opens a database (and its -journal, -wal) only by a path shorter
 * than 512 bytes (its unix VFS's MAX_PATHNAME); past that it says no more
 * than "unable to open database file". Null when the store's path fits.
 */
function databasePathTooLong(paths: StorePaths): string | null {
  const bytes = Buffer.byteLength(`${paths.database}-journal`);
  return bytes < SQLITE_MAX_PATHNAME ? null : `its state.sqlite path is ${Buffer.byteLength(paths.database)} bytes long, and SQLite opens paths of at most ${SQLITE_MAX_PATHNAME - 1 - '-journal'.length} bytes`;
}
const SQLITE_MAX_PATHNAME = 512;

/** Kept in state.sqlite from the moment an init draws its vault id until the store is complete (manifest, registry). */
const INIT_UNFINISHED_META = 'init_unfinished';

/**
 * What an init cut short left in a database without a manifest: its id and settings to finish with; 'no-id' when
 * it was cut short after creating Knowledge's schema but before drawing the id (that database, still empty, is
 * used as it is); or null: anything else — a store that was complete and lost its manifest since, which is never
 * recreated [LAY-3], or a database that is not Knowledge's at all. Nothing is ever deleted.
 */
function unfinishedInit(paths: StorePaths): { vaultId: string; createdAt: string; writesEnabled: boolean } | 'no-id' | null {
  let db: InstanceType<typeof Database>;
  try {
    db = new Database(paths.database, { fileMustExist: true, readonly: true });
  } catch {
    return null;
  }
  try {
    const tables = new Set(db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").pluck().all() as string[]);
    // Knowledge's schema (migrations ran), and nothing written into it yet.
    const ours = (db.pragma('user_version', { simple: true }) as number) >= 1 && ['meta', 'batches', 'records', 'publications'].every((t) => tables.has(t));
    if (!ours) return null;
    const meta = (key: string) => db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key) as string | undefined;
    const vaultId = meta('vault_id');
    if (vaultId === undefined) {
      const empty = ['batches', 'records', 'publications'].every((t) => db.prepare(`SELECT 1 FROM ${t} LIMIT 1`).get() === undefined);
      return empty ? 'no-id' : null;
    }
    if (meta(INIT_UNFINISHED_META) !== '1') return null;
    return { vaultId, createdAt: meta('created_at') ?? nowIso(), writesEnabled: meta(WRITES_ENABLED_META) !== '0' };
  } catch {
    return null;
  } finally {
    db.close();
  }
}

/** The store is complete: the mark goes (best effort; while it stays, it only matters to a store without a manifest). */
function clearUnfinishedMark(paths: StorePaths): void {
  try {
    const db = openDatabase(paths.database, { create: false });
    try {
      db.prepare('DELETE FROM meta WHERE key = ?').run(INIT_UNFINISHED_META);
    } finally {
      db.close();
    }
  } catch {
    /* left for a later init */
  }
}

/** Whether the file system holding `dir` has no space left for an unprivileged writer (false when that cannot be told). */
function diskFull(dir: string): boolean {
  try {
    return statfsSync(dir).bavail === 0;
  } catch {
    return false;
  }
}

function lstatOrNull(p: string): Stats | null {
  try {
    return lstatSync(p);
  } catch {
    return null;
  }
}

/**
 * A file-system error while creating a store, as a coded error: a path that
 * cannot be a folder (a file in the way, a loop, a name too long) is the
 * caller's to fix (E_VALIDATION); anything else (permissions, a read-only or
 * full disk) is E_IO. Our own errors pass as they are.
 */
function creationFailure(err: unknown, what: string): unknown {
  const e = err as NodeJS.ErrnoException;
  if (!isErrnoError(err)) return err;
  const caller = ['ENOTDIR', 'EEXIST', 'ELOOP', 'ENAMETOOLONG', 'EISDIR'].includes(e.code ?? '');
  return new KnowledgeError(caller ? 'E_VALIDATION' : 'E_IO', `${what}: ${e.code}${e.path ? ` at ${e.path}` : ''} (${e.message.replace(/^[A-Z]+: /, '').split(',')[0]})`);
}

/** An existing store's database must open: init does not call a store whose state.sqlite is damaged or not a file healthy [LAY-3]. */
function requireDatabaseOpens(paths: StorePaths): void {
  try {
    const db = new Database(paths.database, { fileMustExist: true });
    try {
      db.pragma('user_version', { simple: true });
      db.prepare('SELECT 1 FROM meta LIMIT 1').get();
    } finally {
      db.close();
    }
  } catch (err) {
    throw new KnowledgeError('E_UNAVAILABLE', `store ${dirname(paths.database)} is damaged: its state.sqlite cannot be opened (${(err as Error).message}) [LAY-3]`);
  }
}

/**
 * Whether the store was created writable (`init` without `--read-only`), kept
 * in its own state.sqlite: what a registry that does not list the store goes
 * by, so a store created read-only is not writable through another
 * KNOWLEDGE_HOME [LAY-2]. The registry's entry, where there is one, decides
 * (editing `writesEnabled` there is how a store's setting is changed).
 */
const WRITES_ENABLED_META = 'created_writes_enabled';

/** The store's own record of how it was created; null for a store made before it was kept, or unreadable. */
function createdWritable(paths: StorePaths): boolean | null {
  let db: DB;
  try {
    db = openDatabase(paths.database, { create: false });
  } catch {
    return null;
  }
  try {
    const v = getMeta(db, WRITES_ENABLED_META);
    return v === undefined ? null : v !== '0';
  } finally {
    db.close();
  }
}

/**
 * The store whose vault holds `dir` (the vault itself or a folder in it), or
 * null: the nearest folder at or above `dir` that is its parent's vault
 * (storePaths) with a readable manifest beside the parent's database. What a
 * user who points `--store` at the vault, or runs `init` in it, means.
 */
export function enclosingStore(dir: string): string | null {
  for (let at = resolve(dir); dirname(at) !== at; at = dirname(at)) {
    const around = storePaths(dirname(at));
    if (around.vault !== at || !isFile(around.manifest) || !isFile(around.database)) continue;
    try {
      readManifest(around);
      return around.root;
    } catch {
      // not a manifest of ours
    }
  }
  return null;
}

/**
 * Whether `dir` is itself a vault, not a store (a folder holding one as `vault/`): a Git repository with a
 * partition's record or evidence folders at its top (`private/pages/`, `conversations/<id>/claims/`, …) — a clone
 * or copy of a vault's repository. A repository that merely has a `private/` or `conversations/` folder is not.
 */
function looksLikeVault(dir: string): boolean {
  if (lstatOrNull(join(dir, '.git')) === null || isDirectory(join(dir, 'vault'))) return false;
  const partitionShaped = (p: string) => ['pages', 'claims', 'relationships', 'evidence'].some((d) => isDirectory(join(p, d)));
  if (partitionShaped(join(dir, 'private'))) return true;
  let sessions: string[];
  try {
    sessions = readdirSync(join(dir, 'conversations')).slice(0, 64);
  } catch {
    return false;
  }
  return sessions.some((s) => partitionShaped(join(dir, 'conversations', s)));
}

const VAULT_NOT_STORE = (dir: string) =>
  `it looks like a vault itself (a clone or copy of one: a Git repository holding a partition's pages/, claims/, ` +
  `relationships/ or evidence/ under private/ or conversations/); a store is ` +
  `the folder that holds a vault as vault/ beside its state.sqlite: to use this one, move it into a new folder as vault/ ` +
  `(mkdir STORE && mv ${dir} STORE/vault) and run knowledge init STORE, which adopts it (scans record its files; its Git history is kept)`;

/** The way forward for a store whose state.sqlite is gone while its vault is there (LAY-3: never recreated by itself). */
function lostState(root: string, hasVault: boolean, hasManifest: boolean, hasDb: boolean, registry: Registry, known: boolean): string {
  if (!hasVault || hasDb) return '';
  const remove = [hasManifest && join(root, 'vault', 'vault.json'), known && `this store's entry from ${registry.file}`].filter(Boolean);
  return `: restore state.sqlite from a backup taken together with this vault; without one, a new state for these files ` +
    `(their Git history kept; receipts, activity and the journal of earlier requests lost) is made by ` +
    `${remove.length ? `removing ${remove.join(' and ')}, then ` : ''}knowledge init ${root}`;
}

function describeMissing(vault: boolean, manifest: boolean, db: boolean): string {
  const missing = [!vault && 'vault directory', !manifest && 'vault/vault.json', !db && 'state.sqlite'].filter(Boolean);
  return missing.length ? `missing ${missing.join(', ')}` : 'inconsistent';
}

function readManifest(paths: StorePaths): VaultManifest {
  try {
    const m = JSON.parse(readFileSync(paths.manifest, 'utf8')) as VaultManifest;
    if (m.format !== VAULT_FORMAT || typeof m.vaultId !== 'string') throw new Error('not a knowledge vault manifest');
    return m;
  } catch (err) {
    throw new KnowledgeError('E_UNAVAILABLE', `vault manifest ${paths.manifest} is unreadable: ${(err as Error).message}`);
  }
}

export interface OpenOptions {
  /** Take the single-writer lock [LAY-4]. */
  write: boolean;
  /** Shown to other processes that find the lock held. */
  command?: string;
  env?: NodeJS.ProcessEnv;
}

export function openStore(dir: string, opts: OpenOptions): Store {
  const root = resolve(dir);
  const paths = storePaths(root);
  const registry = new Registry(knowledgeHome(opts.env));
  const hasVault = isDirectory(paths.vault);
  const hasManifest = isFile(paths.manifest);
  const hasDb = isFile(paths.database);
  if (!hasVault || !hasManifest || !hasDb) {
    const known = registry.get(root);
    const never = !hasVault && !hasManifest && !hasDb && !known;
    const enclosing = never ? enclosingStore(root) : null;
    const what = enclosing !== null
      ? `no store at ${root}: it is inside the vault of the store ${enclosing} (use --store ${enclosing})`
      : never && looksLikeVault(root)
      ? `no store at ${root}: ${VAULT_NOT_STORE(root)}`
      : never
      ? `no store at ${root} (create one with: knowledge init ${dir})`
      : `store ${root} is unavailable: ${describeMissing(hasVault, hasManifest, hasDb)}; it is not recreated [LAY-3]${lostState(root, hasVault, hasManifest, hasDb, registry, known !== undefined)}`;
    throw new KnowledgeError('E_UNAVAILABLE', what);
  }
  const manifest = readManifest(paths);
  const tooLong = databasePathTooLong(paths);
  if (tooLong) throw new KnowledgeError('E_UNAVAILABLE', `state.sqlite of ${root} cannot be opened: ${tooLong}; move the store to a shorter path`);
  let db: DB;
  try {
    db = openDatabase(paths.database, { create: false });
  } catch (err) {
    // A full or failing disk is not a damaged store: say which, so nobody goes looking for a lost file.
    const full = diskFull(root);
    if (isDiskFull(err) || isIoError(err) || full) {
      throw new KnowledgeError('E_IO', `state.sqlite of ${root} cannot be opened: ${(err as Error).message}${full ? ' (the disk is full: free space, then retry)' : ' (the disk or file system failed)'}`);
    }
    throw new KnowledgeError('E_UNAVAILABLE', `state.sqlite of ${root} cannot be opened: ${(err as Error).message}`);
  }
  const dbVault = getMeta(db, 'vault_id');
  if (dbVault !== manifest.vaultId) {
    db.close();
    throw new KnowledgeError('E_UNAVAILABLE', `store ${root}: vault.json (${manifest.vaultId}) does not belong to state.sqlite (${dbVault ?? 'none'})`);
  }
  // A registry that does not list the store (another KNOWLEDGE_HOME, or none yet): the store as it was created.
  const settingsNow = (): { settings: StoreSettings; registered: boolean; registeredAs: string | null } => {
    let entry: { key: string; settings: StoreSettings } | undefined;
    try {
      entry = registry.entryOf(root, manifest.vaultId);
    } catch (err) {
      // A reader opens a store by its path [LAY-2] also where the registry cannot be read, with the settings the
      // store keeps itself. A writer may not: the registry's writesEnabled could say no.
      if (opts.write || !isKnowledgeError(err) || err.code !== 'E_UNAVAILABLE') throw err;
      entry = undefined;
    }
    return {
      settings: entry?.settings ?? { vaultId: manifest.vaultId, writesEnabled: getMeta(db, WRITES_ENABLED_META) !== '0', createdAt: manifest.createdAt },
      registered: entry !== undefined,
      registeredAs: entry?.key ?? null,
    };
  };
  let writer = false;
  let releaseFileLock = () => {};
  /** What this open holds, given back: the writer lock (its row, then its file) and the database. */
  const release = () => {
    if (writer) {
      try { releaseWriterLock(db); } catch { /* the lock of a dead pid is taken over anyway */ }
    }
    db.close();
    releaseFileLock();
  };
  let now: ReturnType<typeof settingsNow>;
  try {
    now = settingsNow();
    if (opts.write) {
      releaseFileLock = acquireWriterLock(db, opts.command ?? `knowledge ${process.argv.slice(2, 3).join(' ')}`.trim(), paths.writerLock);
      writer = true;
      mkdirDurable(paths.staging);
      clearStaleTemps(paths.staging);
    }
  } catch (err) {
    // Nothing of an open that failed is kept.
    release();
    throw err;
  }
  const { settings, registered, registeredAs } = now;
  let closed = false;
  const store: Store = {
    paths,
    db,
    manifest,
    settings,
    registered,
    registeredAs,
    registry,
    writer,
    reloadSettings() {
      Object.assign(store, settingsNow());
    },
    close() {
      if (closed) return;
      closed = true;
      release();
    },
  };
  return store;
}

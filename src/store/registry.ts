/**
 * The registry [LAY-2]: which stores exist and their settings, kept in
 * KNOWLEDGE_HOME (default ~/.knowledge) beside the stores.
 */
import { closeSync, linkSync, openSync, readdirSync, readFileSync, realpathSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { atomicWrite, isDirectory, linkUnsupported, mkdirDurable, tempName } from '../fsutil.js';
import { KnowledgeError, isDiskFull, isErrnoError } from '../errors.js';
import { processAlive, processStartTicks } from '../process.js';

/** How long a change waits for another process's change of the registry (each holds it for milliseconds). */
const LOCK_WAIT_MS = 10_000;

export interface StoreSettings {
  vaultId: string;
  writesEnabled: boolean;
  createdAt: string;
}

export interface RegistryFile {
  format: 'knowledge-registry-v1';
  stores: Record<string, StoreSettings>;
  agents: Record<string, { store: string }>;
}

/**
 * Where the registry lives: KNOWLEDGE_HOME, else HOME/.knowledge, else the
 * home directory the user database gives this user. Either must be an
 * absolute path: a relative one would put the registry — the stores'
 * settings, the agents' bindings — wherever a command happens to run
 * (E_VALIDATION). No place at all (both unset, and a uid without a passwd
 * entry) is E_UNAVAILABLE. Empty counts as unset.
 */
export function knowledgeHome(env: NodeJS.ProcessEnv = process.env): string {
  const own = env.KNOWLEDGE_HOME;
  if (own) return absoluteSetting('KNOWLEDGE_HOME', own);
  const home = env.HOME || passwdHome();
  if (home === undefined) {
    throw new KnowledgeError(
      'E_UNAVAILABLE',
      `no place for the registry: KNOWLEDGE_HOME and HOME are unset (or empty), and uid ${process.getuid?.() ?? '?'} has no home directory in the user database; set KNOWLEDGE_HOME (or HOME) to an absolute path`,
    );
  }
  return join(env.HOME ? absoluteSetting('HOME', home) : home, '.knowledge');
}

function absoluteSetting(name: 'KNOWLEDGE_HOME' | 'HOME', value: string): string {
  if (!isAbsolute(value)) {
    const which = name === 'HOME' ? 'HOME (the registry is HOME/.knowledge unless KNOWLEDGE_HOME is set)' : 'KNOWLEDGE_HOME';
    throw new KnowledgeError('E_VALIDATION', `${which} must be an absolute path, got ${JSON.stringify(value)}: a relative one would put the registry wherever a command is run`);
  }
  return resolve(value);
}

/** This user's home directory from the user database (getpwuid), or undefined: a uid without an entry, or none given there. */
function passwdHome(): string | undefined {
  try {
    const dir = userInfo().homedir;
    return dir && isAbsolute(dir) ? dir : undefined;
  } catch {
    return undefined;
  }
}

export class Registry {
  readonly file: string;

  constructor(readonly home: string) {
    this.file = join(home, 'registry.json');
  }

  /**
   * The registry as it stands; none yet (no file, or no folder for it) is an empty one. Any other failure to read
   * it — a folder that may not be searched (EACCES), an I/O error — is E_UNAVAILABLE: taken for "no registry", it
   * would drop the settings it holds (a store's `writesEnabled: false`, which agent uses which store).
   */
  read(): RegistryFile {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      // ENOTDIR: a file where a folder of the path should be, so no registry can be there either.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return { format: 'knowledge-registry-v1', stores: {}, agents: {} };
      throw new KnowledgeError('E_UNAVAILABLE', `registry ${this.file} is unreadable: ${errnoText(err)} (KNOWLEDGE_HOME ${this.home})`, undefined, { cause: err });
    }
    try {
      const data = JSON.parse(text) as RegistryFile;
      if (data.format !== 'knowledge-registry-v1' || typeof data.stores !== 'object') throw new Error('unknown format');
      data.agents ??= {};
      return data;
    } catch (err) {
      throw new KnowledgeError('E_UNAVAILABLE', `registry ${this.file} is unreadable: ${(err as Error).message}`);
    }
  }

  get(storeRoot: string): StoreSettings | undefined {
    return this.read().stores[resolve(storeRoot)];
  }

  /**
   * The settings of an existing store reached at `storeRoot`, whatever path
   * it was registered under: that path, its real path (a symbolic link to
   * it), or else any entry of the same vault id — where one says read-only,
   * it is read-only here too.
   */
  settingsOf(storeRoot: string, vaultId: string): StoreSettings | undefined {
    return this.entryOf(storeRoot, vaultId)?.settings;
  }

  /** {@link settingsOf}, with the path the entry is registered under. */
  entryOf(storeRoot: string, vaultId: string): { key: string; settings: StoreSettings } | undefined {
    const stores = this.read().stores;
    let real: string | undefined;
    try {
      real = realpathSync(storeRoot);
    } catch {
      real = undefined;
    }
    const at = (key: string | undefined) => (key !== undefined && stores[key] ? { key, settings: stores[key] } : undefined);
    const direct = at(resolve(storeRoot)) ?? at(real);
    // Read-only wherever any entry says so: this path's own, or another path's of the same vault id (the store moved,
    // reached through a symbolic link, or copied). Writable only when every entry of the vault id is.
    if (direct && !direct.settings.writesEnabled) return direct;
    const same = Object.keys(stores).filter((k) => stores[k]!.vaultId === vaultId).map((k) => at(k)!);
    return same.find((e) => !e.settings.writesEnabled) ?? (direct?.settings.vaultId === vaultId ? direct : undefined) ?? direct ?? same[0];
  }

  put(storeRoot: string, settings: StoreSettings): void {
    this.update((data) => {
      data.stores[resolve(storeRoot)] = settings;
      return data;
    });
  }

  /** Register a store, unless it already is (another process may have just done so): its entry as it stands. */
  putIfAbsent(storeRoot: string, settings: StoreSettings): StoreSettings {
    const key = resolve(storeRoot);
    let entry = settings;
    this.update((data) => {
      const known = data.stores[key];
      if (known) {
        entry = known;
        return null;
      }
      data.stores[key] = settings;
      return data;
    });
    return entry;
  }

  /**
   * Read, change and write registry.json as one step among processes: under
   * `registry.json.lock`, taken like git takes its locks (created exclusively),
   * so two launches or inits at once each keep their entry; read-modify-write
   * without it, the last writer's file dropped the other's entry (a store
   * created read-only then opened writable). `change` returns the new content,
   * or null to write nothing.
   */
  update(change: (data: RegistryFile) => RegistryFile | null): void {
    const release = this.keeping(() => {
      mkdirDurable(this.home);
      return this.lock();
    });
    try {
      this.clearDeadTemps();
      const next = change(this.read());
      if (next !== null) this.keeping(() => atomicWrite(this.file, JSON.stringify(next, null, 2) + '\n'));
    } finally {
      release();
    }
  }

  /**
   * That KNOWLEDGE_HOME can hold the registry: its folder is there (made if
   * need be) and a file can be created in it (one is, and removed). What
   * `init` asks before it creates anything, so a store is never left made but
   * unregistered: a KNOWLEDGE_HOME on a read-only mount, or one this user may
   * not write, is E_UNAVAILABLE at once.
   */
  requireWritable(): void {
    this.keeping(() => mkdirDurable(this.home));
    if (!isDirectory(this.home)) throw new KnowledgeError('E_UNAVAILABLE', `cannot keep the registry in ${this.home} (KNOWLEDGE_HOME): it is not a directory`);
    // Named like a registry change's staging file, so one left by a process killed here is cleared with those.
    const probe = join(this.home, tempName('registry.json'));
    this.keeping(() => {
      closeSync(openSync(probe, 'wx', 0o644));
      unlinkSync(probe);
    });
  }

  /** Run a step of keeping the registry, its file-system errors as coded ones (registryFailure). */
  private keeping<T>(step: () => T): T {
    try {
      return step();
    } catch (err) {
      throw registryFailure(err, this.home);
    }
  }

  /**
   * Staging files of registry changes whose process was killed (its lock's marker, or its new registry.json before
   * the rename), removed under the lock: only a dead process's, as others may be staging their markers right now.
   */
  private clearDeadTemps(): void {
    let names: string[];
    try {
      names = readdirSync(this.home);
    } catch {
      return;
    }
    for (const name of names) {
      const m = /^\.registry\.json(?:\.lock)?\.(\d+)\.[0-9a-f]+\.tmp$/.exec(name);
      if (!m || processAlive(Number(m[1]), null)) continue;
      try {
        unlinkSync(join(this.home, name));
      } catch {
        // removed meanwhile
      }
    }
  }

  /**
   * Take `registry.json.lock`: the holder's pid and start time are written to
   * a file of its own first and hard-linked into place, so the lock never
   * exists without them. A lock whose process is gone (killed while changing
   * the registry) is removed; a live holder is waited for.
   */
  private lock(): () => void {
    const lockPath = `${this.file}.lock`;
    const mine = `${process.pid} ${processStartTicks(process.pid) ?? '-'}\n`;
    const staged = join(this.home, tempName('registry.json.lock'));
    writeFileSync(staged, mine, { mode: 0o644 });
    const deadline = Date.now() + LOCK_WAIT_MS;
    try {
      for (;;) {
        try {
          createLock(staged, lockPath, mine);
          return () => {
            try {
              if (readFileSync(lockPath, 'utf8') === mine) unlinkSync(lockPath);
            } catch {
              // gone already
            }
          };
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        }
        const holder = readHolder(lockPath);
        if (holder !== null && !processAlive(holder.pid, holder.startTicks)) {
          breakStaleLock(lockPath, holder.text);
          continue;
        }
        if (Date.now() > deadline) {
          throw new KnowledgeError('E_LOCKED', `registry ${this.file} is being changed by ${holder ? `pid ${holder.pid}` : 'another process'}; retry, or remove ${lockPath} if no Knowledge process runs`);
        }
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5 + Math.floor(Math.random() * 10));
      }
    } finally {
      try {
        unlinkSync(staged);
      } catch {
        // not there
      }
    }
  }
}

/** Hard-link the staged marker into place (fails with EEXIST like O_EXCL); where links are not supported, create and write it. */
function createLock(staged: string, lockPath: string, text: string): void {
  try {
    linkSync(staged, lockPath);
    return;
  } catch (err) {
    if (!linkUnsupported(err)) throw err;
  }
  writeFileSync(lockPath, text, { flag: 'wx', mode: 0o644 });
}

function readHolder(lockPath: string): { pid: number; startTicks: string | null; text: string } | null {
  try {
    const text = readFileSync(lockPath, 'utf8');
    const m = /^(\d+) (\S+)\n$/.exec(text);
    return m ? { pid: Number(m[1]), startTicks: m[2] === '-' ? null : m[2]!, text } : null;
  } catch {
    return null;
  }
}

/** A breaker left by a process killed while it removed a stale lock (held for microseconds) is this old. */
const STALE_BREAKER_MS = 2000;

/**
 * Remove the lock a dead process left, if it is still that one. Two processes
 * that both found it stale must not both remove "it": the second would remove
 * the lock the first has taken meanwhile. So the removal is made under a lock
 * of its own (`registry.json.lock.break`, created exclusively), with the lock
 * read again there; whoever finds the breaker taken simply tries again.
 */
export function breakStaleLock(lockPath: string, staleText: string): void {
  const breaker = `${lockPath}.break`;
  try {
    closeSync(openSync(breaker, 'wx', 0o644));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    try {
      if (Date.now() - statSync(breaker).mtimeMs > STALE_BREAKER_MS) unlinkSync(breaker);
    } catch {
      // removed meanwhile
    }
    return;
  }
  try {
    if (readHolder(lockPath)?.text === staleText) unlinkSync(lockPath);
  } catch {
    // removed meanwhile
  } finally {
    unlinkSync(breaker);
  }
}

/**
 * A file-system error while writing the registry, as a coded error naming
 * KNOWLEDGE_HOME: a full or failing disk is E_IO; anything else — a file where
 * its folder should be, no permission, a read-only mount — means this
 * KNOWLEDGE_HOME cannot hold the registry: E_UNAVAILABLE. Coded errors (E_LOCKED) pass as they are.
 */
function registryFailure(err: unknown, home: string): unknown {
  if (!isErrnoError(err)) return err;
  const code = (err as NodeJS.ErrnoException).code;
  const io = isDiskFull(err) || code === 'EIO';
  return new KnowledgeError(
    io ? 'E_IO' : 'E_UNAVAILABLE',
    `cannot keep the registry in ${home} (KNOWLEDGE_HOME): ${errnoText(err)}${io ? '' : '; set KNOWLEDGE_HOME to a folder this user can write'}`,
    undefined,
    { cause: err },
  );
}

/** A file-system error in a few words: its code, path and reason ("EACCES at /x/registry.json (permission denied)"). */
function errnoText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code !== 'string') return (err as Error).message;
  return `${e.code}${e.path ? ` at ${e.path}` : ''} (${e.message.replace(/^[A-Z]+: /, '').split(',')[0]})`;
}

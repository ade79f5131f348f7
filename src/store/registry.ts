/**
 * The registry [LAY-2]: which stores exist and their settings, kept in
 * KNOWLEDGE_HOME (default ~/.knowledge) beside the stores.
 */
import { readFileSync, existsSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { atomicWrite, mkdirDurable } from '../fsutil.js';
import { KnowledgeError } from '../errors.js';

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

export function knowledgeHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.KNOWLEDGE_HOME ? resolve(env.KNOWLEDGE_HOME) : join(homedir(), '.knowledge');
}

export class Registry {
  readonly file: string;

  constructor(readonly home: string) {
    this.file = join(home, 'registry.json');
  }

  read(): RegistryFile {
    if (!existsSync(this.file)) return { format: 'knowledge-registry-v1', stores: {}, agents: {} };
    try {
      const data = JSON.parse(readFileSync(this.file, 'utf8')) as RegistryFile;
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
    const stores = this.read().stores;
    let real: string | undefined;
    try {
      real = realpathSync(storeRoot);
    } catch {
      real = undefined;
    }
    const direct = stores[resolve(storeRoot)] ?? (real !== undefined ? stores[real] : undefined);
    if (direct && (direct.vaultId === vaultId || !direct.writesEnabled)) return direct;
    const same = Object.values(stores).filter((s) => s.vaultId === vaultId);
    return same.find((s) => !s.writesEnabled) ?? direct ?? same[0];
  }

  put(storeRoot: string, settings: StoreSettings): void {
    const data = this.read();
    data.stores[resolve(storeRoot)] = settings;
    mkdirDurable(this.home);
    atomicWrite(this.file, JSON.stringify(data, null, 2) + '\n');
  }
}

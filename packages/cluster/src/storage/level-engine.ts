import type { ClassicLevel } from 'classic-level';
import { ClusterStorageError } from '../errors.js';
import type { KvEngine, KvOp } from './kv-engine.js';

/** {@link KvEngine} on LevelDB through classic-level. */
export class LevelKvEngine implements KvEngine {
  readonly #db: ClassicLevel<string, string>;

  private constructor(db: ClassicLevel<string, string>) {
    this.#db = db;
  }

  /** Open (creating if needed) the LevelDB database in `dir`. */
  static async open(dir: string): Promise<LevelKvEngine> {
    // Loaded on the first open, not at import: a program that names a cluster config without
    // running a node never loads LevelDB.
    const { ClassicLevel: Level } = await import('classic-level');
    const db = new Level<string, string>(dir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    try {
      await db.open();
    } catch (cause) {
      throw new ClusterStorageError(`cannot open the Raft log in ${dir}`, { cause });
    }
    return new LevelKvEngine(db);
  }

  async get(key: string): Promise<string | undefined> {
    try {
      return (await this.#db.get(key)) ?? undefined;
    } catch (cause) {
      throw new ClusterStorageError(`cannot read ${key} from the Raft log`, { cause });
    }
  }

  async write(ops: readonly KvOp[], options: { readonly sync: boolean }): Promise<void> {
    if (ops.length === 0) return;
    try {
      await this.#db.batch(
        ops.map((op) =>
          op.type === 'put' ? { type: 'put', key: op.key, value: op.value } : { type: 'del', key: op.key },
        ),
        { sync: options.sync },
      );
    } catch (cause) {
      throw new ClusterStorageError('cannot write to the Raft log', { cause });
    }
  }

  async range(gte: string, lt: string): Promise<Array<[string, string]>> {
    try {
      return await this.#db.iterator({ gte, lt }).all();
    } catch (cause) {
      throw new ClusterStorageError('cannot scan the Raft log', { cause });
    }
  }

  async close(): Promise<void> {
    await this.#db.close();
  }
}

/**
 * The little a Raft log needs from a key-value store. LevelDB (classic-level) implements it for
 * real; the simulator implements it over a model disk that loses unsynced writes on a crash and
 * may tear the last batch. {@link RaftStorage} runs unchanged on both.
 */

export type KvOp =
  | { readonly type: 'put'; readonly key: string; readonly value: string }
  | { readonly type: 'del'; readonly key: string };

export interface KvEngine {
  get(key: string): Promise<string | undefined>;
  /**
   * Apply `ops` as one batch. With `sync: true` the promise resolves only once the batch is on
   * stable storage (LevelDB: fsync of its write-ahead log).
   */
  write(ops: readonly KvOp[], options: { readonly sync: boolean }): Promise<void>;
  /** Every pair with `gte ≤ key < lt`, in key order. */
  range(gte: string, lt: string): Promise<Array<[string, string]>>;
  close(): Promise<void>;
}

/**
 * Opening and closing the LevelDB stores of the frontier (the on-disk dedup set and the
 * spilling queue) with typed errors: a directory another process holds becomes
 * StoreLockedError (two crawls on one `--persist` dir), anything else StoreFailedError.
 *
 * Durability: LevelDB appends every write batch to its log and hands it to the OS before the
 * write resolves, so a process killed with SIGKILL loses nothing it was told was written
 * (a power cut can lose the last writes unless `sync` is used; we do not use it).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ClassicLevel } from 'classic-level';
import { StoreFailedError, StoreLockedError } from '../errors.js';

export type BinaryLevel = ClassicLevel<Uint8Array, Uint8Array>;

export interface OpenedStore {
  db: BinaryLevel;
  dir: string;
  /** True when the directory was created for this store only (removed by `close`). */
  temporary: boolean;
  /** Close the database (and remove a temporary directory). Idempotent. */
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** Directory to open (created when missing). Omitted: a new temporary directory. */
  dir?: string;
  /** Prefix of the temporary directory's name. @default 'mocra-store-' */
  tempPrefix?: string;
  /** LevelDB block cache. @default 8 MiB */
  cacheSize?: number;
  /** LevelDB memtable size. @default 4 MiB */
  writeBufferSize?: number;
}

export async function openStore(options: OpenStoreOptions = {}): Promise<OpenedStore> {
  const temporary = options.dir === undefined;
  let dir: string;
  try {
    if (options.dir === undefined) {
      dir = await mkdtemp(path.join(tmpdir(), options.tempPrefix ?? 'mocra-store-'));
    } else {
      dir = path.resolve(options.dir);
      await mkdir(dir, { recursive: true });
    }
  } catch (err) {
    throw new StoreFailedError(options.dir ?? tmpdir(), 'creating the directory', { cause: err });
  }
  // Loaded here, not at import: a crawl whose queue never reaches the disk never loads LevelDB.
  const { ClassicLevel: Level } = await import('classic-level');
  const db: BinaryLevel = new Level<Uint8Array, Uint8Array>(dir, {
    keyEncoding: 'view',
    valueEncoding: 'view',
    ...(options.cacheSize === undefined ? {} : { cacheSize: options.cacheSize }),
    ...(options.writeBufferSize === undefined ? {} : { writeBufferSize: options.writeBufferSize }),
  });
  try {
    await db.open();
  } catch (err) {
    if (temporary) await rm(dir, { recursive: true, force: true }).catch(() => {});
    if (isLocked(err)) throw new StoreLockedError(dir, { cause: err });
    throw new StoreFailedError(dir, 'opening', { cause: err });
  }
  let closing: Promise<void> | undefined;
  return {
    db,
    dir,
    temporary,
    close() {
      closing ??= (async () => {
        try {
          await db.close();
        } finally {
          if (temporary) await rm(dir, { recursive: true, force: true }).catch(() => {});
        }
      })();
      return closing;
    },
  };
}

function isLocked(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as Error & { code?: unknown }).code;
    if (code === 'LEVEL_LOCKED') return true;
    if (/lock .*(already held|temporarily unavailable)/i.test(e.message)) return true;
  }
  return false;
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { lockPersistDir } from './persistence.js';

const root = mkdtempSync(path.join(tmpdir(), 'mocra-persist-lock-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

test('lockPersistDir: one holder at a time, refused with MOCRA_ERR_STORE_LOCKED naming the directory', async () => {
  const dir = path.join(root, 'state');
  const lock = await lockPersistDir(dir);
  expect(lock.dir).toBe(dir);
  await expect(lockPersistDir(dir)).rejects.toMatchObject({
    code: 'MOCRA_ERR_STORE_LOCKED',
    dir,
    message: `${dir} is in use by another process (LevelDB lock); stop that process or use another directory`,
  });
  await lock.release();
  const again = await lockPersistDir(dir);
  await again.release();
});

// L3: the real LevelDB log under SIGKILL. A child appends as fast as it can and reports each
// acknowledged write; it is killed at a random moment, and the reopened log must hold every
// acknowledged entry, contiguous and with the right contents. (SIGKILL keeps the page cache, so
// this checks recovery and the open-time checks; power loss is the simulator's job.)
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { LevelKvEngine, RaftStorage } from '../src/internal.js';
import { entryData } from './fixtures/storage-data.js';
import { Prng } from './sim/prng.js';

const writer = path.join(import.meta.dirname, 'fixtures', 'storage-writer.ts');
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

function runAndKill(dir: string, killAfterMs: number): Promise<{ lastAck: number; lastTerm: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@mocra/source', writer, dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let lastAck = 0;
    let lastTerm = 0;
    let buffer = '';
    let stderr = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        const m = /^ack (\d+) (\d+)$/.exec(line);
        if (!m) continue;
        lastAck = Number(m[1]);
        lastTerm = Number(m[2]);
        // Start the countdown once the child is really writing.
        timer ??= setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('exit', (_code, signal) => {
      clearTimeout(guard);
      if (timer) clearTimeout(timer);
      if (signal !== 'SIGKILL') reject(new Error(`writer exited on its own: ${stderr}`));
      else resolve({ lastAck, lastTerm });
    });
  });
}

describe('LevelDB log under SIGKILL', () => {
  test('every acknowledged entry survives a kill at a random moment, across repeated rounds', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'mocra-storage-crash-'));
    dirs.push(dir);
    const prng = new Prng(2024);
    let acknowledged = 0;
    for (let round = 0; round < 6; round++) {
      const { lastAck, lastTerm } = await runAndKill(dir, prng.int(20, 400));
      expect(lastAck).toBeGreaterThanOrEqual(acknowledged);
      acknowledged = lastAck;
      const { storage, state } = await RaftStorage.open(await LevelKvEngine.open(dir), 'writer');
      const last = state.entries.at(-1)?.index ?? state.snapshot?.meta.index ?? 0;
      expect(last).toBeGreaterThanOrEqual(lastAck);
      expect(state.hardState.term).toBeGreaterThanOrEqual(lastTerm);
      let expected = (state.snapshot?.meta.index ?? 0) + 1;
      for (const e of state.entries) {
        expect(e.index).toBe(expected++);
        if (e.index > 1) expect(e.data).toBe(entryData(e.index));
      }
      await storage.close();
    }
    expect(acknowledged).toBeGreaterThan(10);
  }, 120_000);
});

// The built `mocra` bin as a user runs it (a child process), and Chromium for the pages it
// serves: shared by the CLI journeys.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Browser, chromium } from 'playwright-core';

export const BIN = path.resolve(import.meta.dirname, '../../mocra/dist/cli.js');
export const CHROMIUM = process.env.MOCRA_CHROMIUM ?? '/usr/bin/chromium';
export const hasChromium = fs.existsSync(CHROMIUM);

export interface BinRun {
  child: ChildProcess;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  stderr(): string;
  /** Waits (bounded) for stderr to match `re`; throws with what stderr said otherwise. */
  line(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
}

const running = new Set<ChildProcess>();

/** Start `mocra <args>`; `killAll()` ends what a test left running. */
export function startBin(args: readonly string[], env: Record<string, string> = {}): BinRun {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  running.add(child);
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => {
    stderr += b.toString();
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  return {
    child,
    exited,
    stderr: () => stderr,
    async line(re, timeoutMs = 20_000) {
      for (let waited = 0; waited < timeoutMs; waited += 50) {
        const m = re.exec(stderr);
        if (m) return m;
        if (child.exitCode !== null) break;
        await sleep(50);
      }
      throw new Error(`no stderr line matching ${re}; stderr so far:\n${stderr}`);
    },
  };
}

export function killAll(): void {
  for (const child of running) child.kill('SIGKILL');
}

/** Debian's Chromium, headless; `args` adds flags (e.g. --host-resolver-rules). */
export function launchChromium(args: readonly string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      ...args,
    ],
  });
}

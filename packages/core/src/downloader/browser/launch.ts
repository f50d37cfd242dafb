/**
 * Starting Chromium through playwright-core. playwright-core is an optional peer dependency
 * (loaded on first use), and the browser is the system's own Chromium (`executablePath`):
 * Playwright's browser download is neither wanted nor possible offline.
 */
import { constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import type { Browser, BrowserType } from 'playwright-core';
import { BrowserLaunchError } from '../../errors.js';
import { importOptional } from '../../optional-dependency.js';

/**
 * The flags every launch gets (before `args`). Headless, no sandbox (containers and CI rarely
 * allow one), no GPU, no QUIC (HTTP/3 would bypass an HTTP proxy), and none of Chromium's
 * background traffic (updates, sync, field trials): a crawler's browser talks only to the pages
 * it is told to load.
 */
export const DEFAULT_CHROMIUM_FLAGS: readonly string[] = Object.freeze([
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]);

/** Where Chromium is looked for when `executablePath` is not given and MOCRA_CHROMIUM_PATH is unset. */
export const DEFAULT_CHROMIUM_PATH = '/usr/bin/chromium';

/** The npm packages that provide Playwright's `chromium` launcher. */
export type PlaywrightPackage = 'playwright-core' | 'playwright';

export interface ChromiumLaunchOptions {
  /** @default process.env.MOCRA_CHROMIUM_PATH ?? '/usr/bin/chromium' */
  executablePath?: string;
  /** Flags added after `DEFAULT_CHROMIUM_FLAGS`. @default [] */
  args?: string[];
  /** Run without a window. @default true */
  headless?: boolean;
  /** Longest wait for Chromium to start. @default 30000 */
  launchTimeoutMs?: number;
  /** Which package to load the launcher from (`playwright` works too when that is what you installed). @default 'playwright-core' */
  playwrightPackage?: PlaywrightPackage;
}

interface PlaywrightModule {
  chromium?: BrowserType;
  default?: { chromium?: BrowserType };
}

/** The `executablePath` a launch with these options uses. */
export function chromiumPath(options: Pick<ChromiumLaunchOptions, 'executablePath'> = {}): string {
  const fromEnv = process.env.MOCRA_CHROMIUM_PATH;
  return (
    options.executablePath ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_CHROMIUM_PATH)
  );
}

/**
 * Launch Chromium. Playwright gives every launch a fresh temporary user-data directory and
 * deletes it on close, so no state (cookies, cache, service workers) survives a browser.
 *
 * Throws MissingDependencyError when the Playwright package is not installed, and
 * BrowserLaunchError when Chromium is missing, not executable, or dies while starting.
 */
export async function launchChromium(options: ChromiumLaunchOptions = {}): Promise<Browser> {
  const pkg = options.playwrightPackage ?? 'playwright-core';
  const mod = await importOptional<PlaywrightModule>(pkg, 'the browser downloader');
  const chromium = mod.chromium ?? mod.default?.chromium;
  if (chromium === undefined) {
    throw new BrowserLaunchError(chromiumPath(options), `the '${pkg}' package has no chromium launcher`);
  }
  const executablePath = chromiumPath(options);
  try {
    await access(executablePath, fsConstants.X_OK);
  } catch (err) {
    throw new BrowserLaunchError(
      executablePath,
      'no executable there. Install Chromium (Debian/Ubuntu: apt-get install chromium) or point ' +
        'executablePath (or the MOCRA_CHROMIUM_PATH environment variable) at it',
      { cause: err },
    );
  }
  const headless = options.headless ?? true;
  const flags = headless ? DEFAULT_CHROMIUM_FLAGS : DEFAULT_CHROMIUM_FLAGS.filter((f) => f !== '--headless');
  try {
    return await chromium.launch({
      executablePath,
      headless,
      args: [...flags, ...(options.args ?? [])],
      timeout: options.launchTimeoutMs ?? 30_000,
      // Our own signal handling (the engine's graceful shutdown) decides when the browser goes.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
  } catch (err) {
    throw new BrowserLaunchError(executablePath, firstLine(err), { cause: err });
  }
}

function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n', 1)[0] ?? message;
}

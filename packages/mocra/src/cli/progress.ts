/**
 * Crawl progress on stderr: a live bar on a terminal (pages done, queued, rate, errors,
 * elapsed), plain lines every few seconds otherwise (CI logs, files), nothing with
 * `--no-progress`. It reads `engine.stats()`; the crawl never waits for it.
 *
 * Everything else the CLI prints while a crawl runs goes through `log()`: on a terminal the
 * bar's line is cleared first and the bar drawn again below the message, so a message never
 * lands on the end of the bar (`00:00mocra: …`).
 */
import type { Engine, EngineStats } from '../prelude.js';

export interface ProgressSnapshot {
  pages: number;
  queued: number;
  errors: number;
  elapsedMs: number;
}

export function snapshotOf(stats: EngineStats, startedAt: number): ProgressSnapshot {
  const download = stats.stages.download;
  return {
    pages: stats.pages,
    queued: download.queued + download.delayed + download.inFlight,
    errors: stats.errors,
    elapsedMs: Date.now() - startedAt,
  };
}

export function formatElapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`;
}

export function rateOf(p: ProgressSnapshot): number {
  return p.elapsedMs > 0 ? (p.pages * 1000) / p.elapsedMs : 0;
}

/** One plain progress line (no terminal control characters). */
export function progressLine(p: ProgressSnapshot): string {
  return `mocra: ${p.pages} pages, ${p.queued} queued, ${rateOf(p).toFixed(1)} pages/s, ${p.errors} errors, ${formatElapsed(p.elapsedMs)}`;
}

const BAR_WIDTH = 24;

/** The bar's text: the fill (of `total`, else of pages + queued) and the figures. */
export function barLine(p: ProgressSnapshot, total: number | undefined): string {
  const of = total ?? Math.max(1, p.pages + p.queued);
  const filled = Math.max(0, Math.min(BAR_WIDTH, Math.round((p.pages / of) * BAR_WIDTH)));
  const bar = `${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}`;
  return `${bar} ${p.pages} pages | ${p.queued} queued | ${rateOf(p).toFixed(1)}/s | ${p.errors} errors | ${formatElapsed(p.elapsedMs)}`;
}

/** Back to the start of the line and erase it. */
const CLEAR_LINE = '\r\u001b[2K';

export interface ProgressOptions {
  /** 'bar' on a terminal, 'lines' otherwise, or 'off'. */
  mode: 'bar' | 'lines' | 'off';
  /** Seconds between plain lines. @default 5 */
  intervalS?: number;
  /** Known total (max pages), for the bar's fill. */
  total?: number;
  stream?: NodeJS.WriteStream;
}

export class ProgressReporter {
  readonly #options: ProgressOptions;
  readonly #stream: NodeJS.WriteStream;
  #timer: NodeJS.Timeout | undefined;
  /** The bar is on screen (its line is the last, without a line break). */
  #drawn = false;
  #startedAt = Date.now();
  #last: ProgressSnapshot = { pages: 0, queued: 0, errors: 0, elapsedMs: 0 };

  constructor(options: ProgressOptions) {
    this.#options = options;
    this.#stream = options.stream ?? process.stderr;
  }

  start(engine: Engine): void {
    if (this.#options.mode === 'off') return;
    this.#startedAt = Date.now();
    if (this.#options.mode === 'bar') this.#draw();
    const every = this.#options.mode === 'bar' ? 250 : Math.max(1, this.#options.intervalS ?? 5) * 1000;
    this.#timer = setInterval(() => {
      engine.stats().then(
        (stats) => this.#show(snapshotOf(stats, this.#startedAt)),
        () => {},
      );
    }, every);
    this.#timer.unref();
  }

  /** Print a message (one or more lines) above the bar. */
  log(text: string): void {
    const lines = text.endsWith('\n') ? text : `${text}\n`;
    if (!this.#drawn) {
      this.#stream.write(lines);
      return;
    }
    this.#stream.write(`${CLEAR_LINE}${lines}`);
    this.#draw();
  }

  #show(p: ProgressSnapshot): void {
    this.#last = p;
    if (this.#options.mode === 'bar') {
      if (this.#timer !== undefined) this.#draw();
    } else if (this.#options.mode === 'lines') {
      this.#stream.write(`${progressLine(p)}\n`);
    }
  }

  #draw(): void {
    // Never wider than the terminal: a wrapped line cannot be cleared with one carriage return.
    const columns = this.#stream.columns;
    let line = barLine(this.#last, this.#options.total);
    if (typeof columns === 'number' && columns > 1 && line.length > columns - 1) {
      line = line.slice(0, columns - 1);
    }
    this.#stream.write(`${CLEAR_LINE}${line}`);
    this.#drawn = true;
  }

  /** Stop updating; the bar stays on screen with the final figures, followed by a line break. */
  stop(final?: ProgressSnapshot): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (final) this.#last = final;
    if (this.#drawn) {
      this.#draw();
      this.#stream.write('\n');
      this.#drawn = false;
    }
  }
}

/**
 * Crawl progress on stderr: a live bar on a terminal (pages done, queued, rate, errors,
 * elapsed), plain lines every few seconds otherwise (CI logs, files), nothing with
 * `--no-progress`. It reads `engine.stats()`; the crawl never waits for it.
 */
import cliProgress from 'cli-progress';
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
  #bar: cliProgress.SingleBar | undefined;
  #startedAt = Date.now();
  #last: ProgressSnapshot = { pages: 0, queued: 0, errors: 0, elapsedMs: 0 };

  constructor(options: ProgressOptions) {
    this.#options = options;
    this.#stream = options.stream ?? process.stderr;
  }

  start(engine: Engine): void {
    if (this.#options.mode === 'off') return;
    this.#startedAt = Date.now();
    if (this.#options.mode === 'bar') {
      this.#bar = new cliProgress.SingleBar(
        {
          stream: this.#stream,
          format: '{bar} {pages} pages | {queued} queued | {rate}/s | {errors} errors | {elapsed}',
          hideCursor: true,
          clearOnComplete: false,
          barsize: 24,
          fps: 5,
        },
        cliProgress.Presets.shades_classic,
      );
      this.#bar.start(this.#options.total ?? 1, 0, {
        pages: 0,
        queued: 0,
        rate: '0.0',
        errors: 0,
        elapsed: '00:00',
      });
    }
    const every = this.#options.mode === 'bar' ? 250 : Math.max(1, this.#options.intervalS ?? 5) * 1000;
    this.#timer = setInterval(() => {
      engine.stats().then(
        (stats) => this.#show(snapshotOf(stats, this.#startedAt)),
        () => {},
      );
    }, every);
    this.#timer.unref();
  }

  #show(p: ProgressSnapshot): void {
    this.#last = p;
    if (this.#bar) {
      const total = this.#options.total ?? Math.max(1, p.pages + p.queued);
      this.#bar.setTotal(total);
      this.#bar.update(Math.min(p.pages, total), {
        pages: p.pages,
        queued: p.queued,
        rate: rateOf(p).toFixed(1),
        errors: p.errors,
        elapsed: formatElapsed(p.elapsedMs),
      });
    } else if (this.#options.mode === 'lines') {
      this.#stream.write(`${progressLine(p)}\n`);
    }
  }

  /** Stop updating; the bar shows the final figures. */
  stop(final?: ProgressSnapshot): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (final) this.#last = final;
    if (this.#bar) {
      this.#show(this.#last);
      this.#bar.stop();
      this.#bar = undefined;
    }
  }
}

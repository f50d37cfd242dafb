/**
 * `mocra run <spider-file>`: load a spider module (TypeScript through tsx, or JavaScript) and
 * run it with the CLI's runtime flags. The spider is the module's default export, its `spider`
 * export, or its only export that looks like one (`name`, `parse`, and `start` or
 * `startUrls`). Items go to `--out` (.jsonl or .csv) or, by default, to standard output as
 * JSON Lines.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ErrorEvent, PolicyDecision } from '@mocra/core';
import { Mocra } from '../builder.js';
import { SpiderLoadError } from '../errors.js';
import { defineSpider, type Spider, type SpiderDefinition } from '../spider.js';
import { type CliIo, execute, type Failure } from './execute.js';
import { csvField, formatOf } from './records.js';
import { configureBuilder, type RuntimeFlags } from './runtime-options.js';

const TS = /\.(c|m)?tsx?$/i;

function looksLikeSpider(value: unknown): value is SpiderDefinition<unknown> {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.name === 'string' &&
    typeof v.parse === 'function' &&
    (typeof v.start === 'function' || Array.isArray(v.startUrls))
  );
}

/** Import the file and find its spider (see the module comment). */
export async function loadSpider(file: string): Promise<Spider<unknown>> {
  const abs = path.resolve(file);
  if (!fs.existsSync(abs) || !fs.statSync(abs).isFile()) throw new SpiderLoadError(file, 'no such file');
  let mod: Record<string, unknown>;
  try {
    if (TS.test(abs)) {
      // tsx's loader, registered once per process, compiles TypeScript on import.
      const { register } = await import('tsx/esm/api');
      registerOnce(register);
    }
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (err) {
    throw new SpiderLoadError(
      file,
      `importing it failed: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
      },
    );
  }
  const candidates = [mod.default, mod.spider, ...Object.values(mod)].filter(looksLikeSpider);
  const unique = [...new Set(candidates)];
  if (unique.length === 0) {
    throw new SpiderLoadError(
      file,
      'it exports no spider (export default defineSpider({ name, startUrls or start, parse }))',
    );
  }
  const chosen = looksLikeSpider(mod.default)
    ? mod.default
    : looksLikeSpider(mod.spider)
      ? mod.spider
      : unique[0]!;
  if (unique.length > 1 && !looksLikeSpider(mod.default) && !looksLikeSpider(mod.spider)) {
    throw new SpiderLoadError(file, `it exports ${unique.length} spiders; export the one to run as default`);
  }
  try {
    return typeof (chosen as Spider<unknown>).start === 'function' && !('startUrls' in chosen)
      ? (chosen as Spider<unknown>)
      : defineSpider(chosen);
  } catch (err) {
    throw new SpiderLoadError(file, err instanceof Error ? err.message : String(err), { cause: err });
  }
}

let registered = false;
function registerOnce(register: () => unknown): void {
  if (registered) return;
  registered = true;
  register();
}

/** Items as JSON Lines or CSV (columns from the first item's keys; nested values as JSON). */
class ItemWriter {
  readonly file: string;
  readonly #csv: boolean;
  readonly #fd: number;
  #columns: string[] | undefined;
  #written = 0;

  constructor(file: string) {
    this.file = file;
    this.#csv = formatOf(file) === 'csv';
    if (file === '-') this.#fd = 1;
    else {
      fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
      this.#fd = fs.openSync(path.resolve(file), 'w');
    }
  }

  get written(): number {
    return this.#written;
  }

  write(item: unknown): void {
    let line: string;
    if (!this.#csv) {
      line = `${JSON.stringify(item)}\n`;
    } else {
      const record =
        item !== null && typeof item === 'object' ? (item as Record<string, unknown>) : { value: item };
      if (this.#columns === undefined) {
        this.#columns = Object.keys(record);
        fs.writeSync(this.#fd, `${this.#columns.map(csvField).join(',')}\n`);
      }
      line = `${this.#columns
        .map((k) => {
          const v = record[k];
          return csvField(v !== null && typeof v === 'object' ? JSON.stringify(v) : v);
        })
        .join(',')}\n`;
    }
    fs.writeSync(this.#fd, line);
    this.#written++;
  }

  close(): void {
    if (this.#fd !== 1) fs.closeSync(this.#fd);
  }
}

export async function runCommand(file: string, flags: RuntimeFlags, io: CliIo): Promise<number> {
  const spider = await loadSpider(file);
  const writer = new ItemWriter(flags.out ?? '-');
  const failures: Failure[] = [];
  const builder = Mocra.builder();
  const robots = configureBuilder(builder, flags);
  builder
    .spider(spider, (item) => writer.write(item))
    .onError((event: ErrorEvent, decision: PolicyDecision) => {
      if (decision.action === 'retry') return;
      const url = event.url ?? (event.payload as { url?: string } | undefined)?.url;
      failures.push({ url: url ?? '', code: event.code, message: event.message });
    });
  return execute(
    builder,
    flags,
    {
      robots,
      label: `spider ${spider.name}`,
      startUrls: [],
      failures,
      out: {
        file: writer.file === '-' ? 'standard output' : writer.file,
        written: () => writer.written,
        resumed: () => 0,
        close: () => writer.close(),
      },
    },
    io,
  );
}

/**
 * `mocra run <file>`: load a spider or a module (spider-file.ts) and run it with the CLI's
 * runtime flags. Items go to `--out` (.jsonl, .csv, .parquet or .arrow) or, by default, to standard output as
 * JSON Lines; with `--persist`, a resumed run writes each item exactly once (output-file.ts).
 */
import { Mocra } from '../builder.js';
import { type CliIo, execute, type Output } from './execute.js';
import { OutputFile } from './output-file.js';
import { formatOf } from './records.js';
import { configureBuilder, type RuntimeFlags } from './runtime-options.js';
import { loadRunnable } from './spider-file.js';

export async function runCommand(file: string, flags: RuntimeFlags, io: CliIo): Promise<number> {
  const target = flags.out ?? '-';
  formatOf(target); // a bad extension is a usage error before the file is even loaded
  const runnable = await loadRunnable(file);
  let writer: OutputFile | undefined;
  const builder = Mocra.builder();
  const { robots } = configureBuilder(builder, flags);
  // The item's page is acknowledged once its line is with the OS (the batch's write).
  const sink = (item: unknown, meta: { itemId: string }) => {
    if (writer === undefined) return undefined;
    writer.write(meta.itemId, item);
    return writer.flushed();
  };
  if (runnable.kind === 'spider') builder.spider(runnable.spider, sink);
  else builder.module(runnable.module, sink);
  const open = (): Output => {
    const opened = new OutputFile(target, flags.persist === undefined ? {} : { persist: flags.persist });
    writer = opened;
    return {
      file: target === '-' ? 'standard output' : target,
      written: () => opened.written,
      resumed: () => opened.resumed,
      close: () => opened.close(),
    };
  };
  return execute(
    builder,
    flags,
    { robots, label: `${runnable.kind} ${runnable.name}`, startUrls: [], open },
    io,
  );
}

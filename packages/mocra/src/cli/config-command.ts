/**
 * `mocra config migrate <file>`: rewrites a `config.toml` of mocra for Rust as a `mocra.toml`
 * (the translation is @mocra/core's `migrateRustConfig`) and lists every key it could not carry
 * over, with why and what does its job here.
 *
 * | exit | when |
 * | ---- | ---- |
 * | 0    | written |
 * | 1    | the input cannot be read or is not TOML, or the output exists (without `--force`) |
 * | 2    | bad usage: the output would be the input itself |
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isMocraError, migrateRustConfig, type RustConfigMigration, readConfigFile } from '@mocra/core';
import type { Command } from 'commander';
import { OutputExistsError } from '../errors.js';
import type { CliIo } from './execute.js';

interface MigrateFlags {
  out?: string;
  force: boolean;
}

const EXAMPLES = `
Examples:
  mocra config migrate ./config.toml                 # writes ./mocra.toml beside it
  mocra config migrate ./config.toml -o deploy/mocra.toml --force
  mocra config migrate ./config.toml -o -            # the TOML on stdout, the report on stderr

Every key of the Rust file is carried over (renamed, converted to ms, moved to the table that
does its job) or listed with why it was not and what does its job in mocra.`;

/** Adds `config` with its subcommands to the program; each reports its exit code to `onExit`. */
export function addConfigCommands(program: Command, io: CliIo, onExit: (code: number) => void): Command {
  const config = program
    .command('config')
    .description('work with config files (docs/configuration.md)')
    .exitOverride();
  config
    .command('migrate')
    .description('rewrite a config.toml of mocra for Rust as a mocra.toml and list what was not carried over')
    .argument('<file>', 'the Rust config.toml')
    .option('-o, --out <path>', 'where to write (`-` for stdout); default: mocra.toml beside <file>')
    .option('--force', 'overwrite the output if it exists', false)
    .addHelpText('after', EXAMPLES)
    .exitOverride()
    .action(async (file: string, flags: MigrateFlags) => onExit(await migrate(file, flags, io)));
  return config;
}

async function migrate(file: string, flags: MigrateFlags, io: CliIo): Promise<number> {
  const out = flags.out ?? path.join(path.dirname(file), 'mocra.toml');
  if (out !== '-' && path.resolve(out) === path.resolve(file)) {
    io.stderr.write(`mocra config migrate: the output ${out} is the input itself; give another -o <path>\n`);
    return 2;
  }
  let result: RustConfigMigration;
  try {
    result = migrateRustConfig(await readConfigFile(file), { file: path.basename(file) });
    if (out !== '-') {
      try {
        // 'wx' refuses an existing file in the same step that creates it.
        await writeFile(out, result.toml, { flag: flags.force ? 'w' : 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new OutputExistsError(out);
        throw err;
      }
    }
  } catch (err) {
    if (isMocraError(err)) io.stderr.write(`mocra config migrate: ${err.message} (${err.code})\n`);
    else
      io.stderr.write(
        `mocra config migrate: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    return 1;
  }
  if (out === '-') io.stdout.write(result.toml);
  const report = out === '-' ? io.stderr : io.stdout;
  report.write(reportText(result, out === '-' ? 'stdout' : out));
  return 0;
}

function reportText(result: RustConfigMigration, where: string): string {
  const lines = [
    `wrote ${where}: ${result.carried.length} key${result.carried.length === 1 ? '' : 's'} carried over, ${result.dropped.length} not`,
  ];
  if (result.carried.length > 0) lines.push('carried over:');
  for (const c of result.carried) {
    const to = c.to.length === 0 ? '(nothing to write)' : c.to.join(', ');
    lines.push(`  ${c.key} → ${to}${c.note === undefined ? '' : ` (${c.note})`}`);
  }
  if (result.dropped.length > 0) lines.push('not carried over:');
  for (const d of result.dropped) lines.push(`  ${d.key}: ${d.reason}`);
  return `${lines.join('\n')}\n`;
}

/**
 * `mocra store migrate | status | seed <file>`: the database's migrations and catalog from the
 * command line (docs/store.md). The database is `--url`, else `[db] url` of `--config`, else
 * `MOCRA_DB__URL`; the schema likewise (`--schema`, `[db] schema`, `MOCRA_DB__SCHEMA`, 'mocra').
 *
 * | exit | when |
 * | ---- | ---- |
 * | 0    | done (`status`: every migration applied or pending, none changed) |
 * | 1    | the database refused (a changed migration, a bad seed file, no connection…) or `status` found a changed migration |
 * | 2    | bad usage: no database given |
 */
import { isMocraError, loadConfig } from '@mocra/core';
import { createStore, type MigrationStatus, type StoreRepository } from '@mocra/store';
import type { Command } from 'commander';
import type { CliIo } from './execute.js';

interface StoreFlags {
  url?: string;
  schema?: string;
  config?: string;
  json?: boolean;
}

const EXAMPLES = `
Examples:
  mocra store migrate --url postgres://postgres@127.0.0.1:5432/crawl
  mocra store status --config mocra.toml
  mocra store seed catalog.toml --url sqlite:./mocra.db

The database is --url, else [db] url of --config, else MOCRA_DB__URL.`;

/** Adds `store` with its subcommands to the program; each reports its exit code to `onExit`. */
export function addStoreCommands(program: Command, io: CliIo, onExit: (code: number) => void): Command {
  const store = program
    .command('store')
    .description('database migrations and the account × platform × module catalog (docs/store.md)')
    .addHelpText('after', EXAMPLES)
    .exitOverride();
  const common = (command: Command) =>
    command
      .option('--url <url>', 'database: postgres://… or sqlite:<path>')
      .option('--schema <name>', 'PostgreSQL schema (default: mocra)')
      .option('--config <file>', 'mocra.toml whose [db] table names the database')
      .option('--json', 'print JSON instead of text', false)
      .exitOverride();

  common(store.command('migrate').description('apply pending migrations (in one transaction)')).action(
    async (flags: StoreFlags) => onExit(await withStore(flags, io, (s) => migrate(s, flags, io))),
  );
  common(store.command('status').description('list applied, pending and changed migrations')).action(
    async (flags: StoreFlags) => onExit(await withStore(flags, io, (s) => status(s, flags, io))),
  );
  common(
    store
      .command('seed')
      .description('load accounts, platforms, modules, middleware and relations from a TOML or JSON file')
      .argument('<file>', 'seed file (.toml or .json)'),
  ).action(async (file: string, flags: StoreFlags) =>
    onExit(await withStore(flags, io, (s) => seed(s, file, flags, io))),
  );
  return store;
}

async function withStore(
  flags: StoreFlags,
  io: CliIo,
  run: (store: StoreRepository) => Promise<number>,
): Promise<number> {
  let target: { url: string; schema: string } | undefined;
  try {
    const config = await loadConfig(flags.config === undefined ? {} : { file: flags.config });
    const url = flags.url ?? config.db.url;
    if (url === undefined) {
      io.stderr.write('mocra store: no database: give --url, [db] url in --config, or MOCRA_DB__URL\n');
      return 2;
    }
    target = { url, schema: flags.schema ?? config.db.schema };
  } catch (err) {
    return failed(err, io);
  }
  let store: StoreRepository | undefined;
  try {
    store = await createStore({
      url: target.url,
      schema: target.schema,
      poolSize: 2,
      applicationName: 'mocra-cli',
    });
    return await run(store);
  } catch (err) {
    return failed(err, io);
  } finally {
    await store?.close().catch(() => undefined);
  }
}

async function migrate(store: StoreRepository, flags: StoreFlags, io: CliIo): Promise<number> {
  const { applied, status: after } = await store.migrate();
  if (flags.json) {
    io.stdout.write(`${JSON.stringify({ applied, status: after })}\n`);
    return 0;
  }
  if (applied.length === 0) io.stdout.write(`${where(after)}: up to date (${after.applied} applied)\n`);
  for (const m of applied) io.stdout.write(`applied ${m.version} ${m.name}\n`);
  return 0;
}

async function status(store: StoreRepository, flags: StoreFlags, io: CliIo): Promise<number> {
  const s = await store.migrationStatus();
  if (flags.json) io.stdout.write(`${JSON.stringify(s)}\n`);
  else {
    io.stdout.write(
      `${where(s)}: ${s.ok ? 'ok' : 'CHANGED MIGRATIONS'} (${s.applied} applied, ${s.pending} pending)\n`,
    );
    for (const m of s.migrations) {
      io.stdout.write(
        `  ${String(m.version).padStart(4)}  ${m.state.padEnd(8)}  ${(m.checksum ?? m.appliedChecksum ?? '').slice(0, 12).padEnd(12)}  ${m.name}\n`,
      );
    }
  }
  return s.ok ? 0 : 1;
}

async function seed(store: StoreRepository, file: string, flags: StoreFlags, io: CliIo): Promise<number> {
  const report = await store.seedFromFile(file);
  if (flags.json) io.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    const counts = Object.entries(report)
      .filter(([, n]) => typeof n === 'number' && n > 0)
      .map(([section, n]) => `${section} ${n}`);
    io.stdout.write(`seeded ${file}: ${counts.length === 0 ? 'nothing' : counts.join(', ')}\n`);
  }
  return 0;
}

function where(s: MigrationStatus): string {
  return s.schema === null ? s.backend : `${s.backend} schema ${s.schema}`;
}

function failed(err: unknown, io: CliIo): number {
  if (isMocraError(err)) io.stderr.write(`mocra store: ${err.message} (${err.code})\n`);
  else io.stderr.write(`mocra store: ${err instanceof Error ? err.message : String(err)}\n`);
  return 1;
}

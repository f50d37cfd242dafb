#!/usr/bin/env node
// `mocra-fixture-site`: runs the fixture site in its own process, e.g. for benchmarks, and
// prints its URL(s) on stdout. Stops cleanly on SIGINT or SIGTERM.
import { CLI_HELP, parseCliArgs } from './cli/args.js';
import { TestkitError } from './errors.js';
import { startFixtureSite } from './site/start.js';

async function main(): Promise<number> {
  let args: ReturnType<typeof parseCliArgs>;
  try {
    args = parseCliArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(
      `mocra-fixture-site: ${err instanceof Error ? err.message : String(err)}\n\n${CLI_HELP}`,
    );
    return 2;
  }
  if (args.help) {
    process.stdout.write(CLI_HELP);
    return 0;
  }
  let site: Awaited<ReturnType<typeof startFixtureSite>>;
  try {
    site = await startFixtureSite(args.options);
  } catch (err) {
    const code = err instanceof TestkitError ? ` [${err.code}]` : '';
    process.stderr.write(`mocra-fixture-site: ${err instanceof Error ? err.message : String(err)}${code}\n`);
    return err instanceof TestkitError && err.code === 'MOCRA_ERR_TESTKIT_INVALID_OPTION' ? 2 : 1;
  }
  process.stdout.write(
    args.json
      ? `${JSON.stringify({ url: site.url, urls: site.urls, port: site.port })}\n`
      : `${site.urls.join('\n')}\n`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await site.close();
  return 0;
}

process.exitCode = await main();

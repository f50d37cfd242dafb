/** Command-line flags of `mocra-fixture-site`, parsed into {@link FixtureSiteOptions}. */
import { parseArgs } from 'node:util';
import { FixtureOptionError } from '../errors.js';
import type { FixtureSiteOptions } from '../site/options.js';

export const CLI_HELP = `Usage: mocra-fixture-site [options]

Starts the mocra fixture site and prints its URL (one line per host), then serves until
SIGINT or SIGTERM.

Options:
  --port <n>          TCP port (0 = any free port)               [default: 0]
  --hosts <n>         hosts on 127.0.0.1 … 127.0.0.<n>            [default: 1]
  --seed <n>          seed of all generated content              [default: 1]
  --books <n>         books in the catalog                       [default: 1000]
  --categories <n>    book categories                            [default: 20]
  --quotes <n>        quotes                                     [default: 100]
  --latency <ms>      latency added to every request             [default: 0]
  --jitter <ms>       random extra latency, 0 … ms               [default: 0]
  --crawl-delay <s>   Crawl-delay of the robots.txt * group      [default: none]
  --log-size <n>      entries kept in the request log            [default: 10000]
  --json              print one JSON line {"url","urls","port"} instead of URLs
  -h, --help          show this help
`;

export interface CliArgs {
  options: FixtureSiteOptions;
  json: boolean;
  help: boolean;
}

function integer(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value))
    throw new FixtureOptionError(
      `--${flag}`,
      `expected a non-negative integer, got ${JSON.stringify(value)}`,
    );
  return Number(value);
}

/** Parses argv (without the node and script entries). Throws FixtureOptionError on a bad flag. */
export function parseCliArgs(argv: readonly string[]): CliArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        hosts: { type: 'string' },
        seed: { type: 'string' },
        books: { type: 'string' },
        categories: { type: 'string' },
        quotes: { type: 'string' },
        latency: { type: 'string' },
        jitter: { type: 'string' },
        'crawl-delay': { type: 'string' },
        'log-size': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new FixtureOptionError('argv', err instanceof Error ? err.message : String(err));
  }
  const str = (k: string): string | undefined =>
    typeof values[k] === 'string' ? (values[k] as string) : undefined;
  const options: FixtureSiteOptions = {};
  const set = <K extends keyof FixtureSiteOptions>(
    key: K,
    value: FixtureSiteOptions[K] | undefined,
  ): void => {
    if (value !== undefined) options[key] = value;
  };
  set('port', integer('port', str('port')));
  set('hosts', integer('hosts', str('hosts')));
  set('seed', integer('seed', str('seed')));
  set('latencyMs', integer('latency', str('latency')));
  set('latencyJitterMs', integer('jitter', str('jitter')));
  set('requestLogSize', integer('log-size', str('log-size')));
  const books = integer('books', str('books'));
  const categories = integer('categories', str('categories'));
  if (books !== undefined || categories !== undefined) {
    options.catalog = {
      ...(books === undefined ? {} : { books }),
      ...(categories === undefined ? {} : { categories }),
    };
  }
  const quotes = integer('quotes', str('quotes'));
  if (quotes !== undefined) options.quotes = { count: quotes };
  const delay = str('crawl-delay');
  if (delay !== undefined) {
    const seconds = Number(delay);
    if (delay.trim() === '' || !Number.isFinite(seconds) || seconds < 0) {
      throw new FixtureOptionError(
        '--crawl-delay',
        `expected a non-negative number of seconds, got ${JSON.stringify(delay)}`,
      );
    }
    options.robots = { crawlDelay: seconds };
  }
  return { options, json: values.json === true, help: values.help === true };
}

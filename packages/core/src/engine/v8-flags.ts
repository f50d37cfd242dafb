/**
 * Whether the process was started with one of V8's flags (in its own arguments or in
 * NODE_OPTIONS). The V8 settings mocra applies at run time are the user's to override: a flag
 * they started node with wins, and mocra leaves it alone.
 */
export function startedWithV8Flag(...flags: string[]): boolean {
  const names = new Set(flags.map(flagName));
  const given = (arg: string) => names.has(flagName(arg.split('=')[0]!));
  if (process.execArgv.some(given)) return true;
  return (process.env.NODE_OPTIONS ?? '').split(/\s+/).some(given);
}

/** A flag's name as V8 reads it: `_` and `-` alike, and `--no-x` the same flag as `--x`. */
function flagName(flag: string): string {
  return flag.replaceAll('_', '-').replace(/^--(no-)?/, '');
}

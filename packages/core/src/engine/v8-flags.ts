/**
 * Whether the process was started with one of V8's flags (in its own arguments or in
 * NODE_OPTIONS). The V8 settings mocra applies at run time are the user's to override: a flag
 * they started node with wins, and mocra leaves it alone.
 */
export function startedWithV8Flag(...flags: string[]): boolean {
  // V8 takes `_` and `-` alike in flag names, and `--no-x` is the same flag as `--x`.
  const names = new Set(flags.map((f) => f.replaceAll('_', '-').replace(/^--(no-)?/, '')));
  const given = (arg: string) =>
    names.has(
      arg
        .split('=')[0]!
        .replaceAll('_', '-')
        .replace(/^--(no-)?/, ''),
    );
  if (process.execArgv.some(given)) return true;
  return (process.env.NODE_OPTIONS ?? '').split(/\s+/).some(given);
}

// Environment shared by the bootstrap, test and CI scripts.
import fs from 'node:fs';

/**
 * Native addons (classic-level, better-sqlite3) build with node-gyp when no prebuilt binary
 * can be fetched. Point node-gyp at the Node headers installed on the machine instead of
 * letting it download them (there is no network here beyond the npm registry).
 */
export function nativeBuildEnv(env = process.env) {
  const out = { ...env };
  if (!out.npm_config_nodedir && fs.existsSync('/usr/include/node/node.h')) out.npm_config_nodedir = '/usr';
  return out;
}

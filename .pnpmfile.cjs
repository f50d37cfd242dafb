// nodejs-polars 0.25.2 runs on Node 20, but its prebuilt platform packages declare
// `engines: { node: '>= 22' }`, so pnpm skips them as incompatible optional dependencies and
// `require('nodejs-polars')` fails with "Cannot find module 'nodejs-polars-linux-x64-gnu'"
// (npm only warns). The workspace tests the DataFrame store on Node 20, so the binaries'
// engines field is dropped here; nothing else is touched.
module.exports = {
  hooks: {
    readPackage(pkg) {
      if (/^nodejs-polars-(linux|darwin|win32|android)-/.test(pkg.name) && pkg.engines) delete pkg.engines;
      return pkg;
    },
  },
};

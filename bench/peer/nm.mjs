// The peers live outside spec/, so Node's resolver would not find
// spec/node_modules from here. nm('pkg/path/file.js') gives the file URL of a
// file inside spec/node_modules (or $BENCH_NODE_MODULES), for `await import()`.
import { pathToFileURL } from 'node:url';

const base = process.env.BENCH_NODE_MODULES
  ? pathToFileURL(process.env.BENCH_NODE_MODULES.replace(/\/?$/, '/'))
  : new URL('../../spec/node_modules/', import.meta.url);

export const nm = (p) => new URL(p, base).href;

// The value after a command-line flag: arg('--port', '3000').
export const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
};

// The peers live outside spec/, so Node's resolver would not find
// spec/node_modules from here. nm('pkg/path/file.js') gives the file URL of a
// file inside spec/node_modules (or $BENCH_NODE_MODULES), for `await import()`.
import { pathToFileURL } from 'node:url';

const base = process.env.BENCH_NODE_MODULES
  ? pathToFileURL(process.env.BENCH_NODE_MODULES.replace(/\/?$/, '/'))
  : new URL('../../spec/node_modules/', import.meta.url);

export const nm = (p) => new URL(p, base).href;

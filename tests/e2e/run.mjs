// Runs the end-to-end test files one after another, each with plain
// `node --test FILE` (no version-specific flags), so the suite works on
// Debian 12's node 18 as well as on newer releases.
//   node run.mjs                 -> every *.test.mjs here, sorted
//   node run.mjs a.test.mjs ...  -> just those files
// Env: AGENTKV_E2E_FILE_TIMEOUT_S (per file, default 1200; 0 = none).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const files = process.argv.length > 2
  ? process.argv.slice(2)
  : fs.readdirSync(here).filter((f) => f.endsWith('.test.mjs')).sort();
const timeoutS = Number(process.env.AGENTKV_E2E_FILE_TIMEOUT_S ?? 1200);

const failed = [];
const t0 = Date.now();
for (const f of files) {
  const start = Date.now();
  const r = spawnSync(process.execPath, ['--test', f], {
    cwd: here, stdio: 'inherit', timeout: timeoutS > 0 ? timeoutS * 1000 : undefined,
  });
  const secs = ((Date.now() - start) / 1000).toFixed(1);
  if (r.status !== 0) {
    const why = r.error ? r.error.message : r.signal ? `signal ${r.signal}` : `exit ${r.status}`;
    console.log(`e2e: FAIL ${f} (${why}, ${secs} s)`);
    failed.push(f);
  } else {
    console.log(`e2e: ok ${f} (${secs} s)`);
  }
}
const total = ((Date.now() - t0) / 1000).toFixed(1);
if (failed.length) {
  console.log(`e2e: ${failed.length} of ${files.length} files failed in ${total} s: ${failed.join(' ')}`);
  process.exit(1);
}
console.log(`e2e: ${files.length} files passed in ${total} s (node ${process.version})`);

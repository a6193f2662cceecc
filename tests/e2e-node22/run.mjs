// Runs the node >= 22 end-to-end tests with the node binary npm installed
// (../lib/run_with_node22.mjs). Uses the agentkv server helpers of ../e2e
// (its node_modules must be installed too).
//   node run.mjs    (any node; Debian 12's 18 is fine)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWithNode22 } from '../lib/run_with_node22.mjs';

runWithNode22('e2e-node22', path.dirname(fileURLToPath(import.meta.url)));

// Runs the real-client end-to-end tests (clients.test.mjs) with the node
// binary npm installed (../lib/run_with_node22.mjs).
//   node run.mjs    (any node; Debian 12's 18 is fine)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runWithNode22 } from '../lib/run_with_node22.mjs';

runWithNode22('e2e-clients', path.dirname(fileURLToPath(import.meta.url)));

// Writes a client run's recorded requests as fixtures
// (tests/fixtures/clients/<client>-<version>/turnN-SEQ-main|side.json, see
// the README there): each request's method, path, headers (secrets redacted)
// and body as the client sent it, with agentkv's reply text and usage for
// the unit tests that render them (src/api/client_fixtures_test.cc). The
// run's temp dir is written as "$TMP" so that recordings compare.
import fs from 'node:fs';
import path from 'node:path';
import { apiOf, isMain, replyTextOf, usageOf } from './usage.mjs';

export function writeFixtures(outDir, client, turns, tmpDir) {
  const dir = path.join(outDir, `${client.name}-${client.version()}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const written = [];
  turns.forEach((exchanges, i) => {
    for (const ex of exchanges) {
      if (!apiOf(ex)) continue;
      const kind = isMain(ex) ? 'main' : 'side';
      const record = {
        client: client.name, version: client.version(), api: apiOf(ex), turn: i + 1, seq: ex.seq, kind,
        method: ex.method, path: ex.path, headers: ex.headers, body: ex.body,
        status: ex.status, reply_text: replyTextOf(ex), usage: usageOf(ex),
      };
      const text = JSON.stringify(record, null, 1).split(tmpDir).join('$TMP');
      const file = path.join(dir, `turn${i + 1}-${String(ex.seq).padStart(2, '0')}-${kind}.json`);
      fs.writeFileSync(file, `${text}\n`);
      written.push(file);
    }
  });
  return written;
}

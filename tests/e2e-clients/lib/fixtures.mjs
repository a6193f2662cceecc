// Writes a client run's recorded requests as fixtures
// (tests/fixtures/clients/<client>-<version>/turnN-SEQ-main|side.json for
// session 1, .../sessionS/turnN-SEQ-main|side.json for a later session S, so
// that a reader of one directory sees one session; see the README there): each request's method, path, headers (secrets redacted)
// and body as the client sent it, with agentkv's reply text and usage for
// the unit tests that render them (src/api/client_fixtures_test.cc). The
// run's temp dir is written as "$TMP" so that recordings compare.
import fs from 'node:fs';
import path from 'node:path';
import { apiOf, isMain, replyTextOf, usageOf } from './usage.mjs';

/** sessions[s][t]: the exchanges of turn t + 1 of session s + 1. Returns the files written. */
export function writeFixtures(outDir, client, sessions, tmpDir) {
  const dir = path.join(outDir, `${client.name}-${client.version()}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const written = [];
  sessions.forEach((turns, s) => turns.forEach((exchanges, i) => {
    for (const ex of exchanges) {
      if (!apiOf(ex)) continue;
      const kind = isMain(ex) ? 'main' : 'side';
      const record = {
        client: client.name, version: client.version(), api: apiOf(ex), session: s + 1, turn: i + 1, seq: ex.seq, kind,
        method: ex.method, path: ex.path, headers: ex.headers, body: ex.body,
        status: ex.status, reply_text: replyTextOf(ex), usage: usageOf(ex),
      };
      const text = JSON.stringify(record, null, 1).split(tmpDir).join('$TMP');
      const sub = s > 0 ? path.join(dir, `session${s + 1}`) : dir;
      fs.mkdirSync(sub, { recursive: true });
      const file = path.join(sub, `turn${i + 1}-${String(ex.seq).padStart(2, '0')}-${kind}.json`);
      fs.writeFileSync(file, `${text}\n`);
      written.push(file);
    }
  }));
  return written;
}

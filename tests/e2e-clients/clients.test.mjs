// The real coding agents against `agentkv serve` on the bundled model, each
// for 3 turns of one session, through a recording proxy (lib/proxy.mjs):
// every client process exits 0, every main-conversation request runs as the
// session's agent (not as a side agent of it), and every one of turns 2 and
// 3 reads >= 95% of its prompt from the cache (agentkv's usage fields). A failure prints each request of the run (route, status, prompt,
// cached, match, agent). AGENTKV_CLIENTS_RECORD=DIR also writes the recorded
// requests there as fixtures (tests/fixtures/clients/README.md).
// AGENTKV_CLIENTS=claude-code,codex,opencode picks clients.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe as suite, test } from 'node:test';
import { Server, makeTemp, rmTemp } from '../e2e/lib/server.mjs';
import { CLIENTS } from './lib/clients.mjs';
import { writeFixtures } from './lib/fixtures.mjs';
import { RecordingProxy } from './lib/proxy.mjs';
import { describe, isMain, pct, usageOf } from './lib/usage.mjs';

const MIN_REUSE = 0.95;
const TURN_TIMEOUT_MS = 150_000;
const PROMPTS = [
  'Say hello in one short sentence.',
  'Now say goodbye in one short sentence.',
  'Thank you. One last word, please.',
];
const picked = process.env.AGENTKV_CLIENTS?.split(',');
const clients = CLIENTS.filter((c) => !picked || picked.includes(c.name));

/** Runs argv with env in cwd; resolves {code, signal, out} (stdout+stderr, capped). */
function runClient(binary, argv, { env, cwd }) {
  return new Promise((resolve) => {
    const p = spawn(binary, argv, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const add = (d) => { out = (out + d.toString()).slice(-20_000); };
    p.stdout.on('data', add);
    p.stderr.on('data', add);
    const timer = setTimeout(() => p.kill('SIGKILL'), TURN_TIMEOUT_MS);
    p.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, out }); });
  });
}

for (const client of clients) {
  suite(`${client.name} ${client.version()}`, { concurrency: false }, () => {
    let server;
    let proxy;
    let dir;
    after(async () => {
      await proxy?.stop();
      await server?.stop();
      await rmTemp(dir);
    });

    test('3 turns of one session: exit 0, turns 2-3 reuse >= 95% of their prompt', async () => {
      dir = await makeTemp(`client-${client.name}`);
      const cwd = path.join(dir, 'project');  // empty: whatever a garbage tool call does happens here
      for (const d of [cwd, path.join(dir, 'home'), path.join(dir, 'cache')]) fs.mkdirSync(d, { recursive: true });
      // -c 32768: the clients' first prompts are 5-14K tokens; f16 slots prefill fastest on CPU.
      server = await Server.start({ cacheDir: path.join(dir, 'cache'), ctx: 32768, slots: 2, slotKv: 'auto' });
      proxy = await RecordingProxy.start({ host: '127.0.0.1', port: server.port }, client.proxyOptions);
      client.setup(dir, proxy.baseURL);
      const env = client.env(dir, proxy.baseURL);
      const turns = [];
      const problems = [];
      for (let t = 1; t <= PROMPTS.length; t++) {
        const first = proxy.exchanges.length;
        const t0 = Date.now();
        const r = await runClient(client.binary, client.argv(t, PROMPTS[t - 1]), { env, cwd });
        await new Promise((res) => setTimeout(res, 200));  // the last response's end is recorded
        const exchanges = proxy.exchanges.slice(first);
        turns.push(exchanges);
        console.log(`# ${client.name} turn ${t}: exit ${r.code ?? r.signal} in ${((Date.now() - t0) / 1000).toFixed(1)} s,`
          + ` ${exchanges.length} requests`);
        for (const ex of exchanges) console.log(`#   ${describe(ex, t)}`);
        if (r.code !== 0) problems.push(`turn ${t}: exit ${r.code ?? r.signal}: ${r.out.slice(-1500)}`);
        if (!exchanges.some(isMain)) problems.push(`turn ${t}: no main-conversation request`);
        // The real conversation is the session's main agent, never a side agent of it (docs/api.md "Side requests").
        for (const ex of exchanges.filter(isMain)) {
          const agent = usageOf(ex)?.agent ?? '';
          if (agent.includes('-side-')) problems.push(`turn ${t} #${ex.seq}: the main conversation ran as side agent ${agent}`);
        }
        if (t === 1) continue;
        for (const ex of exchanges.filter(isMain)) {
          const u = usageOf(ex);
          if (!u) problems.push(`turn ${t} #${ex.seq}: no usage (status ${ex.status})`);
          else if (u.cached < MIN_REUSE * u.prompt) {
            problems.push(`turn ${t} #${ex.seq}: reused ${u.cached} of ${u.prompt} prompt tokens (${pct(u)}, match ${u.match})`);
          }
        }
      }
      if (process.env.AGENTKV_CLIENTS_RECORD) {
        const files = writeFixtures(path.resolve(process.env.AGENTKV_CLIENTS_RECORD), client, turns, dir);
        console.log(`# ${client.name}: ${files.length} fixtures written`);
      }
      const evidence = turns.flatMap((exs, i) => exs.map((ex) => describe(ex, i + 1))).join('\n');
      assert.deepEqual(problems, [], `${client.name}:\n${problems.join('\n')}\n--- requests ---\n${evidence}`);
    });
  });
}

// The real coding agents against `agentkv serve` on the bundled model, each
// for 3 turns of one session and then the first turn of a second session in
// the same project dir, through a recording proxy (lib/proxy.mjs): every
// client process exits 0; every main-conversation request runs as the
// session's agent (not as a side agent of it); every one of turns 2 and 3
// reads >= 95% of its prompt from the cache; the second session's first main
// request (a new agent id, another task) reads >= 95% of the system text and
// tools it shares with session 1 from the cache (lib/shared_part.mjs says
// how that part is measured), with usage.agentkv.shared_tokens saying it
// came from another agent. A failure prints each request of the run (route,
// status, prompt, cached, match, agent). AGENTKV_CLIENTS_RECORD=DIR also
// writes the recorded requests there as fixtures
// (tests/fixtures/clients/README.md). AGENTKV_CLIENTS=claude-code,codex,opencode
// picks clients.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe as suite, test } from 'node:test';
import { Server, makeTemp, rawRequest, rmTemp } from '../e2e/lib/server.mjs';
import { CLIENTS } from './lib/clients.mjs';
import { writeFixtures } from './lib/fixtures.mjs';
import { RecordingProxy } from './lib/proxy.mjs';
import { probePromptTokens, sharedPartProbe } from './lib/shared_part.mjs';
import { apiOf, describe, isMain, pct, usageOf } from './lib/usage.mjs';

const MIN_REUSE = 0.95;
const TURN_TIMEOUT_MS = 150_000;
const PROMPTS = [
  'Say hello in one short sentence.',
  'Now say goodbye in one short sentence.',
  'Thank you. One last word, please.',
];
// The second session's task: another text, so only the system text and tools are shared.
const SECOND_SESSION_PROMPT = 'Name one colour, please.';
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
    let cwd;
    let env;
    const sessions = [];  // per session, per turn: the exchanges
    after(async () => {
      await proxy?.stop();
      await server?.stop();
      await rmTemp(dir);
    });

    /** Runs one client turn; returns {exchanges, problems} (exit status, no main request). */
    async function runTurn(label, argv) {
      const first = proxy.exchanges.length;
      const t0 = Date.now();
      const r = await runClient(client.binary, argv, { env, cwd });
      await proxy.settled();  // the turn's last response is recorded
      const exchanges = proxy.exchanges.slice(first);
      console.log(`# ${client.name} ${label}: exit ${r.code ?? r.signal} in ${((Date.now() - t0) / 1000).toFixed(1)} s,`
        + ` ${exchanges.length} requests`);
      for (const ex of exchanges) console.log(`#   ${describe(ex, label)}`);
      const problems = [];
      if (r.code !== 0) problems.push(`${label}: exit ${r.code ?? r.signal}: ${r.out.slice(-1500)}`);
      if (!exchanges.some(isMain)) problems.push(`${label}: no main-conversation request`);
      // The real conversation is the session's agent, never a side agent of it (docs/api.md "Side requests").
      for (const ex of exchanges.filter(isMain)) {
        const agent = usageOf(ex)?.agent ?? '';
        if (agent.includes('-side-')) problems.push(`${label} #${ex.seq}: the main conversation ran as side agent ${agent}`);
      }
      return { exchanges, problems };
    }

    const evidence = () => sessions.flatMap((turns, s) => turns.flatMap((exs, i) =>
      exs.map((ex) => describe(ex, `session ${s + 1} turn ${i + 1}`)))).join('\n');

    test('3 turns of one session: exit 0, turns 2-3 reuse >= 95% of their prompt', async () => {
      dir = await makeTemp(`client-${client.name}`);
      cwd = path.join(dir, 'project');  // empty: whatever a garbage tool call does happens here
      for (const d of [cwd, path.join(dir, 'home'), path.join(dir, 'cache')]) fs.mkdirSync(d, { recursive: true });
      // -c 32768: the clients' first prompts are 5-14K tokens; the default slot type (q4_0, as at rest).
      server = await Server.start({ cacheDir: path.join(dir, 'cache'), ctx: 32768, slots: 2, slotKv: 'auto' });
      proxy = await RecordingProxy.start({ host: '127.0.0.1', port: server.port }, client.proxyOptions);
      client.setup(dir, proxy.baseURL);
      env = client.env(dir, proxy.baseURL);
      const turns = [];
      sessions.push(turns);
      const problems = [];
      for (let t = 1; t <= PROMPTS.length; t++) {
        const { exchanges, problems: p } = await runTurn(`turn ${t}`, client.argv(t, PROMPTS[t - 1]));
        turns.push(exchanges);
        problems.push(...p);
        if (t === 1) continue;
        for (const ex of exchanges.filter(isMain)) {
          const u = usageOf(ex);
          if (!u) problems.push(`turn ${t} #${ex.seq}: no usage (status ${ex.status})`);
          else if (u.cached < MIN_REUSE * u.prompt) {
            problems.push(`turn ${t} #${ex.seq}: reused ${u.cached} of ${u.prompt} prompt tokens (${pct(u)}, match ${u.match})`);
          }
        }
      }
      assert.deepEqual(problems, [], `${client.name}:\n${problems.join('\n')}\n--- requests ---\n${evidence()}`);
    });

    // The shared part is the system text and tools: what the request renders
    // before its first user message (lib/shared_part.mjs measures it in
    // tokens). The new task's text and whatever follows it (Claude Code's
    // environment message comes after the first user message) are not.
    test('a second session\'s first turn reuses >= 95% of the system text and tools of session 1', async (t) => {
      if (!proxy) return t.skip('session 1 did not start');
      const { exchanges, problems } = await runTurn('session 2 turn 1', client.argv(1, SECOND_SESSION_PROMPT));
      sessions.push([exchanges]);
      const main = exchanges.find(isMain);
      const u = main && usageOf(main);
      const firstMain = sessions[0].flat().find(isMain);
      const firstAgent = firstMain && usageOf(firstMain)?.agent;
      if (main && !u) problems.push(`session 2 #${main.seq}: no usage (status ${main.status})`);
      if (u) {
        const probe = sharedPartProbe(main);
        const r = await rawRequest(server, 'POST', probe.path, {
          body: probe.body, headers: { 'x-agent-id': `shared-part-probe-${client.name}` } });
        const shared = probePromptTokens(apiOf(main), r.json);
        console.log(`# ${client.name} session 2: prompt ${u.prompt}, cached ${u.cached}, shared_tokens`
          + ` ${u.shared}, system text and tools ${shared} tokens, agent ${u.agent} (session 1: ${firstAgent})`);
        if (r.status !== 200 || shared === null) problems.push(`shared-part probe: ${r.status} ${r.text.slice(0, 300)}`);
        else if (u.cached < MIN_REUSE * shared) {
          problems.push(`session 2 #${main.seq}: reused ${u.cached} of the ${shared} tokens of system text and tools`
            + ` (prompt ${u.prompt}, match ${u.match}, shared_tokens ${u.shared})`);
        }
        if (u.agent === firstAgent) problems.push(`session 2 ran as session 1's agent ${u.agent}`);
        if (!(u.shared > 0)) problems.push(`session 2 #${main.seq}: shared_tokens ${u.shared}: not from session 1's cache`);
      }
      if (process.env.AGENTKV_CLIENTS_RECORD) {
        const files = writeFixtures(path.resolve(process.env.AGENTKV_CLIENTS_RECORD), client, sessions, dir);
        console.log(`# ${client.name}: ${files.length} fixtures written`);
      }
      assert.deepEqual(problems, [], `${client.name}:\n${problems.join('\n')}\n--- requests ---\n${evidence()}`);
    });
  });
}

// 3. Restart: after SIGTERM, and separately after kill -9 once a turn has
// completed and been saved, the next turn is `warm`, prefills only the new
// text and gives the same greedy output as a cold agent.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { Server, makeTemp, rmTemp, chatReq, COLD, rawRequest, waitForDisk, waitForManifest, LONG_SYSTEM, MAX_NEW_TURN_TOKENS } from './lib/server.mjs';

let dir, cacheDir;
const servers = [];
before(async () => {
  dir = await makeTemp('restart');
  cacheDir = `${dir}/cache`;
});
// The tests share one cache dir: a test that fails with its server still up
// must not leave the dir locked for the next one.
afterEach(async () => {
  for (const s of servers.splice(0)) await s.kill('SIGKILL').catch(() => {});
});
after(async () => {
  await rmTemp(dir);
});

async function start(opts = {}) {
  const s = await Server.start({ cacheDir, ...opts });
  servers.push(s);
  return s;
}

// `extra`: more body fields (COLD for an oracle).
async function turn(server, id, messages, max_tokens = 12, extra = {}) {
  const r = await server.client().chat.completions.create(chatReq(messages, { max_tokens, ...extra }),
    { headers: { 'X-Agent-Id': id } });
  return { reply: r.choices[0].message.content, usage: r.usage };
}

// Two turns on the first server, restart (how: `stopHow`), third turn on the
// second server (started with `s2opts`), compared with a cold agent there.
async function restartScenario(id, stopHow, s2opts = {}) {
  const msgs = [
    { role: 'system', content: LONG_SYSTEM },
    { role: 'user', content: 'Who kept the roses by the platform?' },
  ];
  let s1 = await start();
  const t1 = await turn(s1, id, msgs);
  msgs.push({ role: 'assistant', content: t1.reply }, { role: 'user', content: 'And who kept the mill?' });
  const t2 = await turn(s1, id, msgs);
  assert.equal(t2.usage.agentkv.match, 'extend', JSON.stringify(t2.usage));
  msgs.push({ role: 'assistant', content: t2.reply }, { role: 'user', content: 'What floods in spring?' });

  let info;
  if (stopHow === 'SIGTERM') {
    info = await s1.stop();
    assert.equal(info.code, 0, `SIGTERM exit ${JSON.stringify(info)}\n${s1.log}`);
  } else {
    // The response does not wait for the save (write-behind): wait until
    // the agent reports its bytes on disk, then kill -9.
    const a = await waitForDisk(s1, id);
    assert.equal(a.tokens, t2.usage.prompt_tokens + t2.usage.completion_tokens - 1,
      `the saved agent should hold the whole turn: ${JSON.stringify(a)}`);
    // The manifest on disk holds the whole second turn (the commit point).
    await waitForManifest(cacheDir, id, a.tokens);
    info = await s1.kill('SIGKILL');
    assert.equal(info.signal, 'SIGKILL');
  }

  const s2 = await start(s2opts);
  // The index of warm agents was loaded from disk.
  const before = await rawRequest(s2, 'GET', `/v1/agents/${id}`);
  assert.equal(before.status, 200, `agent ${id} unknown after restart: ${before.text}`);
  assert.equal(before.json.tier, 'warm');
  assert.equal(before.json.tokens, t2.usage.prompt_tokens + t2.usage.completion_tokens - 1);

  const t3 = await turn(s2, id, msgs);
  const u = t3.usage;
  assert.equal(u.agentkv.cache_state, 'warm', `after ${stopHow}: ${JSON.stringify(u)}`);
  assert.equal(u.agentkv.match, 'extend', JSON.stringify(u));
  assert.ok(u.prompt_tokens_details.cached_tokens >= t2.usage.prompt_tokens + t2.usage.completion_tokens - 1,
    `after ${stopHow}: previous turn not fully reused: ${JSON.stringify(u)}`);
  assert.ok(u.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, `after ${stopHow}: prefilled ${u.agentkv.tokens_prefilled}`);

  const cold = await turn(s2, `${id}-cold`, msgs, 12, COLD);
  assert.equal(cold.usage.agentkv.cache_state, 'cold');
  assert.equal(cold.usage.prompt_tokens, u.prompt_tokens);
  assert.equal(t3.reply, cold.reply, `after ${stopHow}: warm reply differs from a cold prefill`);

  // And the turn after that, now from RAM, still matches.
  msgs.push({ role: 'assistant', content: t3.reply }, { role: 'user', content: 'Thank you.' });
  const t4 = await turn(s2, id, msgs);
  assert.notEqual(t4.usage.agentkv.cache_state, 'cold');
  const cold4 = await turn(s2, `${id}-cold4`, msgs, 12, COLD);
  assert.equal(t4.reply, cold4.reply);

  const ex = await s2.stop();
  assert.equal(ex.code, 0, s2.log);
  return s2.log;
}

test('SIGTERM, restart on the same cache dir: next turn is warm, same output as cold', async () => {
  await restartScenario('restart-term', 'SIGTERM');
});

test('kill -9 after a saved turn, restart: next turn is warm, same output as cold', async () => {
  await restartScenario('restart-kill', 'SIGKILL');
});

// --staging-reserve / --landing-reserve beside: the staging buffer and the
// read landing (on here, as with a GPU) are reserved on threads of their own
// beside the rest of the start-up, and the server serves once both are
// ready (engine/staging_buffer.h).
test('restart with the staging buffer and the read landing reserved beside the start-up: warm, same output as cold', async () => {
  const log = await restartScenario('restart-beside', 'SIGTERM', {
    extraArgs: ['--staging-reserve', 'beside', '--read-landing', 'on', '--landing-reserve', 'beside'],
  });
  assert.match(log, /staging buffer: .* at start, beside the rest of it/, log);
  assert.match(log, /read landing: .* at start, beside the rest of it/, log);
  assert.match(log, /start-up \d+ ms: .*, the rest of the buffers reserved beside \d+ ms/, log);
});

// The first restore after the start waits for the staging buffer reserved in
// the background (engine/staging_buffer.h), and the read landing (on here,
// as with a GPU) lands no read until its own background reservation is
// ready (sched/read_landing.h): either way the turn answers as a cold agent.
test('restart with the staging buffer and the read landing reserved in the background: warm, same output as cold', async () => {
  const log = await restartScenario('restart-bgstaging', 'SIGTERM', {
    extraArgs: ['--staging-reserve', 'background', '--read-landing', 'on', '--landing-reserve', 'background'],
  });
  assert.match(log, /staging buffer: .* reserved in the background/, log);
  assert.match(log, /read landing: .* reserved in the background/, log);
  const bad = await Server.start({ cacheDir: `${dir}/cache-bad`, extraArgs: ['--staging-reserve', 'later'] })
    .then((s) => { servers.push(s); return null; }, (e) => e);
  assert.ok(bad, '--staging-reserve later should be refused');
  assert.match(String(bad.message ?? bad), /--staging-reserve: expected auto, start, beside or background/);
});

// The hybrid, named explicitly (--slot-kv f16: f16 slots, q4_0 at rest; the
// default, auto, keeps q4_0 in the slots too): the turn's f16 rows are
// quantized to q4_0 blocks on export and dequantized into the slot on
// restore; rounded through q4_0 as they were written, they restore bit for
// bit, so the warm turn answers as a cold agent does.
test('SIGTERM right after a response (no waiting), f16 slots: the save is flushed, next turn warm', async () => {
  // Graceful shutdown must flush the pending write-behind save.
  const msgs = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who rang the bell?' }];
  const auto = await start({ slotKv: 'auto' });
  assert.match(auto.log, /kv q4_0 \(\d+ B\/token\) at rest, q4_0 in slots/, 'auto should keep q4_0 in the slots');
  await auto.stop();
  const s1 = await start({ slotKv: 'f16' });
  assert.match(s1.log, /kv q4_0 \(\d+ B\/token\) at rest, f16 in slots/, s1.log);
  const t1 = await turn(s1, 'restart-flush', msgs);
  assert.ok(t1.reply.length > 0, JSON.stringify(t1));
  const info = await s1.stop();
  assert.equal(info.code, 0, s1.log);
  msgs.push({ role: 'assistant', content: t1.reply }, { role: 'user', content: 'When?' });
  const s2 = await start({ slotKv: 'f16' });
  const before = await rawRequest(s2, 'GET', '/v1/agents/restart-flush');
  assert.equal(before.json.tier, 'warm', before.text);
  // Blocks on disk are q4_0 whatever the slots hold: 1152 B/token on the bundled model.
  assert.ok(before.json.disk_bytes >= before.json.tokens * 1152, before.text);
  assert.ok(before.json.disk_bytes < before.json.tokens * 1152 * 1.5, before.text);
  const t2 = await turn(s2, 'restart-flush', msgs);
  const u = t2.usage;
  assert.equal(u.agentkv.cache_state, 'warm', JSON.stringify(u));
  assert.equal(u.agentkv.match, 'extend', JSON.stringify(u));
  assert.ok(u.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, JSON.stringify(u));
  assert.ok(u.prompt_tokens_details.cached_tokens >= before.json.tokens - 1, JSON.stringify(u));
  // Well-formed: a non-empty reply, counted tokens.
  assert.equal(typeof t2.reply, 'string');
  assert.ok(t2.reply.length > 0 && u.completion_tokens > 0 && u.completion_tokens <= 12, JSON.stringify(t2));
  const cold = await turn(s2, 'restart-flush-cold', msgs, 12, COLD);
  assert.equal(cold.usage.agentkv.cache_state, 'cold');
  assert.equal(t2.reply, cold.reply, 'after a restart with f16 slots: warm reply differs from a cold prefill');
  await s2.stop();
});

// 2. Three agents x four turns: the cache grows and is reused each turn, only
// the new text is prefilled, and the reused cache gives the same greedy
// output as a cold prefill of the same text (a fresh agent id).
// 7. /metrics after those requests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Server, makeTemp, rmTemp, chatReq, COLD, rawRequest, LONG_SYSTEM, MAX_NEW_TURN_TOKENS } from './lib/server.mjs';

let dir, server, client;
before(async () => {
  dir = await makeTemp('multiturn');
  server = await Server.start({ cacheDir: `${dir}/cache`, slots: 2 });
  client = server.client();
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const AGENTS = {
  planner: {
    system: LONG_SYSTEM,
    users: ['Who built the mill?', 'What did the farmers bring?', 'Where is the school?', 'Tell me about the station.'],
  },
  coder: {
    system: 'You write short notes about the river town for the museum guide. Keep every note under one sentence and plain.',
    users: ['Write a note on the church.', 'Now one on the market.', 'And one on the bridge.', 'Finally the hills.'],
  },
  critic: {
    system: 'You read the notes of the museum guide and say what is wrong with them, in a few words each time.',
    users: ['The church was built in a day.', 'The market sells only fish.', 'The mill never floods.', 'The hills are made of glass.'],
  },
};

const MAX_NEW = MAX_NEW_TURN_TOKENS; // upper bound on prefilled tokens for a turn that only adds text

test('three agents x four turns: cached_tokens grows, only new text is prefilled, output == cold agent', async () => {
  const convs = Object.fromEntries(Object.entries(AGENTS).map(([id, a]) =>
    [id, [{ role: 'system', content: a.system }]]));
  const history = Object.fromEntries(Object.keys(AGENTS).map((id) => [id, []]));

  for (let turn = 0; turn < 4; turn++) {
    // All three agents in parallel (2 slots: exercises batching and moves
    // between RAM tiers).
    await Promise.all(Object.entries(AGENTS).map(async ([id, a]) => {
      const msgs = convs[id];
      msgs.push({ role: 'user', content: a.users[turn] });
      const r = await client.chat.completions.create(chatReq(msgs, { max_tokens: 12 }),
        { headers: { 'X-Agent-Id': `mt-${id}` } });
      const reply = r.choices[0].message.content;
      history[id].push({ usage: r.usage, reply, messages: msgs.map((m) => ({ ...m })) });
      msgs.push({ role: 'assistant', content: reply });
    }));
  }

  for (const id of Object.keys(AGENTS)) {
    const h = history[id];
    const ctx = (t) => `${id} turn ${t + 1}: ${JSON.stringify(h[t].usage)}`;
    assert.equal(h[0].usage.agentkv.cache_state, 'cold', ctx(0));
    assert.equal(h[0].usage.prompt_tokens_details.cached_tokens, 0, ctx(0));
    for (let t = 1; t < 4; t++) {
      const u = h[t].usage, p = h[t - 1].usage;
      assert.equal(u.agentkv.agent_id, `mt-${id}`);
      assert.notEqual(u.agentkv.cache_state, 'cold', ctx(t));
      assert.equal(u.agentkv.match, 'extend', ctx(t));
      assert.ok(u.prompt_tokens_details.cached_tokens > p.prompt_tokens_details.cached_tokens,
        `cached_tokens must grow: ${ctx(t)}`);
      // Everything of the previous turn (prompt + reply, bar the last
      // generated token, which was never fed) is reused.
      assert.ok(u.prompt_tokens_details.cached_tokens >= p.prompt_tokens + p.completion_tokens - 1,
        `previous turn not fully reused: ${ctx(t)} prev ${JSON.stringify(p)}`);
      assert.ok(u.agentkv.tokens_prefilled < MAX_NEW, `prefilled more than the new text: ${ctx(t)}`);
      assert.equal(u.agentkv.tokens_prefilled + u.prompt_tokens_details.cached_tokens, u.prompt_tokens, ctx(t));
    }
  }

  // Oracle: the 4th turn (and the 2nd) of each agent, sent cold to a fresh
  // agent id, must give the same greedy reply.
  for (const id of Object.keys(AGENTS)) {
    for (const t of [1, 3]) {
      const h = history[id][t];
      const cold = await client.chat.completions.create(chatReq(h.messages, { max_tokens: 12, ...COLD }),
        { headers: { 'X-Agent-Id': `mt-oracle-${id}-${t}` } });
      assert.equal(cold.usage.agentkv.cache_state, 'cold');
      assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(cold.usage.prompt_tokens, h.usage.prompt_tokens, `${id} turn ${t + 1}: same prompt, same token count`);
      assert.equal(h.reply, cold.choices[0].message.content,
        `${id} turn ${t + 1}: reused-cache reply differs from a cold prefill of the same messages`);
    }
  }

  // The admin listing knows all three with their token counts.
  const list = await rawRequest(server, 'GET', '/v1/agents');
  assert.equal(list.status, 200);
  for (const id of Object.keys(AGENTS)) {
    const a = list.json.data.find((x) => x.id === `mt-${id}`);
    assert.ok(a, `mt-${id} missing from /v1/agents`);
    const last = history[id][3].usage;
    assert.equal(a.tokens, last.prompt_tokens + last.completion_tokens - 1, `mt-${id} tokens`);
    assert.ok(['resident', 'hot', 'warm'].includes(a.tier));
    assert.ok(a.bytes > 0);
  }
});

test('diverge (edited last message) and exact (completion of prompt+reply) match a cold prefill', async () => {
  const msgs = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who rang the church bell?' }];
  const t1 = await client.chat.completions.create(chatReq(msgs, { max_tokens: 12 }), { headers: { 'X-Agent-Id': 'mt-div' } });
  // The user edits their message: the cached text diverges inside the last
  // user message, well past 50% of it.
  const edited = [msgs[0], { role: 'user', content: 'Who rang the school bell at noon?' }];
  const t2 = await client.chat.completions.create(chatReq(edited, { max_tokens: 12 }), { headers: { 'X-Agent-Id': 'mt-div' } });
  assert.equal(t2.usage.agentkv.match, 'diverge', JSON.stringify(t2.usage));
  assert.ok(t2.usage.prompt_tokens_details.cached_tokens > 100, JSON.stringify(t2.usage));
  assert.ok(t2.usage.prompt_tokens_details.cached_tokens < t1.usage.prompt_tokens, JSON.stringify(t2.usage));
  const cold = await client.chat.completions.create(chatReq(edited, { max_tokens: 12, ...COLD }), { headers: { 'X-Agent-Id': 'mt-div-cold' } });
  assert.equal(cold.usage.agentkv.cache_state, 'cold');
  assert.equal(t2.choices[0].message.content, cold.choices[0].message.content, 'diverge reply != cold reply');

  // Completions: prompt, then prompt + reply exactly (EXACT match).
  const p = 'The station master kept a garden of roses beside the platform, and every morning';
  const c1 = await client.completions.create({ model: cold.model, prompt: p, max_tokens: 10, temperature: 0 },
    { headers: { 'X-Agent-Id': 'mt-exact' } });
  const p2 = p + c1.choices[0].text;
  const c2 = await client.completions.create({ model: cold.model, prompt: p2, max_tokens: 10, temperature: 0 },
    { headers: { 'X-Agent-Id': 'mt-exact' } });
  assert.ok(['exact', 'extend'].includes(c2.usage.agentkv.match), JSON.stringify(c2.usage));
  assert.ok(c2.usage.agentkv.tokens_prefilled <= 2, JSON.stringify(c2.usage));
  const c2cold = await client.completions.create({ model: cold.model, prompt: p2, max_tokens: 10, temperature: 0, ...COLD },
    { headers: { 'X-Agent-Id': 'mt-exact-cold' } });
  assert.equal(c2.choices[0].text, c2cold.choices[0].text, 'exact-match reply != cold reply');
  // Greedy continuation: the first call's 20-token run starts with the
  // same 10 tokens, so the reply of p2 continues it.
  const long = await client.completions.create({ model: cold.model, prompt: p, max_tokens: 20, temperature: 0 },
    { headers: { 'X-Agent-Id': 'mt-exact-long' } });
  assert.equal(long.choices[0].text, c1.choices[0].text + c2.choices[0].text,
    'prompt+reply continued != one longer greedy run');
});

test('/metrics exposes agentkv_ttft_ms and agentkv_tokens_reused_total', async () => {
  const r = await rawRequest(server, 'GET', '/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers['content-type'] ?? '', /text\/plain/);
  const text = r.text;
  assert.match(text, /^# TYPE agentkv_ttft_ms histogram$/m);
  assert.match(text, /^agentkv_ttft_ms_bucket\{[^}]*le="\+Inf"[^}]*\} \d+/m);
  const counts = [...text.matchAll(/^agentkv_ttft_ms_count(?:\{[^}]*\})? (\d+(?:\.\d+)?)/gm)]
    .reduce((s, m) => s + Number(m[1]), 0);
  assert.ok(counts >= 12, `agentkv_ttft_ms_count sums to ${counts}, expected >= 12 requests`);
  const reused = [...text.matchAll(/^agentkv_tokens_reused_total(?:\{[^}]*\})? (\d+(?:\.\d+)?(?:e\+?\d+)?)/gm)]
    .reduce((s, m) => s + Number(m[1]), 0);
  assert.ok(reused > 100, `agentkv_tokens_reused_total = ${reused}, expected > 100 after 9 extend turns`);
});

test('/metrics prints counters and byte gauges exactly (no %g rounding)', async () => {
  const r = await rawRequest(server, 'GET', '/metrics');
  const bad = r.text.split('\n').filter((l) => /^agentkv_\w*(_total|_bytes|_count)(\{[^}]*\})? /.test(l))
    .filter((l) => !/ \d+$/.test(l));
  assert.deepEqual(bad, [], 'integer-valued series printed inexactly');
});

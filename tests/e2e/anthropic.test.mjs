// The Anthropic Messages API (POST /v1/messages) through the official
// @anthropic-ai/sdk: text, streaming (the SDK's own event accumulator),
// multi-turn cache reuse, one cache whichever API an agent uses, Claude
// Code's session headers (a subagent forks from its parent), tool use
// (forced calls are grammar-constrained, so the bundled 16M model writes
// valid ones) with a warm == cold oracle, a restart, and error cases in
// Anthropic's shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Server, makeTemp, rmTemp, chatReq, rawRequest, LONG_SYSTEM } from './lib/server.mjs';

const KEY = 'sk-anthropic-e2e';
let dir, server;
const others = [];
before(async () => {
  dir = await makeTemp('anthropic');
  server = await Server.start({ cacheDir: `${dir}/cache`, apiKey: KEY });
});
after(async () => {
  for (const s of others) await s.kill('SIGKILL').catch(() => {});
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

function anthropic(s = server, { apiKey = KEY, headers } = {}) {
  return new Anthropic({ baseURL: s.baseURL, apiKey, maxRetries: 0, timeout: 180_000, defaultHeaders: headers });
}

// A fixed model name, as agent tools send it: any name is accepted.
const req = (messages, extra = {}) => ({
  model: 'claude-sonnet-4-5', max_tokens: 12, temperature: 0, system: LONG_SYSTEM, messages, ...extra,
});

test('text: a message with Anthropic usage', async () => {
  const m = await anthropic().messages.create(req([{ role: 'user', content: 'Who built the mill?' }]));
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'claude-sonnet-4-5');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 100, JSON.stringify(m.usage));
  assert.equal(m.usage.cache_creation_input_tokens, 0);
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
  assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 12);
});

test('streaming: the SDK accumulates the same message as non-streamed', async () => {
  const client = anthropic();
  const messages = [{ role: 'user', content: 'Tell me about the school.' }];
  const plain = await client.messages.create(req(messages), { headers: { 'X-Agent-Id': 'an-plain' } });
  const names = [];
  const stream = client.messages.stream(req(messages), { headers: { 'X-Agent-Id': 'an-stream' } });
  stream.on('streamEvent', (e) => names.push(e.type));
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, plain.content[0].text);
  assert.equal(final.stop_reason, plain.stop_reason);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
    plain.usage.input_tokens + plain.usage.cache_read_input_tokens);
  assert.deepEqual(names.slice(0, 2), ['message_start', 'content_block_start']);
  assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(names.filter((n) => n === 'content_block_delta').length >= 1, names.join(','));
});

test('stop_sequences: stop_reason stop_sequence names the sequence', async () => {
  const client = anthropic();
  const messages = [{ role: 'user', content: 'Where is the school?' }];
  const free = await client.messages.create(req(messages, { max_tokens: 24 }), { headers: { 'X-Agent-Id': 'an-stop-a' } });
  const text = free.content[0].text;
  const word = text.trim().split(/\s+/)[1];
  assert.ok(word && word.length > 0, `need a second word in ${JSON.stringify(text)}`);
  const stopped = await client.messages.create(req(messages, { max_tokens: 24, stop_sequences: [word] }),
    { headers: { 'X-Agent-Id': 'an-stop-b' } });
  assert.equal(stopped.stop_reason, 'stop_sequence');
  assert.equal(stopped.stop_sequence, word);
  assert.equal(stopped.content[0].text, text.slice(0, text.indexOf(word)));
});

test('multi-turn: turn 2 reads turn 1 from the cache (Claude Code session header)', async () => {
  const client = anthropic(server, { headers: { 'X-Claude-Code-Session-Id': '6f1c2a9e-session' } });
  const messages = [{ role: 'user', content: 'What did the farmers bring?' }];
  const t1 = await client.messages.create(req(messages));
  messages.push({ role: 'assistant', content: t1.content[0].text }, { role: 'user', content: 'And then?' });
  const t2 = await client.messages.create(req(messages));
  assert.ok(t2.usage.cache_read_input_tokens > 100, JSON.stringify(t2.usage));
  assert.ok(t2.usage.input_tokens < 40, JSON.stringify(t2.usage));
  assert.equal(t2.usage.agentkv.agent_id, '6f1c2a9e-session');
  assert.equal(t2.usage.agentkv.match, 'extend');
});

test('one cache whichever API: OpenAI turn 1, Anthropic turn 2 (and back)', async () => {
  const openai = server.client({ apiKey: KEY, headers: { 'X-Agent-Id': 'an-cross' } });
  const oaMsgs = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who kept the roses?' }];
  const r1 = await openai.chat.completions.create(chatReq(oaMsgs, { max_tokens: 12 }));
  const reply1 = r1.choices[0].message.content;
  const anMsgs = [{ role: 'user', content: 'Who kept the roses?' }, { role: 'assistant', content: reply1 },
    { role: 'user', content: 'Why?' }];
  const r2 = await anthropic(server, { headers: { 'X-Agent-Id': 'an-cross' } }).messages.create(req(anMsgs));
  assert.equal(r2.usage.agentkv.match, 'extend', JSON.stringify(r2.usage));
  assert.ok(r2.usage.cache_read_input_tokens >= r1.usage.prompt_tokens, JSON.stringify([r1.usage, r2.usage]));
  oaMsgs.push({ role: 'assistant', content: reply1 }, { role: 'user', content: 'Why?' },
    { role: 'assistant', content: r2.content[0].text }, { role: 'user', content: 'Thanks.' });
  const r3 = await openai.chat.completions.create(chatReq(oaMsgs, { max_tokens: 12 }));
  assert.equal(r3.usage.agentkv.match, 'extend');
  assert.ok(r3.usage.prompt_tokens_details.cached_tokens > r2.usage.cache_read_input_tokens);
});

test('a Claude Code subagent forks from its parent instead of prefilling', async () => {
  const session = '0d9e8f7a-parent';
  const parent = anthropic(server, { headers: { 'X-Claude-Code-Session-Id': session } });
  const msgs = [{ role: 'user', content: 'Describe the station in detail.' }];
  const p1 = await parent.messages.create(req(msgs));
  // The subagent's conversation starts with the parent's system prompt.
  const child = anthropic(server, {
    headers: { 'X-Claude-Code-Session-Id': session, 'X-Claude-Code-Agent-Id': 'sub1' },
  });
  const c1 = await child.messages.create(req([{ role: 'user', content: 'List the shops on the market.' }]));
  assert.equal(c1.usage.agentkv.agent_id, `${session}.sub1`);
  assert.ok(c1.usage.cache_read_input_tokens > 100, `child reused its parent's blocks: ${JSON.stringify(c1.usage)}`);
  // The parent is intact: its next turn still extends its own cache.
  msgs.push({ role: 'assistant', content: p1.content[0].text }, { role: 'user', content: 'More.' });
  const p2 = await parent.messages.create(req(msgs));
  assert.equal(p2.usage.agentkv.match, 'extend');
  assert.ok(p2.usage.cache_read_input_tokens >= p1.usage.input_tokens + p1.usage.cache_read_input_tokens);
});

// Tool use. A short system prompt: the template renders the tool list into
// the system turn, and the default context is 1024 tokens.
const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'Current weather of a city',
  input_schema: {
    type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'],
  },
};
const toolReq = (messages, extra = {}) => ({
  model: 'claude-sonnet-4-5', max_tokens: 200, temperature: 0, system: 'You answer questions about the weather.',
  tools: [WEATHER_TOOL], messages, ...extra,
});
const ASK_WEATHER = { role: 'user', content: 'What is the weather in Paris?' };
const FORCED = { tool_choice: { type: 'tool', name: 'get_weather' } };
const tr = (id, content) => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content }] });

function assertWeatherCall(m) {
  assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m));
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, JSON.stringify(m.content));
  assert.match(uses[0].id, /^toolu_/);
  assert.equal(uses[0].name, 'get_weather');
  assert.ok(['Paris', 'Rome'].includes(uses[0].input.city), JSON.stringify(uses[0].input));
  return uses[0];
}

test('tools: a forced tool_use round trip reuses the cache; warm == cold for the tool conversation', async () => {
  const client = anthropic(server, { headers: { 'X-Agent-Id': 'an-tools' } });
  const t1 = await client.messages.create(toolReq([ASK_WEATHER], FORCED));
  const use = assertWeatherCall(t1);
  const messages = [ASK_WEATHER, { role: 'assistant', content: t1.content },
    tr(use.id, `Sunny in ${use.input.city}, 21 degrees.`)];
  const t2 = await client.messages.create(toolReq(messages, { max_tokens: 12 }));
  assert.equal(t2.content[0].type, 'text');
  assert.ok(t2.content[0].text.length > 0);
  assert.ok(['end_turn', 'max_tokens'].includes(t2.stop_reason), t2.stop_reason);
  assert.equal(t2.usage.agentkv.cache_state, 'resident', JSON.stringify(t2.usage));
  assert.ok(t2.usage.cache_read_input_tokens >= t1.usage.input_tokens + t1.usage.cache_read_input_tokens,
    JSON.stringify([t1.usage, t2.usage]));
  // The same messages on an agent with no cache compute the same greedy text.
  const cold = await anthropic(server, { headers: { 'X-Agent-Id': 'an-tools-cold' } })
    .messages.create(toolReq(messages, { max_tokens: 12 }));
  assert.equal(cold.usage.cache_read_input_tokens, 0, JSON.stringify(cold.usage));
  assert.equal(cold.content[0].text, t2.content[0].text);
  // Either API, one tool conversation: the OpenAI route renders the same
  // prompt (all of it but the last token is read from the cold agent's cache).
  const oa = await server.client({ apiKey: KEY, headers: { 'X-Agent-Id': 'an-tools-cold' } }).chat.completions.create({
    model: 'x', max_tokens: 12, temperature: 0,
    tools: [{ type: 'function', function: { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.input_schema } }],
    messages: [{ role: 'system', content: 'You answer questions about the weather.' }, ASK_WEATHER,
      { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(use.input) } }] },
      { role: 'tool', tool_call_id: use.id, content: `Sunny in ${use.input.city}, 21 degrees.` }],
  });
  assert.ok(oa.usage.prompt_tokens_details.cached_tokens >= oa.usage.prompt_tokens - 1, JSON.stringify(oa.usage));
  assert.equal(oa.choices[0].message.content, t2.content[0].text);
});

test('tools streamed: the SDK stream helper assembles tool_use from input_json_delta', async () => {
  const client = anthropic(server, { headers: { 'X-Agent-Id': 'an-tools-stream' } });
  const names = [];
  let partial = '';
  const stream = client.messages.stream(toolReq([ASK_WEATHER], { tool_choice: { type: 'any', disable_parallel_tool_use: true } }));
  stream.on('streamEvent', (e) => names.push(e.type === 'content_block_start' ? `start:${e.content_block.type}`
    : e.type === 'content_block_delta' ? e.delta.type : e.type));
  stream.on('inputJson', (delta) => { partial += delta; });
  const t1 = await stream.finalMessage();
  const use = assertWeatherCall(t1);
  assert.deepEqual(JSON.parse(partial), use.input);
  assert.ok(names.includes('start:tool_use') && names.includes('input_json_delta'), names.join(','));
  assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  // The same request not streamed: the same call.
  const plain = await anthropic(server, { headers: { 'X-Agent-Id': 'an-tools-plain' } })
    .messages.create(toolReq([ASK_WEATHER], { tool_choice: { type: 'any', disable_parallel_tool_use: true } }));
  assert.deepEqual(assertWeatherCall(plain).input, use.input);
  // Turn 2, streamed: the answer after the tool result, from the cache.
  const messages = [ASK_WEATHER, { role: 'assistant', content: t1.content }, tr(use.id, 'Sunny, 21 degrees.')];
  const t2 = await client.messages.stream(toolReq(messages, { max_tokens: 12, tool_choice: { type: 'none' } })).finalMessage();
  assert.equal(t2.content[0].type, 'text');
  assert.ok(t2.content[0].text.length > 0);
  // (The SDK's accumulator keeps Anthropic's usage counters only.)
  assert.ok(t2.usage.cache_read_input_tokens >= t1.usage.input_tokens + t1.usage.cache_read_input_tokens,
    JSON.stringify([t1.usage, t2.usage]));
});

// Issue 30. A free-text argument and Anthropic's defaults (tool_choice
// "any" allows parallel calls): the 16M model wrote the call, then repeated
// it (or padded it with whitespace) until max_tokens; now the reply ends
// when the call closes, and the round trip goes on.
const SAY_TOOL = { name: 'say', description: 'Say one thing',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] } };

test('tools: a free-text tool_use ends on its own (tool_choice any); tool_result -> next reply', async () => {
  const client = anthropic(server, { headers: { 'X-Agent-Id': 'an-say' } });
  const body = (messages, extra = {}) => toolReq(messages, { tools: [SAY_TOOL], ...extra });
  const ask = { role: 'user', content: 'Say a word.' };
  const t1 = await client.messages.create(body([ask], { tool_choice: { type: 'any' } }));
  assert.equal(t1.stop_reason, 'tool_use', JSON.stringify(t1));
  const uses = t1.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1);
  for (const u of uses) assert.equal(typeof u.input.word, 'string', JSON.stringify(u));
  assert.ok(t1.usage.output_tokens <= 80 * uses.length, JSON.stringify(t1.usage));
  const messages = [ask, { role: 'assistant', content: t1.content }, { role: 'user',
    content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: `You said ${u.input.word}.` })) }];
  const t2 = await client.messages.create(body(messages, { max_tokens: 12 }));
  assert.equal(t2.content[0].type, 'text');
  assert.ok(t2.usage.cache_read_input_tokens >= t1.usage.input_tokens + t1.usage.cache_read_input_tokens,
    JSON.stringify([t1.usage, t2.usage]));
});

// A tool_use cut by max_tokens: its input is an object by Anthropic's schema
// ({} when the arguments did not close, streamed or not); sent back with a
// tool_result it is accepted and the conversation goes on.
test('tools: a tool_use cut by max_tokens goes back in the history', async () => {
  const client = anthropic(server, { headers: { 'X-Agent-Id': 'an-cut' } });
  const ask = { role: 'user', content: 'Say a word.' };
  const cut = toolReq([ask], { tools: [SAY_TOOL], tool_choice: { type: 'any', disable_parallel_tool_use: true }, max_tokens: 40 });
  for (const t1 of [await client.messages.create(cut), await client.messages.stream(cut).finalMessage()]) {
    assert.equal(t1.stop_reason, 'max_tokens', JSON.stringify(t1));
    const use = t1.content.find((b) => b.type === 'tool_use');
    assert.ok(use, `precondition: the cut call was announced: ${JSON.stringify(t1.content)}`);
    assert.equal(typeof use.input, 'object');
    const t2 = await client.messages.create(toolReq([ask, { role: 'assistant', content: t1.content }, tr(use.id, 'ok')],
      { tools: [SAY_TOOL], max_tokens: 8 }));
    assert.equal(t2.type, 'message');
  }
});

// What we return is what we cache (issue 30): turn 2 echoes turn 1's text
// verbatim and reads all of turn 1 (prompt and reply) from the cache but its
// tail, with and without tools: at most 4 tokens, the reply's last (sampled,
// never fed) and those where the echoed text tokenizes differently at the
// reply's end (TurnPlan keeps tokens up to a boundary both tokenizations
// share; CI once lost 3 on "...can theiriow"); and >= 99% over all pairs.
// A dropped leading blank cost the whole reply (~16 tokens, ~95%). Sampled, so replies often start
// with whitespace, which the tool parser used to drop from the response.
test('an echoed reply continues the cache (20 seeds, with and without tools)', async () => {
  const bad = [];
  let blankStarts = 0, cached = 0, turn1 = 0;
  for (const withTools of [false, true]) {
    for (let seed = 1; seed <= 20; seed++) {
      const client = anthropic(server, { headers: { 'X-Agent-Id': `an-echo-${withTools}-${seed}` } });
      const ask = { role: 'user', content: `Tell me about the mill, part ${seed}.` };
      const body = req([ask], { max_tokens: 16, temperature: 1, ...(withTools ? { tools: [SAY_TOOL] } : {}) });
      // (The Anthropic API has no seed; agentkv's sampler takes one.)
      const t1 = await client.messages.create({ ...body, seed });
      const text = t1.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
      if (/^\s/.test(text)) blankStarts++;
      const t2 = await client.messages.create({ ...body, seed,
        messages: [ask, { role: 'assistant', content: t1.content }, { role: 'user', content: 'More.' }] });
      const u1 = t1.usage.input_tokens + t1.usage.cache_read_input_tokens + t1.usage.output_tokens;
      cached += t2.usage.cache_read_input_tokens;
      turn1 += u1;
      if (u1 - t2.usage.cache_read_input_tokens > 4) bad.push({ withTools, seed, text, turn1: u1, cached: t2.usage.cache_read_input_tokens });
    }
  }
  console.log(`anthropic echo: 40 pairs, ${blankStarts} replies start with whitespace, ` +
    `turn 2 read ${(100 * cached / turn1).toFixed(2)}% of turn 1 from the cache`);
  assert.ok(blankStarts >= 3, `precondition: some replies start with whitespace (${blankStarts})`);
  assert.deepEqual(bad, []);
  assert.ok(cached >= 0.99 * turn1, `${cached} of ${turn1}`);
});

test('errors: Anthropic shapes and statuses, and the server keeps serving', async () => {
  const client = anthropic();
  const expectError = async (promise, status, type, match) => {
    await assert.rejects(promise, (e) => {
      assert.ok(e instanceof Anthropic.APIError, String(e));
      assert.equal(e.status, status, e.message);
      assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
      assert.equal(e.error?.error?.type, type, JSON.stringify(e.error));
      if (match) assert.match(e.error.error.message, match);
      return true;
    });
  };
  await expectError(anthropic(server, { apiKey: 'wrong' }).messages.create(req([{ role: 'user', content: 'x' }])),
    401, 'authentication_error');
  const { max_tokens, ...noMax } = req([{ role: 'user', content: 'x' }]);
  await expectError(client.messages.create(noMax), 400, 'invalid_request_error', /max_tokens/);
  await expectError(client.messages.create(req([{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }])),
    400, 'invalid_request_error', /image/);
  await expectError(client.messages.create(req([{ role: 'user', content: 'x' }], { temperature: 1.5 })),
    400, 'invalid_request_error', /temperature/);
  await expectError(client.messages.create(req([{ role: 'user', content: 'x' }],
    { tools: [{ type: 'bash_20250124', name: 'bash' }] })), 400, 'invalid_request_error', /tools\.0\.type/);
  await expectError(client.messages.create(req([{ role: 'user', content: 'x' }],
    { tools: [WEATHER_TOOL], tool_choice: { type: 'tool', name: 'get_time' } })), 400, 'invalid_request_error',
  /tool_choice\.name/);
  await expectError(client.messages.create(req([{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'r' }] }])),
    400, 'invalid_request_error', /tool_use_id/);
  await expectError(client.messages.create(req([{ role: 'user', content: LONG_SYSTEM.repeat(12) }])),
    400, 'invalid_request_error', /^prompt is too long: \d+ tokens > \d+ maximum$/);
  // Raw: a 405 and bad JSON are Anthropic-shaped too.
  const raw = await rawRequest(server, 'POST', '/v1/messages', { body: '{nope', headers: { 'x-api-key': KEY } });
  assert.equal(raw.status, 400);
  assert.equal(raw.json.type, 'error');
  const ok = await client.messages.create(req([{ role: 'user', content: 'Still there?' }]));
  assert.equal(ok.type, 'message');
});

test('model names: any name by default; --alias lists, --strict-model-name refuses others', async () => {
  const models = await anthropic().models.list();
  assert.ok(models.data.length >= 1 && models.data[0].type === 'model');
  const s = await Server.start({ cacheDir: `${dir}/strict`, extraArgs: ['--alias', 'claude-sonnet-4-5', '--strict-model-name'] });
  others.push(s);
  const ids = [];
  for await (const m of anthropic(s, { apiKey: 'unused' }).models.list()) ids.push(m.id);
  assert.ok(ids.includes('claude-sonnet-4-5'), ids.join(','));
  const ok = await anthropic(s, { apiKey: 'unused' }).messages.create(req([{ role: 'user', content: 'Hi' }]));
  assert.equal(ok.model, 'claude-sonnet-4-5');
  await assert.rejects(anthropic(s, { apiKey: 'unused' }).messages.create(req([{ role: 'user', content: 'Hi' }], { model: 'claude-opus-4' })),
    (e) => e.status === 404 && e.error?.error?.type === 'not_found_error');
  const oa = await s.client().chat.completions.create(chatReq([{ role: 'user', content: 'Hi' }], { model: 'claude-sonnet-4-5' }));
  assert.equal(typeof oa.system_fingerprint, 'string');
  assert.match(oa.system_fingerprint, /^fp_[0-9a-f]{16}$/);
});

test('restart: the next Anthropic turn is warm and reads the cache from disk', async () => {
  const cacheDir = `${dir}/restart`;
  let s = await Server.start({ cacheDir });
  others.push(s);
  const headers = { 'X-Claude-Code-Session-Id': 'restart-session' };
  const msgs = [{ role: 'user', content: 'Who kept the mill?' }];
  const t1 = await anthropic(s, { apiKey: 'unused', headers }).messages.create(req(msgs));
  const ex = await s.stop();
  assert.equal(ex.code, 0);
  s = await Server.start({ cacheDir });
  others.push(s);
  msgs.push({ role: 'assistant', content: t1.content[0].text }, { role: 'user', content: 'When?' });
  const t2 = await anthropic(s, { apiKey: 'unused', headers }).messages.create(req(msgs));
  assert.equal(t2.usage.agentkv.cache_state, 'warm', JSON.stringify(t2.usage));
  assert.ok(t2.usage.cache_read_input_tokens > 100, JSON.stringify(t2.usage));
});

// The OpenAI Responses API (POST /v1/responses, what Codex CLI sends) through
// the official openai SDK: a response and a stream (every event and the
// final Response validated against OpenAI's OpenAPI schema with ajv; the
// deltas join to the non-streamed text), a function-tool round trip
// (the call is forced, so grammar-constrained: the bundled 16M model writes
// a valid one) with the cache reused on the second turn, one cache whichever
// API an agent uses, and refused inputs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Server, makeTemp, rmTemp, MODEL_ID, LONG_SYSTEM, rawRequest } from './lib/server.mjs';
import { assertSchema } from './lib/openapi.mjs';

let dir, server, client;
before(async () => {
  dir = await makeTemp('responses');
  server = await Server.start({ cacheDir: `${dir}/cache`, ctx: 2048 });
  client = server.client();
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const req = (input, extra = {}) => ({
  model: 'gpt-5-codex', instructions: LONG_SYSTEM, input, max_output_tokens: 12, temperature: 0, store: false,
  ...extra,
});

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

test('a response: shape, usage, max_output_tokens', async () => {
  const r = await client.responses.create(req('Who built the mill?'));
  assertSchema('Response', r);
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.model, 'gpt-5-codex');
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.output[0].type, 'message');
  assert.equal(typeof r.output_text, 'string');
  assert.ok(r.output_text.length > 0);
  assert.ok(r.usage.input_tokens > 100, JSON.stringify(r.usage));
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test('streaming: events validate and join to the non-streamed text', async () => {
  const input = [{ role: 'user', content: [{ type: 'input_text', text: 'Tell me about the school.' }] }];
  const plain = await client.responses.create(req(input), { headers: { 'X-Agent-Id': 'rs-plain' } });
  const stream = await client.responses.create(req(input, { stream: true }), { headers: { 'X-Agent-Id': 'rs-stream' } });
  const names = [];
  let text = '';
  let final;
  let seq = 0;
  for await (const ev of stream) {
    assertSchema('ResponseStreamEvent', ev);
    assert.equal(ev.sequence_number, seq++);
    names.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assert.deepEqual(names.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added']);
  assert.ok(['response.completed', 'response.incomplete'].includes(names.at(-1)), names.at(-1));
  assert.equal(text, plain.output_text);
  assertSchema('Response', final);
  assert.equal(final.output_text, plain.output_text);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
});

test('function tool round trip: the call, its output, the cache reused', async () => {
  const agent = { headers: { 'X-Agent-Id': 'rs-tools' } };
  const input = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r1 = await client.responses.create(req(input, {
    tools: [WEATHER], tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 200,
  }), agent);
  assertSchema('Response', r1);
  const call = r1.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r1.output));
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /^call_/);
  assert.match(call.id, /^fc_/);
  assert.ok(['Paris', 'Rome'].includes(JSON.parse(call.arguments).city), call.arguments);

  // Turn 2: the whole conversation again (store: false), as Codex sends it.
  const stream = await client.responses.create(req([...input, ...r1.output,
    { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"sunny"}' }],
  { tools: [WEATHER], tool_choice: 'none', stream: true }), agent);
  let final;
  for await (const ev of stream) {
    assertSchema('ResponseStreamEvent', ev);
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assertSchema('Response', final);
  assert.equal(final.output[0].type, 'message');
  assert.ok(final.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens - 8,
    `${JSON.stringify(final.usage)} after ${r1.usage.input_tokens}`);
  assert.equal(final.usage.agentkv.agent_id, 'rs-tools');
});

test('streamed function calls: argument deltas join to each call', async () => {
  const stream = await client.responses.create(req([{ role: 'user', content: 'Weather in Rome?' }], {
    tools: [WEATHER], tool_choice: 'required', max_output_tokens: 200, stream: true,
  }), { headers: { 'X-Agent-Id': 'rs-stream-call' } });
  const args = new Map();  // item_id -> joined deltas
  const done = [];
  let final;
  for await (const ev of stream) {
    assertSchema('ResponseStreamEvent', ev);
    if (ev.type === 'response.function_call_arguments.delta') args.set(ev.item_id, (args.get(ev.item_id) ?? '') + ev.delta);
    if (ev.type === 'response.function_call_arguments.done') done.push(ev);
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assertSchema('Response', final);
  const calls = final.output.filter((o) => o.type === 'function_call');
  assert.ok(calls.length >= 1 && calls.length === done.length, JSON.stringify(final.output));
  for (const [i, call] of calls.entries()) {
    assert.equal(done[i].item_id, call.id);
    assert.equal(done[i].name, 'get_weather');
    assert.equal(done[i].arguments, args.get(call.id));
    assert.equal(call.arguments, args.get(call.id));
    assert.ok(['Paris', 'Rome'].includes(JSON.parse(call.arguments).city), call.arguments);
  }
});

test('one agent, one cache: chat completions then responses', async () => {
  const agent = { headers: { 'X-Agent-Id': 'rs-both' } };
  const c = await client.chat.completions.create({
    model: MODEL_ID, max_tokens: 8, temperature: 0,
    messages: [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who kept the roses?' }],
  }, agent);
  const reply = c.choices[0].message.content;
  const r = await client.responses.create(req([
    { role: 'user', content: 'Who kept the roses?' },
    { role: 'assistant', content: [{ type: 'output_text', text: reply }] },
    { role: 'user', content: 'And the mill?' }]), agent);
  assert.equal(r.usage.agentkv.match, 'extend', JSON.stringify(r.usage));
  assert.ok(r.usage.input_tokens_details.cached_tokens >= c.usage.prompt_tokens,
    `${JSON.stringify(r.usage)} after ${c.usage.prompt_tokens}`);
});

test('refused: stored state, images, unknown tools (OpenAI error shape)', async () => {
  for (const [extra, param] of [
    [{ previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] },
      'input[0].content[0].type'],
    [{ tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[0].type'],
  ]) {
    const r = await rawRequest(server, 'POST', '/v1/responses', { body: { ...req('hi'), ...extra } });
    assert.equal(r.status, 400, r.text);
    assertSchema('ErrorResponse', r.json);
    assert.equal(r.json.error.param, param);
  }
});

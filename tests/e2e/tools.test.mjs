// Tool calls and structured output through the OpenAI routes (issue 13):
// every response and stream chunk validated against OpenAI's OpenAPI schema
// (ajv), the openai SDK's tool loop (streamed and not) and parse() with zod,
// LangChain's bindTools / withStructuredOutput, the Vercel AI SDK's
// generateText with tools. The bundled 16M model is no assistant: forced
// tool choices (required / a named function) are grammar-constrained, so it
// still writes valid calls; under "auto" it writes text. Last, reasoning
// separation with a second server started on DeepSeek-R1's template.
import os from 'node:os';
import path from 'node:path';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { zodResponseFormat } from 'openai/helpers/zod';
import { Server, makeTemp, rmTemp, MODEL_ID } from './lib/server.mjs';
import { assertSchema } from './lib/openapi.mjs';

let dir, server, client;
before(async () => {
  dir = await makeTemp('tools');
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

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};
const NAMED = { type: 'function', function: { name: 'get_weather' } };
const ASK = [{ role: 'system', content: 'You answer questions about the weather.' },
  { role: 'user', content: 'What is the weather in Paris?' }];

/** POST a chat request; returns the parsed JSON (non-stream) or the SSE chunks (stream). */
async function post(body, headers = {}) {
  const r = await fetch(`${server.baseURL}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body),
  });
  const text = await r.text();
  if (!body.stream || r.status !== 200) return { status: r.status, json: JSON.parse(text) };
  const chunks = [];
  for (const frame of text.split('\n\n')) {
    if (!frame.startsWith('data: ')) continue;
    const data = frame.slice(6);
    if (data === '[DONE]') { chunks.push('[DONE]'); continue; }
    chunks.push(JSON.parse(data));
  }
  return { status: r.status, chunks };
}

/** Tool calls reassembled from stream chunks as an OpenAI client does. */
function assembleToolCalls(chunks) {
  const calls = [];
  for (const ch of chunks) {
    for (const tc of ch.choices?.[0]?.delta?.tool_calls ?? []) {
      if (!calls[tc.index]) {
        assert.ok(tc.id && tc.type === 'function' && tc.function?.name, `first delta of call ${tc.index}: ${JSON.stringify(tc)}`);
        calls[tc.index] = { id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } };
      } else {
        assert.equal(tc.id, undefined, 'id only in a call\'s first delta');
      }
      calls[tc.index].function.arguments += tc.function?.arguments ?? '';
    }
  }
  return calls;
}

test('forced tool call: valid call, schema-valid JSON and SSE, stream == non-stream', async () => {
  const body = { model: MODEL_ID, messages: ASK, tools: [WEATHER], tool_choice: NAMED, max_tokens: 200, temperature: 0 };
  const r = await post(body, { 'X-Agent-Id': 'schema-a' });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assertSchema('CreateChatCompletionResponse', r.json);
  const choice = r.json.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.ok(['Paris', 'Rome'].includes(JSON.parse(call.function.arguments).city), call.function.arguments);

  const s = await post({ ...body, stream: true, stream_options: { include_usage: true } }, { 'X-Agent-Id': 'schema-b' });
  assert.equal(s.status, 200);
  assert.equal(s.chunks.at(-1), '[DONE]');
  for (const ch of s.chunks.slice(0, -1)) assertSchema('CreateChatCompletionStreamResponse', ch);
  const calls = assembleToolCalls(s.chunks);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, call.function.name);
  assert.equal(calls[0].function.arguments, call.function.arguments);  // temperature 0: same call
  const finishes = s.chunks.slice(0, -1).map((c) => c.choices[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finishes, ['tool_calls']);
});

test('required, none, auto: responses match the schema', async () => {
  for (const tool_choice of ['required', 'none', 'auto']) {
    const r = await post({ model: MODEL_ID, messages: ASK, tools: [WEATHER], tool_choice, parallel_tool_calls: false,
      max_tokens: 200, temperature: 0 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assertSchema('CreateChatCompletionResponse', r.json);
    const c = r.json.choices[0];
    if (tool_choice === 'required') {
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls.length, 1);
    }
    if (tool_choice === 'none') assert.equal(c.message.tool_calls, undefined);
  }
});

test('bad tool requests are 400 with OpenAI error JSON', async () => {
  const cases = [
    [{ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools[0].function.name'],
    [{ functions: [{ name: 'x' }] }, 'functions'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } } } }, null],
    [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
    [{ messages: [{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'not json' } }] }] },
      'messages[0].tool_calls[0].function.arguments'],
  ];
  for (const [extra, param] of cases) {
    const r = await post({ model: MODEL_ID, messages: ASK, max_tokens: 4, ...extra });
    assert.equal(r.status, 400, `${JSON.stringify(extra)} -> ${JSON.stringify(r.json)}`);
    assertSchema('ErrorResponse', r.json);
    if (param) assert.equal(r.json.error.param, param);
  }
});

test('openai SDK tool loop (call -> result -> answer), not streamed, reuses the cache', async () => {
  const headers = { 'X-Agent-Id': 'sdk-loop' };
  const messages = [...ASK];
  const first = await client.chat.completions.create({ model: MODEL_ID, messages, tools: [WEATHER], tool_choice: NAMED,
    max_tokens: 200, temperature: 0 }, { headers });
  assertSchema('CreateChatCompletionResponse', first);
  const msg = first.choices[0].message;
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  messages.push(msg);
  for (const call of msg.tool_calls) {
    const { city } = JSON.parse(call.function.arguments);
    messages.push({ role: 'tool', tool_call_id: call.id, content: `Sunny in ${city}, 21 degrees.` });
  }
  const second = await client.chat.completions.create({ model: MODEL_ID, messages, tools: [WEATHER], tool_choice: 'none',
    max_tokens: 12, temperature: 0 }, { headers });
  assertSchema('CreateChatCompletionResponse', second);
  assert.ok(second.choices[0].message.content.length > 0);
  assert.equal(second.choices[0].message.tool_calls, undefined);
  assert.equal(second.usage.agentkv.cache_state, 'resident');
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `cached ${second.usage.prompt_tokens_details.cached_tokens} < first prompt ${first.usage.prompt_tokens}`);
});

test('openai SDK tool loop, streamed', async () => {
  const headers = { 'X-Agent-Id': 'sdk-stream' };
  const messages = [...ASK];
  const stream = await client.chat.completions.create({ model: MODEL_ID, messages, tools: [WEATHER], tool_choice: NAMED,
    max_tokens: 200, temperature: 0, stream: true }, { headers });
  const chunks = [];
  for await (const ch of stream) { assertSchema('CreateChatCompletionStreamResponse', ch); chunks.push(ch); }
  const calls = assembleToolCalls(chunks);
  assert.equal(calls.length, 1);
  messages.push({ role: 'assistant', content: null, tool_calls: calls });
  messages.push({ role: 'tool', tool_call_id: calls[0].id, content: 'Sunny, 21 degrees.' });
  // The same tools again (as agents send them): the template renders them
  // in the system turn, so other tools would change the prompt's start.
  const answer = await client.chat.completions.create({ model: MODEL_ID, messages, tools: [WEATHER], tool_choice: 'none',
    max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }, { headers });
  let text = '', usage;
  for await (const ch of answer) {
    assertSchema('CreateChatCompletionStreamResponse', ch);
    text += ch.choices[0]?.delta?.content ?? '';
    if (ch.usage) usage = ch.usage;
  }
  assert.ok(text.length > 0);
  assert.equal(usage.agentkv.cache_state, 'resident');
  assert.ok(usage.prompt_tokens_details.cached_tokens > usage.prompt_tokens / 2, JSON.stringify(usage));
});

test('openai SDK parse() with a zod schema (json_schema, strict)', async () => {
  const Weather = z.object({ city: z.enum(['Paris', 'Rome']), sunny: z.boolean() });
  const r = await client.chat.completions.parse({ model: MODEL_ID, messages: ASK, max_tokens: 200, temperature: 0,
    response_format: zodResponseFormat(Weather, 'weather') });
  assertSchema('CreateChatCompletionResponse', r);
  const parsed = r.choices[0].message.parsed;
  assert.ok(parsed, r.choices[0].message.content);
  assert.deepEqual(Weather.parse(parsed), parsed);
});

test('response_format json_object gives a JSON object', async () => {
  const r = await post({ model: MODEL_ID, messages: ASK, max_tokens: 200, temperature: 0,
    response_format: { type: 'json_object' } });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assertSchema('CreateChatCompletionResponse', r.json);
  const c = r.json.choices[0];
  if (c.finish_reason === 'stop') {
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v && !Array.isArray(v));
  } else {
    assert.ok(c.message.content.trimStart().startsWith('{'), c.message.content);
  }
});

test('LangChain: bindTools and withStructuredOutput', async () => {
  const { ChatOpenAI } = await import('@langchain/openai');
  const llm = new ChatOpenAI({ model: MODEL_ID, apiKey: 'none', temperature: 0, maxTokens: 200,
    configuration: { baseURL: `${server.baseURL}/v1` } });
  const withTools = llm.bindTools([WEATHER], { tool_choice: 'get_weather', parallel_tool_calls: false });
  const ai = await withTools.invoke([['system', ASK[0].content], ['human', ASK[1].content]]);
  assert.equal(ai.tool_calls.length, 1, JSON.stringify(ai));
  assert.equal(ai.tool_calls[0].name, 'get_weather');
  assert.ok(['Paris', 'Rome'].includes(ai.tool_calls[0].args.city));

  const schema = { type: 'object', title: 'weather', description: 'A weather report',
    properties: { city: { type: 'string', enum: ['Paris', 'Rome'] }, sunny: { type: 'boolean' } },
    required: ['city', 'sunny'], additionalProperties: false };
  for (const method of ['jsonSchema', 'functionCalling']) {
    const structured = llm.withStructuredOutput(schema, { method, name: 'weather' });
    const out = await structured.invoke(ASK[1].content);
    assert.ok(['Paris', 'Rome'].includes(out.city), `${method}: ${JSON.stringify(out)}`);
    assert.equal(typeof out.sunny, 'boolean');
  }
});

test('Vercel AI SDK: generateText with tools', async () => {
  const { generateText, tool, stepCountIs } = await import('ai');
  const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
  const provider = createOpenAICompatible({ name: 'agentkv', baseURL: `${server.baseURL}/v1`, apiKey: 'none' });
  const executed = [];
  const result = await generateText({
    model: provider(MODEL_ID),
    system: ASK[0].content,
    prompt: ASK[1].content,
    temperature: 0,
    maxOutputTokens: 200,
    tools: {
      get_weather: tool({
        description: 'Current weather of a city',
        inputSchema: z.object({ city: z.enum(['Paris', 'Rome']) }),
        execute: async ({ city }) => { executed.push(city); return `Sunny in ${city}.`; },
      }),
    },
    // Step 1 must call the tool; step 2 answers with its result.
    prepareStep: ({ stepNumber }) => (stepNumber === 0
      ? { toolChoice: { type: 'tool', toolName: 'get_weather' } } : { toolChoice: 'none' }),
    stopWhen: stepCountIs(2),
  });
  assert.equal(executed.length, 1, JSON.stringify(result.steps.map((s) => s.finishReason)));
  assert.equal(result.steps[0].finishReason, 'tool-calls');
  assert.equal(result.steps.length, 2);
  assert.ok(result.text.length > 0);
});

// Reasoning separation (llama-server's reasoning_content). The second server
// runs the bundled model under DeepSeek-R1-Distill's template (from the
// pinned llama.cpp), whose generation prompt opens <think>: whatever the
// model writes is thinking until it writes </think>, which the 16M model
// does not. So with reasoning on, the reply must come back entirely as
// reasoning_content and content empty; with reasoning_format "none" the same
// text is the content. If separation broke, the text would land in content.
// The reasoning starts with the newline the template wrote after <think>
// (common's parser, as llama-server, keeps it).
test('reasoning models: reasoning_content apart from content (R1 template), streamed and not, SDKs', async () => {
  const llamaDir = path.join(process.env.AGENTKV_CACHE ?? path.join(os.homedir(), '.cache', 'agentkv'), 'llama.cpp');
  const template = path.join(llamaDir, 'models', 'templates', 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja');
  const rdir = await makeTemp('reasoning');
  const rs = await Server.start({ cacheDir: `${rdir}/cache`, slots: 1, extraArgs: ['--chat-template-file', template] });
  try {
    const call = async (route, body, agent) => {
      const r = await fetch(`${rs.baseURL}${route}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Agent-Id': agent }, body: JSON.stringify(body),
      });
      const text = await r.text();
      if (!body.stream || r.status !== 200) return { status: r.status, json: JSON.parse(text) };
      return { status: r.status, frames: text.split('\n\n').filter((f) => f.includes('data: ')) };
    };
    const body = { model: MODEL_ID, messages: [{ role: 'user', content: 'Why is the sky blue?' }], max_tokens: 24, temperature: 0 };

    const plain = await call('/v1/chat/completions', { ...body, reasoning_format: 'none' }, 'think-none');
    assert.equal(plain.status, 200, JSON.stringify(plain.json));
    const raw = plain.json.choices[0].message.content;
    assert.ok(raw.length > 0 && !raw.includes('</think>'), `precondition: the model thinks without closing: ${raw}`);
    assert.equal(plain.json.choices[0].message.reasoning_content, undefined);

    const r = await call('/v1/chat/completions', body, 'think-auto');  // server default: auto
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assertSchema('CreateChatCompletionResponse', r.json);
    assert.equal(r.json.choices[0].message.reasoning_content, `\n${raw}`);
    assert.equal(r.json.choices[0].message.content, '');

    const s = await call('/v1/chat/completions', { ...body, stream: true }, 'think-stream');
    assert.equal(s.status, 200);
    const chunks = s.frames.map((f) => f.slice(f.indexOf('data: ') + 6)).filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    for (const ch of chunks) assertSchema('CreateChatCompletionStreamResponse', ch);
    const deltas = chunks.map((c) => c.choices[0].delta);
    assert.equal(deltas.map((d) => d.reasoning_content ?? '').join(''), `\n${raw}`);
    assert.equal(deltas.map((d) => d.content ?? '').join(''), '');
    assert.ok(deltas.filter((d) => d.reasoning_content).length >= 2, 'reasoning is streamed in pieces');

    const bad = await call('/v1/chat/completions', { ...body, reasoning_format: 'bogus' }, 'think-bad');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'reasoning_format');

    // The openai SDK passes the extra field through.
    const sdk = await rs.client().chat.completions.create(body, { headers: { 'X-Agent-Id': 'think-sdk' } });
    assert.equal(sdk.choices[0].message.reasoning_content, `\n${raw}`);
    let streamed = '';
    for await (const ch of await rs.client().chat.completions.create({ ...body, stream: true }, { headers: { 'X-Agent-Id': 'think-sdk2' } })) {
      streamed += ch.choices[0]?.delta?.reasoning_content ?? '';
    }
    assert.equal(streamed, `\n${raw}`);

    // Anthropic: thinking blocks only when the request enables thinking.
    const abody = { model: 'claude-x', max_tokens: 24, temperature: 0, messages: body.messages };
    const on = await call('/v1/messages', { ...abody, thinking: { type: 'enabled', budget_tokens: 1024 } }, 'think-a1');
    assert.equal(on.status, 200, JSON.stringify(on.json));
    assert.deepEqual(on.json.content.map((b) => b.type), ['thinking', 'text']);
    assert.equal(on.json.content[0].thinking, `\n${raw}`);
    assert.equal(on.json.content[0].signature, '');
    // Without `thinking` the template gets enable_thinking false (R1's closes
    // the block in the prompt): the reply is text, no thinking block.
    const off = await call('/v1/messages', abody, 'think-a2');
    assert.equal(off.status, 200, JSON.stringify(off.json));
    assert.deepEqual(off.json.content.map((b) => b.type), ['text']);
    const as = await call('/v1/messages', { ...abody, stream: true, thinking: { type: 'enabled', budget_tokens: 1024 } }, 'think-a3');
    const events = as.frames.map((f) => JSON.parse(f.slice(f.indexOf('data: ') + 6)));
    assert.deepEqual(events.find((e) => e.type === 'content_block_start').content_block, { type: 'thinking', thinking: '' });
    const thinking = events.filter((e) => e.delta?.type === 'thinking_delta').map((e) => e.delta.thinking).join('');
    assert.equal(thinking, `\n${raw}`);
    const sig = events.findIndex((e) => e.delta?.type === 'signature_delta');
    assert.ok(sig > 0 && events[sig + 1].type === 'content_block_stop', 'signature_delta closes the thinking block');
  } finally {
    const ex = await rs.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${rs.log}`);
    await rmTemp(rdir);
  }
});

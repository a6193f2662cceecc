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
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { Server, makeTemp, rmTemp, MODEL_ID, LONG_SYSTEM } from './lib/server.mjs';
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
    [{ messages: [{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '['.repeat(200) } }] }] },
      'messages[0].tool_calls[0].function.arguments'],
  ];
  for (const [extra, param] of cases) {
    const r = await post({ model: MODEL_ID, messages: ASK, max_tokens: 4, ...extra });
    assert.equal(r.status, 400, `${JSON.stringify(extra)} -> ${JSON.stringify(r.json)}`);
    assertSchema('ErrorResponse', r.json);
    if (param) assert.equal(r.json.error.param, param);
  }
});

// A real loop, as an application writes it with the openai SDK: call the
// model, run each tool it calls, send the results, until it answers. The
// SDK's defaults otherwise (no temperature, parallel_tool_calls unset, so
// true); the first step must call (the 16M model chooses nothing by
// itself), later ones are "auto", where it writes text. It never ends a
// text reply by itself, so max_tokens caps the answer (a call takes it
// ~70 tokens: the tag and the JSON keys are forced text). Before issue 30's
// fix the forced step repeated its call until max_tokens (finish "length").
test('openai SDK tool loop (call -> result -> next step -> answer), default settings, reuses the cache', async () => {
  const headers = { 'X-Agent-Id': 'sdk-loop' };
  const messages = [...ASK];
  const tools = { get_weather: ({ city }) => `Sunny in ${city}, 21 degrees.` };
  const steps = [];
  for (let step = 0; step < 4; step++) {
    const r = await client.chat.completions.create({ model: MODEL_ID, messages, tools: [WEATHER],
      tool_choice: step === 0 ? 'required' : 'auto', max_tokens: 128 }, { headers });
    assertSchema('CreateChatCompletionResponse', r);
    steps.push(r);
    const msg = r.choices[0].message;
    messages.push(msg);
    if (r.choices[0].finish_reason !== 'tool_calls') break;
    for (const call of msg.tool_calls) {
      messages.push({ role: 'tool', tool_call_id: call.id,
        content: tools[call.function.name](JSON.parse(call.function.arguments)) });
    }
  }
  assert.equal(steps[0].choices[0].finish_reason, 'tool_calls', JSON.stringify(steps[0].choices[0]));
  assert.ok(steps.length >= 2, 'the loop went on after the call');
  const last = steps.at(-1).choices[0];
  assert.notEqual(last.finish_reason, 'tool_calls');
  assert.ok(last.message.content.length > 0);
  for (let i = 1; i < steps.length; i++) {
    const u = steps[i].usage;
    assert.equal(u.agentkv.cache_state, 'resident');
    assert.ok(u.prompt_tokens_details.cached_tokens >= steps[i - 1].usage.prompt_tokens,
      `step ${i}: cached ${u.prompt_tokens_details.cached_tokens} < the previous prompt ${steps[i - 1].usage.prompt_tokens}`);
  }
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

// zodFunction tools through parse(), SDK defaults otherwise (parallel calls
// allowed, no temperature): the SDK throws on finish_reason "length"
// (LengthFinishReasonError), so the forced call must end by itself; before
// issue 30's fix it was repeated inside one <tool_call> until max_tokens.
// An enum argument: a free string at temperature 1 is the 16M model's
// ramble, which may run to any max_tokens (nothing bounds a string's text).
test('openai SDK parse() with zodFunction tools, default settings', async () => {
  const Weather = z.object({ city: z.enum(['Paris', 'Rome']) });
  for (let i = 0; i < 4; i++) {
    const r = await client.chat.completions.parse({ model: MODEL_ID, messages: ASK,
      tools: [zodFunction({ name: 'get_weather', description: 'Current weather of a city', parameters: Weather })],
      tool_choice: 'required', max_tokens: 200 });
    assertSchema('CreateChatCompletionResponse', r);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    for (const call of r.choices[0].message.tool_calls) {
      assert.equal(call.function.name, 'get_weather');
      assert.deepEqual(Weather.parse(call.function.parsed_arguments), call.function.parsed_arguments);
    }
  }
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

// Issue 30: tool loops that survive a weak model. A free-text argument
// (the issue's own case): the 16M model wrote the call, then whitespace at
// every gap and after the call (101 tokens for a one-word call), and with
// parallel calls repeated the call until max_tokens. Now the JSON
// whitespace is bounded and the reply ends once the grammar is complete.
const SAY = { type: 'function', function: { name: 'say', description: 'Say one thing',
  parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] } } };
const SAY_PROMPTS = ['Say a word.', 'Tell me about Paris.', 'Hello there', 'What is the weather in Rome?'];

test('forced calls with a free-text argument end when the call closes (named, required, parallel or not)', async () => {
  const choices = [[{ type: 'function', function: { name: 'say' } }, undefined, 1], ['required', false, 1],
    ['required', true, 0], ['required', undefined, 0]];
  for (const [tool_choice, parallel_tool_calls, exactly] of choices) {
    for (const content of SAY_PROMPTS) {
      const r = await post({ model: MODEL_ID, messages: [{ role: 'user', content }], tools: [SAY], tool_choice,
        parallel_tool_calls, max_tokens: 200, temperature: 0 });
      const what = `${JSON.stringify([tool_choice, parallel_tool_calls, content])}: ${JSON.stringify(r.json)}`;
      assert.equal(r.status, 200, what);
      assertSchema('CreateChatCompletionResponse', r.json);
      const c = r.json.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', what);
      if (exactly) assert.equal(c.message.tool_calls.length, exactly, what);
      for (const call of c.message.tool_calls) assert.equal(typeof JSON.parse(call.function.arguments).word, 'string');
      // One short call, not 200 tokens of padding (the calls are ~60 tokens).
      assert.ok(r.json.usage.completion_tokens <= 80 * c.message.tool_calls.length, what);
    }
  }
});

test('json_schema: bounded whitespace, the reply ends when the JSON closes', async () => {
  // maxLength closes the string within max_tokens whatever the tiny model rambles (with f16 slots, the
  // default until stop 23, one of these prompts does not close it on its own in 200 tokens); what is checked is what
  // follows the close: the object ends and so does the reply.
  const schema = { type: 'object', properties: { word: { type: 'string', maxLength: 64 } }, required: ['word'],
    additionalProperties: false };
  for (const content of SAY_PROMPTS) {
    const r = await post({ model: MODEL_ID, messages: [{ role: 'user', content }], max_tokens: 200, temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema, strict: true } } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const c = r.json.choices[0];
    assert.equal(c.finish_reason, 'stop', JSON.stringify(r.json));
    assert.equal(typeof JSON.parse(c.message.content).word, 'string');
    assert.ok(!/\s{6}/.test(c.message.content), `a run of whitespace: ${JSON.stringify(c.message.content)}`);
  }
});

// What we produced is accepted back: a call cut by max_tokens has arguments
// that are not JSON (`{\n"word"`); the Agents SDK echoes them and we used to
// answer our own output with a 400, ending the run.
test('a call cut by max_tokens goes back in the history: chat completions and responses', async () => {
  const first = await post({ model: MODEL_ID, messages: [{ role: 'user', content: 'Say a word.' }], tools: [SAY],
    tool_choice: 'required', parallel_tool_calls: false, max_tokens: 40, temperature: 0 });
  assert.equal(first.status, 200);
  const c = first.json.choices[0];
  assert.equal(c.finish_reason, 'length');
  const call = c.message.tool_calls?.[0];
  assert.ok(call, `precondition: a cut call was announced: ${JSON.stringify(c)}`);
  assert.throws(() => JSON.parse(call.function.arguments), undefined, `precondition: cut: ${call.function.arguments}`);
  const history = [{ role: 'user', content: 'Say a word.' }, c.message,
    { role: 'tool', tool_call_id: call.id, content: 'ok' }];
  for (const tool_choice of ['auto', 'required']) {
    const next = await post({ model: MODEL_ID, messages: history, tools: [SAY], tool_choice, max_tokens: 8 });
    assert.equal(next.status, 200, JSON.stringify(next.json));
  }
  const r = await fetch(`${server.baseURL}/v1/responses`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL_ID, max_output_tokens: 8, store: false,
      tools: [{ type: 'function', name: 'say', parameters: SAY.function.parameters }],
      input: [{ role: 'user', content: 'Say a word.' },
        { type: 'function_call', call_id: call.id, name: 'say', arguments: call.function.arguments },
        { type: 'function_call_output', call_id: call.id, output: 'ok' }] }) });
  assert.equal(r.status, 200, await r.text());
  // Still refused: arguments nested deeper than any request may be.
  const deep = await post({ model: MODEL_ID, messages: [history[0],
    { ...c.message, tool_calls: [{ ...call, function: { ...call.function, arguments: '['.repeat(300) } }] }, history[2]] });
  assert.equal(deep.status, 400);
  assert.equal(deep.json.error.code, 'json_too_deep');
});

// What we return is what we cache: turn 2 echoes turn 1's reply verbatim
// (as the SDKs do) and must read all of turn 1 (prompt and reply) from the
// cache but its tail, at most ECHO_TAIL_LOSS tokens: the reply's last token
// (sampled, never fed) and, where the echoed text tokenizes differently at
// the reply's end (" their"+"i"+"ow" sampled, " the"+"iri"+"ow" re-tokenized),
// the kept tokens end at the last boundary both share (TurnPlan); and >= 99%
// of turn 1 over all pairs.
// With tools, replies that began with whitespace lost it in the response
// (common's parser) while the cache kept it: 15 of 40 probe seeds re-prefilled
// the whole reply. Sampled (temperature 1), so replies start with blanks often.
const ECHO_SEEDS = 20;
const ECHO_TAIL_LOSS = 4;
async function echoTurns(api, withTools, seed) {
  const agent = { 'Content-Type': 'application/json', 'X-Agent-Id': `echo-${api}-${withTools}-${seed}` };
  const call = async (route, body) => {
    const r = await fetch(`${server.baseURL}${route}`, { method: 'POST', headers: agent, body: JSON.stringify(body) });
    const json = await r.json();
    assert.equal(r.status, 200, JSON.stringify(json));
    return json;
  };
  const user = { role: 'user', content: `Tell me about the mill, part ${seed}.` };
  if (api === 'chat') {
    const body = { model: MODEL_ID, messages: [{ role: 'system', content: LONG_SYSTEM }, user], max_tokens: 16,
      temperature: 1, seed, ...(withTools ? { tools: [SAY] } : {}) };
    const t1 = await call('/v1/chat/completions', body);
    const t2 = await call('/v1/chat/completions', { ...body,
      messages: [...body.messages, t1.choices[0].message, { role: 'user', content: 'More.' }] });
    return { reply: t1.choices[0].message.content, turn1: t1.usage.prompt_tokens + t1.usage.completion_tokens,
      cached: t2.usage.prompt_tokens_details.cached_tokens };
  }
  const body = { model: MODEL_ID, instructions: LONG_SYSTEM, input: [user], max_output_tokens: 16, temperature: 1,
    seed, store: false, ...(withTools ? { tools: [{ type: 'function', name: 'say', parameters: SAY.function.parameters }] } : {}) };
  const t1 = await call('/v1/responses', body);
  const t2 = await call('/v1/responses', { ...body, input: [user, ...t1.output, { role: 'user', content: 'More.' }] });
  return { reply: t1.output.find((o) => o.type === 'message')?.content[0].text,
    turn1: t1.usage.input_tokens + t1.usage.output_tokens, cached: t2.usage.input_tokens_details.cached_tokens };
}

test(`an echoed reply continues the cache (${ECHO_SEEDS} seeds, with and without tools, chat and responses)`, async () => {
  const bad = [];
  let blankStarts = 0, n = 0, cached = 0, turn1 = 0;
  for (const api of ['chat', 'responses']) {
    for (const withTools of [false, true]) {
      for (let seed = 1; seed <= (api === 'chat' ? ECHO_SEEDS : ECHO_SEEDS / 2); seed++) {
        const e = await echoTurns(api, withTools, seed);
        n++;
        cached += e.cached;
        turn1 += e.turn1;
        if (/^\s/.test(e.reply ?? '')) blankStarts++;
        if (e.turn1 - e.cached > ECHO_TAIL_LOSS) bad.push({ api, withTools, seed, ...e });
      }
    }
  }
  console.log(`echo: ${n} pairs, ${blankStarts} replies start with whitespace, ` +
    `turn 2 read ${(100 * cached / turn1).toFixed(2)}% of turn 1 from the cache`);
  assert.ok(blankStarts >= 3, `precondition: some replies start with whitespace (${blankStarts})`);
  assert.deepEqual(bad, []);
  assert.ok(cached >= 0.99 * turn1);
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

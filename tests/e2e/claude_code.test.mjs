// Requests shaped like Claude Code's, through the official @anthropic-ai/sdk
// (issue 30): the session header X-Claude-Code-Session-Id, the attribution
// line (x-anthropic-billing-header, its cch differing per request) as the
// first system block, side requests on the same session (a max_tokens 1
// quota probe, title generation with a system text of its own) that must
// leave the main conversation's cache alone, and the server's one log line
// per request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Server, makeTemp, rmTemp, rawRequest, LONG_SYSTEM } from './lib/server.mjs';

let dir, server;
before(async () => {
  dir = await makeTemp('claude-code');
  server = await Server.start({ cacheDir: `${dir}/cache`, ctx: 8192, slots: 2 });
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const SESSION = 'e2e-cc-session';
const client = (session = SESSION) => new Anthropic({
  baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 180_000,
  defaultHeaders: { 'X-Claude-Code-Session-Id': session },
});
const billing = (cch) => `x-anthropic-billing-header: cc_version=2.1.332.e3f; cc_entrypoint=cli; cch=${cch};`;
// ~5,300 tokens of system text (Claude Code's is 13-30K): a turn's new text
// (the echoed reply and the next question) is < 1% of the prompt.
const SYSTEM_TEXT = "You are Claude Code, Anthropic's official CLI for Claude.\n" + Array(20).fill(LONG_SYSTEM).join('\n');
const TOOLS = [{
  name: 'Read', description: 'Reads a file from the local filesystem.',
  input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
}];
const mainTurn = (messages, cch) => ({
  model: 'claude-sonnet-4-5', max_tokens: 12, temperature: 0, tools: TOOLS,
  system: [{ type: 'text', text: billing(cch) }, { type: 'text', text: SYSTEM_TEXT, cache_control: { type: 'ephemeral' } }],
  messages,
});
const reused = (u) => u.cache_read_input_tokens / (u.cache_read_input_tokens + u.input_tokens);
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
// The server's request log lines for one session's agent id.
const logLines = (agent) => server.log.split('\n').filter((l) => l.includes(' request ') && l.includes(` agent=${agent} `));

test('side requests leave the main conversation alone; the billing line breaks no prefix', async () => {
  const c = client();
  const q1 = { role: 'user', content: 'Who built the mill?' };
  const t1 = await c.messages.create(mainTurn([q1], 'a1b2c'));
  assert.equal(t1.usage.agentkv.agent_id, SESSION);

  // Claude Code's quota probe: no system text, one word, max_tokens 1.
  const probe = await c.messages.create({
    model: 'claude-haiku-4-5', max_tokens: 1, messages: [{ role: 'user', content: 'quota' }],
  });
  assert.equal(probe.usage.agentkv.side_of, SESSION, JSON.stringify(probe.usage));
  assert.ok(probe.usage.agentkv.agent_id.startsWith(`${SESSION}-side-`), probe.usage.agentkv.agent_id);
  // Title generation: a short system text of its own, streamed.
  const title = await c.messages.stream({
    model: 'claude-haiku-4-5', max_tokens: 8, temperature: 0,
    system: [{ type: 'text', text: billing('ffff0') }, { type: 'text', text: 'Summarize this coding conversation in under 50 characters.' }],
    messages: [{ role: 'user', content: 'The user asked who built the mill.' }],
  }).finalMessage();
  assert.ok(textOf(title) !== undefined);  // (a streamed message's usage has no agentkv part: the log line says)

  // The next real turn (another cch, as Claude Code sends at times) reuses
  // the whole conversation, from the slot the side requests did not take.
  const t2 = await c.messages.create(mainTurn(
    [q1, { role: 'assistant', content: t1.content }, { role: 'user', content: 'And the school?' }], '9z8y7'));
  assert.equal(t2.usage.agentkv.agent_id, SESSION);
  assert.equal(t2.usage.agentkv.side_of, undefined);
  assert.equal(t2.usage.agentkv.cache_state, 'resident', JSON.stringify(t2.usage));
  assert.ok(reused(t2.usage) >= 0.99, JSON.stringify(t2.usage));
  assert.ok(textOf(t2) !== undefined);

  // A second session with the same system text and tools shares its prefix
  // from character 0 (the billing line with its cch is not rendered); it is
  // a new agent id, so it starts cold here (sharing across ids: another issue).
  const other = await client('e2e-cc-other').messages.create(mainTurn([q1], '00000'));
  assert.equal(other.usage.agentkv.agent_id, 'e2e-cc-other');

  // One log line per request, with its fields; the side requests name the
  // side agent they ran as.
  await new Promise((r) => setTimeout(r, 200));  // the stream's line is written when it ends
  const lines = logLines(SESSION);
  assert.equal(lines.length, 4, lines.join('\n'));
  for (const l of lines) {
    assert.match(l, /agentkv info: request method=POST route=\/v1\/messages status=200 ns=default /, l);
    assert.match(l, / source=X-Claude-Code-Session-Id /, l);
    assert.match(l, / prompt_tokens=\d+ cached_tokens=\d+ prefilled=\d+ completion_tokens=\d+ cache=\w+ match=\w+ /, l);
    assert.match(l, / ttft_ms=[\d.]+ total_ms=[\d.]+/, l);
  }
  assert.match(lines[1], / served=e2e-cc-session-side-[0-9a-f]{16} side_of=e2e-cc-session /);
  assert.match(lines[2], / served=e2e-cc-session-side-[0-9a-f]{16} side_of=e2e-cc-session .* stream=true$/);
  const served = (l) => l.match(/ served=(\S+) /)[1];
  assert.notEqual(served(lines[2]), served(lines[1]));  // another system text, another side agent
  assert.match(lines[3], / cache=resident match=/);
});

test('the log line: errors are typed, client text cannot forge a field, polls are not logged', async () => {
  const count = () => server.log.split('\n').filter((l) => l.includes(' request ')).length;
  const before = count();
  // Health and discovery polls: at debug only (the two lines below are all).
  for (const [method, path] of [['GET', '/health'], ['HEAD', '/'], ['GET', '/'], ['GET', '/v1/models']]) {
    assert.equal((await rawRequest(server, method, path)).status, 200, `${method} ${path}`);
  }
  // A path with quotes and spaces spelling other fields (httplib itself
  // refuses a path with an encoded newline before we see it).
  const r = await rawRequest(server, 'GET', '/v1/x%22%20status=200%20agent=%22root');
  assert.equal(r.status, 404);
  // A session header that is no valid agent id (quotes, spaces): hashed.
  const bad = await rawRequest(server, 'POST', '/v1/messages', {
    headers: { 'X-Claude-Code-Session-Id': 'a" status=500 x="' },
    body: { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] },
  });
  assert.equal(bad.status, 200);
  await new Promise((r2) => setTimeout(r2, 100));
  const lines = server.log.split('\n').filter((l) => l.includes(' request ')).slice(before);
  assert.equal(lines.length, 2, lines.join('\n'));
  assert.match(lines[0], /^agentkv info: request method=GET route="\/v1\/x\\" status=200 agent=\\"root" status=404 error=not_found_error total_ms=/, lines[0]);
  assert.match(lines[1], / status=200 ns=default agent=h-[0-9a-f]{16} source=X-Claude-Code-Session-Id /, lines[1]);
  assert.equal(count(), before + 2);
});

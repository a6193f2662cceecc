// 5. Every bad input gets the right error (OpenAI's error JSON, the right
// status), before any model work, and the server still answers afterwards.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Server, makeTemp, rmTemp, chatReq, rawRequest, MODEL_ID, LONG_SYSTEM } from './lib/server.mjs';

const KEY = 'sk-e2e-test-key-0123456789';
const AUTH = { authorization: `Bearer ${KEY}` };
// /metrics is server-wide: with tenant keys it takes the admin key (docs/api.md).
const ADMIN_KEY = 'sk-e2e-admin-key-9876543210';
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };

let dir, server, client;
before(async () => {
  dir = await makeTemp('errors');
  // --strict-model-name: unknown model names are a 404 (by default any name is accepted).
  server = await Server.start({ cacheDir: `${dir}/cache`, apiKey: KEY, adminKey: ADMIN_KEY, ctx: 512,
    extraArgs: ['--strict-model-name'] });
  client = server.client({ apiKey: KEY });
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const GOOD = { model: MODEL_ID, messages: [{ role: 'user', content: 'Hello there.' }], max_tokens: 4, temperature: 0 };

function checkError(r, status, { code, param, type } = {}) {
  const where = `${r.status} ${r.text}`;
  assert.equal(r.status, status, where);
  assert.ok(r.json && typeof r.json.error === 'object', `not OpenAI error JSON: ${where}`);
  const e = r.json.error;
  assert.equal(typeof e.message, 'string', where);
  assert.ok(e.message.length > 0, where);
  assert.equal(typeof e.type, 'string', where);
  assert.ok('param' in e && 'code' in e, `error lacks param/code: ${where}`);
  if (code !== undefined) assert.equal(e.code, code, where);
  if (param !== undefined) assert.equal(e.param, param, where);
  if (type !== undefined) assert.equal(e.type, type, where);
  assert.match(r.headers['content-type'] ?? '', /application\/json/, where);
}

const post = (path, body, headers = {}) => rawRequest(server, 'POST', path, { body, headers: { ...AUTH, ...headers } });

async function stillServes() {
  const r = await client.chat.completions.create(GOOD, { headers: { 'X-Agent-Id': 'errors-ok' } });
  assert.equal(r.choices.length, 1);
  assert.ok(r.usage.completion_tokens >= 1);
}

async function metric(name) {
  const r = await rawRequest(server, 'GET', '/metrics', { headers: ADMIN });
  assert.equal(r.status, 200);
  return [...r.text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'gm'))]
    .reduce((s, m) => s + Number(m[1]), 0);
}

test('the server answers normally to begin with', stillServes);

test('bad inputs get the right errors and do no model work', async (t) => {
  const prefilled0 = await metric('agentkv_tokens_prefilled_total');
  const requests0 = await metric('agentkv_requests_total');

  await t.test('malformed JSON -> 400 invalid_json', async () => {
    checkError(await post('/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"'), 400,
      { code: 'invalid_json', type: 'invalid_request_error' });
    checkError(await post('/v1/completions', 'not json at all'), 400, { code: 'invalid_json' });
    checkError(await post('/v1/chat/completions', '[1, 2, 3]'), 400);
    checkError(await post('/v1/chat/completions', ''), 400);
  });

  await t.test('wrong types -> 400', async () => {
    checkError(await post('/v1/chat/completions', { ...GOOD, messages: 'hello' }), 400, { param: 'messages' });
    checkError(await post('/v1/chat/completions', { ...GOOD, max_tokens: '5' }), 400,
      { param: 'max_tokens', code: 'invalid_type' });
    checkError(await post('/v1/chat/completions', { ...GOOD, temperature: 'hot' }), 400, { param: 'temperature' });
    checkError(await post('/v1/chat/completions', { ...GOOD, stream: 'yes' }), 400, { param: 'stream' });
    checkError(await post('/v1/chat/completions', { ...GOOD, messages: [{ role: 'user', content: 42 }] }), 400);
    checkError(await post('/v1/chat/completions', { ...GOOD, messages: [{ role: 'wizard', content: 'hi' }] }), 400);
    checkError(await post('/v1/completions', { model: MODEL_ID, prompt: 17 }), 400, { param: 'prompt' });
    checkError(await post('/v1/chat/completions', { ...GOOD, max_tokens: 1.5 }), 400, { param: 'max_tokens' });
  });

  await t.test('out-of-range values -> 400 (temperature 5, max_tokens 0, top_p 0)', async () => {
    checkError(await post('/v1/chat/completions', { ...GOOD, temperature: 5 }), 400,
      { param: 'temperature', code: 'invalid_value' });
    checkError(await post('/v1/chat/completions', { ...GOOD, max_tokens: 0 }), 400, { param: 'max_tokens' });
    checkError(await post('/v1/chat/completions', { ...GOOD, top_p: 0 }), 400, { param: 'top_p' });
    checkError(await post('/v1/chat/completions', { ...GOOD, n: 2 }), 400);
    // Through the SDK too: it surfaces a BadRequestError with the fields.
    await assert.rejects(client.chat.completions.create({ ...GOOD, temperature: 5 }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.param, 'temperature');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
  });

  await t.test('empty messages / empty prompt -> 400', async () => {
    checkError(await post('/v1/chat/completions', { ...GOOD, messages: [] }), 400, { param: 'messages' });
    checkError(await post('/v1/chat/completions', { model: MODEL_ID, max_tokens: 4 }), 400,
      { code: 'missing_required_parameter' });
    checkError(await post('/v1/completions', { model: MODEL_ID, prompt: '' }), 400, { param: 'prompt' });
  });

  await t.test('unknown model (with --strict-model-name) -> 404 model_not_found', async () => {
    checkError(await post('/v1/chat/completions', { ...GOOD, model: 'gpt-4o' }), 404, { code: 'model_not_found' });
    await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'hi', max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  });

  await t.test('invalid agent ids -> 400 invalid_agent_id', async () => {
    const bad = ['../x', 'a/b', '..', '.hidden', 'a b', 'x'.repeat(129), 'a\\b', '%2e%2e%2fx', ''];
    for (const id of bad) {
      if (id !== '') {
        checkError(await post('/v1/chat/completions', GOOD, { 'X-Agent-Id': id }), 400, { code: 'invalid_agent_id' });
        checkError(await post('/v1/chat/completions', GOOD, { 'X-Session-ID': id }), 400, { code: 'invalid_agent_id' });
      }
      checkError(await post('/v1/chat/completions', { ...GOOD, agent_id: id }), 400, { code: 'invalid_agent_id' });
      checkError(await post('/v1/completions', { model: MODEL_ID, prompt: 'hi', max_tokens: 2, session_id: id }), 400,
        { code: 'invalid_agent_id' });
    }
    // Wrong type for the body field.
    checkError(await post('/v1/chat/completions', { ...GOOD, agent_id: 7 }), 400);
    // Two different ids in one request.
    checkError(await post('/v1/chat/completions', { ...GOOD, agent_id: 'one' }, { 'X-Agent-Id': 'two' }), 400);
    // Admin routes.
    checkError(await rawRequest(server, 'GET', '/v1/agents/..%2Fx', { headers: AUTH }), 400, { code: 'invalid_agent_id' });
    checkError(await rawRequest(server, 'DELETE', '/v1/agents/a%2Fb', { headers: AUTH }), 400, { code: 'invalid_agent_id' });
    // Through the SDK.
    await assert.rejects(client.chat.completions.create(GOOD, { headers: { 'X-Agent-Id': '../x' } }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === 'invalid_agent_id');
  });

  await t.test("prompt longer than the context -> each API's standard 400, streamed or not", async () => {
    // -c 512: ~4 x 180 tokens, within the byte bound (a prompt too large in bytes stays a 413).
    const long = Array(4).fill(LONG_SYSTEM).join(' ');
    const openAiWording = (what) => new RegExp(`^This model's maximum context length is 512 tokens\\. However, your ${what
    } resulted in (\\d+) tokens\\. Please reduce the length of the ${what}\\.$`);
    for (const stream of [false, true]) {
      for (const [path, body, param] of [
        ['/v1/chat/completions', { ...GOOD, stream, messages: [{ role: 'user', content: long }] }, 'messages'],
        ['/v1/completions', { model: MODEL_ID, prompt: long, max_tokens: 4, stream }, 'prompt'],
        ['/v1/responses', { model: MODEL_ID, input: long, max_output_tokens: 16, stream }, 'input'],
      ]) {
        const r = await post(path, body);
        checkError(r, 400, { code: 'context_length_exceeded', param, type: 'invalid_request_error' });
        const m = r.json.error.message.match(openAiWording(param));
        assert.ok(m && Number(m[1]) >= 512, `${path}: ${r.text}`);
      }
      // Anthropic's words, as Claude Code parses them to compact once.
      const a = await post('/v1/messages', { model: MODEL_ID, max_tokens: 16, stream,
        messages: [{ role: 'user', content: long }] }, { 'anthropic-version': '2023-06-01' });
      assert.equal(a.status, 400, a.text);
      assert.match(a.headers['content-type'] ?? '', /application\/json/, a.text);
      assert.equal(a.json.type, 'error', a.text);
      assert.equal(a.json.error.type, 'invalid_request_error', a.text);
      const m = a.json.error.message.match(/^prompt is too long: (\d+) tokens > 511 maximum$/);
      assert.ok(m && Number(m[1]) > 511, a.text);
    }
    // Through the SDK: a BadRequestError carrying the code clients branch on.
    await assert.rejects(client.chat.completions.create({ ...GOOD, messages: [{ role: 'user', content: long }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  });

  await t.test('unknown route -> 404, wrong method -> 405', async () => {
    checkError(await rawRequest(server, 'GET', '/v1/nope', { headers: AUTH }), 404);
    const r = await rawRequest(server, 'GET', '/v1/chat/completions', { headers: AUTH });
    checkError(r, 405);
    assert.ok(r.headers.allow, 'a 405 carries Allow');
    checkError(await rawRequest(server, 'GET', '/v1/agents/never-seen', { headers: AUTH }), 404);
  });

  // None of the above reached the model.
  assert.equal(await metric('agentkv_tokens_prefilled_total'), prefilled0, 'a bad request prefilled tokens');
  assert.equal(await metric('agentkv_requests_total'), requests0, 'a bad request reached the backend');
  const agents = await rawRequest(server, 'GET', '/v1/agents', { headers: AUTH });
  assert.deepEqual(agents.json.data.map((a) => a.id).sort(), ['errors-ok'], 'bad requests created agents');
  await stillServes();
});

test('context boundary: ctx-1 prompt tokens is served (length), ctx tokens is 400', async () => {
  // " the" is one token each; find the fixed overhead (BOS) with a probe.
  const words = (k) => Array(k).fill('the').join(' ');
  const probe = async (k) => (await client.completions.create(
    { model: MODEL_ID, prompt: words(k), max_tokens: 1, temperature: 0 },
    { headers: { 'X-Agent-Id': 'errors-ok' } })).usage.prompt_tokens;
  const p10 = await probe(10), p20 = await probe(20);
  assert.equal(p20 - p10, 10, 'expected one token per " the"');
  const overhead = p10 - 10;
  const ctx = 512;
  const atLimit = await post('/v1/completions',
    { model: MODEL_ID, prompt: words(ctx - overhead), max_tokens: 4, temperature: 0 });
  checkError(atLimit, 400, { code: 'context_length_exceeded', param: 'prompt' });
  assert.match(atLimit.json.error.message, /However, your prompt resulted in 512 tokens\./, atLimit.text);
  const r = await client.completions.create(
    { model: MODEL_ID, prompt: words(ctx - 1 - overhead), max_tokens: 8, temperature: 0 },
    { headers: { 'X-Agent-Id': 'errors-ok' } });
  assert.equal(r.usage.prompt_tokens, ctx - 1);
  assert.equal(r.choices[0].finish_reason, 'length', 'max_tokens past the context ends with length');
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.prompt_tokens + r.usage.completion_tokens <= ctx,
    JSON.stringify(r.usage));
});

test('missing or wrong API key -> 401 on every route but /health', async () => {
  for (const [method, path, body] of [
    ['POST', '/v1/chat/completions', GOOD],
    ['POST', '/v1/completions', { model: MODEL_ID, prompt: 'hi', max_tokens: 2 }],
    ['GET', '/v1/models'],
    ['GET', '/v1/agents'],
    ['GET', '/v1/agents/errors-ok'],
    ['DELETE', '/v1/agents/errors-ok'],
    ['GET', '/metrics'],
  ]) {
    for (const headers of [{}, { authorization: 'Bearer wrong-key' }, { authorization: KEY },
      { authorization: `Basic ${Buffer.from(`x:${KEY}`).toString('base64')}` }]) {
      const r = await rawRequest(server, method, path, { body, headers });
      checkError(r, 401, { code: 'invalid_api_key' });
      assert.match(r.headers['www-authenticate'] ?? '', /Bearer/i, `${method} ${path}: WWW-Authenticate`);
    }
  }
  // A tenant's own key does not open the server-wide /metrics.
  checkError(await rawRequest(server, 'GET', '/metrics', { headers: AUTH }), 401, { code: 'invalid_api_key' });
  // Even a bad body is answered 401 first when the key is missing.
  checkError(await rawRequest(server, 'POST', '/v1/chat/completions', { body: '{bad json' }), 401);
  // The SDK with a wrong key.
  const wrong = server.client({ apiKey: 'sk-wrong' });
  await assert.rejects(wrong.chat.completions.create(GOOD), (e) => e instanceof OpenAI.AuthenticationError);
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  // /health needs no key.
  assert.equal((await rawRequest(server, 'GET', '/health')).status, 200);
  // The agent is still there (the unauthorised DELETE did nothing).
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/errors-ok', { headers: AUTH })).status, 200);
  await stillServes();
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [MODEL_ID]);
});

test('after all of that, a normal streamed request still succeeds', async () => {
  let text = '';
  const s = await client.chat.completions.create({ ...GOOD, max_tokens: 6, stream: true },
    { headers: { 'X-Agent-Id': 'errors-final' } });
  for await (const ch of s) text += ch.choices[0]?.delta?.content ?? '';
  assert.ok(text.length > 0);
  assert.equal((await rawRequest(server, 'GET', '/health')).status, 200);
});

// Namespaces (one per API key): nothing is matched or shared across tenants,
// admin routes are scoped; an isolated key never matches other conversations
// implicitly and is a trust domain of its own (docs/api.md); and a client that disconnects mid-stream cancels its request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  Server, makeTemp, rmTemp, chatReq, rawRequest, agentsDirs, waitForDisk, sleep, MODEL_ID, LONG_SYSTEM,
} from './lib/server.mjs';

const KA = 'sk-alice-0123456789', KB = 'sk-bob-9876543210';
const KISO = 'sk-alice-isolated-777';  // a second key of namespace alice, isolated
const KADMIN = 'sk-admin-5555555555';  // /metrics is server-wide: the admin key, not a tenant's
let dir, cacheDir, server, alice, bob, aliceIso;
before(async () => {
  dir = await makeTemp('tenants');
  cacheDir = path.join(dir, 'cache');
  server = await Server.start({ cacheDir, apiKey: `alice:${KA},bob:${KB},alice:${KISO}:isolated`, adminKey: KADMIN });
  alice = server.client({ apiKey: KA });
  aliceIso = server.client({ apiKey: KISO });
  bob = server.client({ apiKey: KB });
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const msgs = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who owned the mill?' }];
const auth = (k) => ({ authorization: `Bearer ${k}` });

test('tenants: same agent id and same prompt are separate per API key', async () => {
  const a1 = await alice.chat.completions.create(chatReq(msgs), { headers: { 'X-Agent-Id': 'same-id' } });
  assert.equal(a1.usage.agentkv.cache_state, 'cold');
  // Bob, same id, same prompt: cold, nothing reused from Alice.
  const b1 = await bob.chat.completions.create(chatReq(msgs), { headers: { 'X-Agent-Id': 'same-id' } });
  assert.equal(b1.usage.agentkv.cache_state, 'cold', JSON.stringify(b1.usage));
  assert.equal(b1.usage.prompt_tokens_details.cached_tokens, 0, JSON.stringify(b1.usage));
  assert.equal(b1.choices[0].message.content, a1.choices[0].message.content);
  // Implicit request from Bob with Alice-only text: no cross-tenant match.
  const only = [{ role: 'system', content: `Alice only. ${LONG_SYSTEM}` }, { role: 'user', content: 'Hi.' }];
  await alice.chat.completions.create(chatReq(only), { headers: { 'X-Agent-Id': 'alice-only' } });
  const bi = await bob.chat.completions.create(chatReq(only));
  assert.equal(bi.usage.prompt_tokens_details.cached_tokens, 0, `bob reused alice's cache: ${JSON.stringify(bi.usage)}`);
  assert.notEqual(bi.usage.agentkv.agent_id, 'alice-only');

  // Admin routes are scoped to the caller's namespace.
  const la = await rawRequest(server, 'GET', '/v1/agents', { headers: auth(KA) });
  const lb = await rawRequest(server, 'GET', '/v1/agents', { headers: auth(KB) });
  assert.ok(la.json.data.some((a) => a.id === 'alice-only'));
  assert.ok(!lb.json.data.some((a) => a.id === 'alice-only'), 'bob sees alice\'s agent');
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/alice-only', { headers: auth(KB) })).status, 404);
  assert.equal((await rawRequest(server, 'DELETE', '/v1/agents/alice-only', { headers: auth(KB) })).status, 404);
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/alice-only', { headers: auth(KA) })).status, 200,
    'bob\'s DELETE removed alice\'s agent');
  // Bob deleting his same-id leaves Alice's.
  assert.equal((await rawRequest(server, 'DELETE', '/v1/agents/same-id', { headers: auth(KB) })).status, 200);
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/same-id', { headers: auth(KA) })).status, 200);
  const a2 = await alice.chat.completions.create(chatReq(msgs), { headers: { 'X-Agent-Id': 'same-id' } });
  assert.notEqual(a2.usage.agentkv.cache_state, 'cold');

  // On disk: one namespace directory per tenant.
  await waitForDisk(server, 'alice-only', { headers: auth(KA) });
  const dirs = await agentsDirs(cacheDir);
  assert.equal(new Set(dirs.map((d) => path.dirname(d))).size, 2, `namespace dirs: ${dirs.join(', ')}`);
});

test('an isolated key never continues or forks other conversations implicitly', async () => {
  const conv = [{ role: 'system', content: `Isolation. ${LONG_SYSTEM}` }, { role: 'user', content: 'Who owned the mill?' }];
  const first = await alice.chat.completions.create(chatReq(conv));  // implicit: a new agent of namespace alice
  const openId = first.usage.agentkv.agent_id;
  const next = [...conv, first.choices[0].message, { role: 'user', content: 'And then?' }];
  // Same namespace, isolated key, a prompt that extends alice's conversation: cold.
  const iso = await aliceIso.chat.completions.create(chatReq(next));
  assert.equal(iso.usage.prompt_tokens_details.cached_tokens, 0, JSON.stringify(iso.usage));
  assert.equal(iso.usage.agentkv.match, 'miss', JSON.stringify(iso.usage));
  assert.notEqual(iso.usage.agentkv.agent_id, openId);
  // The open key still continues its conversation (not the isolated agent's).
  const again = await alice.chat.completions.create(chatReq(next));
  assert.equal(again.usage.agentkv.agent_id, openId, JSON.stringify(again.usage));
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
  // Issue 29: an isolated key is a trust domain of its own, so naming the
  // open key's agent reaches an agent of the isolated key's own (cold) ...
  const named = await aliceIso.chat.completions.create(chatReq(next), { headers: { 'X-Agent-Id': openId } });
  assert.equal(named.usage.prompt_tokens_details.cached_tokens, 0, JSON.stringify(named.usage));
  // ... which its next turn continues, while the open key never sees it.
  const named2 = await aliceIso.chat.completions.create(chatReq(next), { headers: { 'X-Agent-Id': openId } });
  assert.ok(named2.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(named2.usage));
  const isoSecret = [{ role: 'system', content: `Vault. ${LONG_SYSTEM}` }, { role: 'user', content: 'The PIN is 4821.' }];
  await aliceIso.chat.completions.create(chatReq(isoSecret), { headers: { 'X-Claude-Code-Session-Id': 'iso-session' } });
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/iso-session', { headers: auth(KA) })).status, 404);
  const probe = await alice.chat.completions.create(chatReq(isoSecret),
    { headers: { 'X-Claude-Code-Session-Id': 'iso-session', 'X-Claude-Code-Agent-Id': 'probe' } });
  assert.equal(probe.usage.prompt_tokens_details.cached_tokens, 0, `forked the isolated agent: ${JSON.stringify(probe.usage)}`);
  // The agent table's size is a metric.
  const m = (await rawRequest(server, 'GET', '/metrics', { headers: auth(KADMIN) })).text;
  assert.ok(Number(/^agentkv_agent_table_agents (\d+)/m.exec(m)?.[1]) > 0, 'agentkv_agent_table_agents missing');
});

test('a client that disconnects mid-stream cancels its request', async () => {
  const disconnects = async () => {
    const t = (await rawRequest(server, 'GET', '/metrics', { headers: auth(KADMIN) })).text;
    return Number(/^agentkv_http_client_disconnects_total (\d+)/m.exec(t)?.[1] ?? NaN);
  };
  const d0 = await disconnects();
  const ac = new AbortController();
  const stream = await alice.chat.completions.create(
    { model: MODEL_ID, messages: [{ role: 'user', content: 'Tell me a very long story.' }], max_tokens: 900,
      temperature: 0, stream: true },
    { headers: { 'X-Agent-Id': 'leaver' }, signal: ac.signal });
  let got = 0;
  let finish = null;
  try {
    // (The SDK ends the iteration quietly or throws an abort error.)
    for await (const ch of stream) {
      if (ch.choices[0]?.delta?.content) got++;
      finish ??= ch.choices[0]?.finish_reason ?? null;
      if (got >= 2) ac.abort();
    }
  } catch (e) {
    assert.ok(ac.signal.aborted, `stream failed before the abort: ${e}`);
  }
  assert.ok(got >= 2 && got < 10, `the stream should have been cut after two deltas (got ${got})`);
  assert.equal(finish, null, 'the stream finished before the client left');
  // The server notices, stops generating and frees the agent.
  let info;
  for (let i = 0; i < 100; i++) {
    info = await rawRequest(server, 'GET', '/v1/agents/leaver', { headers: auth(KA) });
    if (info.status === 200 && !info.json.busy) break;
    await sleep(100);
  }
  assert.equal(info.status, 200, info.text);
  assert.equal(info.json.busy, false, `agent still busy after its client left: ${info.text}`);
  assert.ok(info.json.tokens < 600, `generation was not cancelled: ${info.text}`);
  for (let i = 0; i < 50 && (await disconnects()) <= d0; i++) await sleep(100);
  assert.ok((await disconnects()) > d0, 'client disconnect not counted');
  // The agent and the server are usable afterwards.
  const r = await alice.chat.completions.create(chatReq([{ role: 'user', content: 'Tell me a very long story.' }],
    { max_tokens: 4 }), { headers: { 'X-Agent-Id': 'leaver' } });
  assert.equal(r.usage.completion_tokens, 4);
});

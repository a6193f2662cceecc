// 4. Implicit identity (no agent id sent): two conversations sharing a long
// system prompt but with different user messages both work, each continues
// its own history, and neither changes the other's output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Server, makeTemp, rmTemp, chatReq, COLD, LONG_SYSTEM, MAX_NEW_TURN_TOKENS } from './lib/server.mjs';

let dir, server, client;
before(async () => {
  dir = await makeTemp('implicit');
  server = await Server.start({ cacheDir: `${dir}/cache` });
  client = server.client();
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

async function implicitTurn(messages) {
  const { data, response } = await client.chat.completions
    .create(chatReq(messages, { max_tokens: 12 })).withResponse();
  const id = data.usage.agentkv.agent_id;
  assert.ok(id, 'implicit request got no agent id in usage.agentkv');
  assert.equal(response.headers.get('x-agent-id'), id, 'X-Agent-Id response header != usage.agentkv.agent_id');
  return { reply: data.choices[0].message.content, usage: data.usage, id };
}

// A cold oracle: a fresh explicit agent that reuses no cache (COLD).
async function explicitTurn(id, messages) {
  const r = await client.chat.completions.create(chatReq(messages, { max_tokens: 12, ...COLD }),
    { headers: { 'X-Agent-Id': id } });
  return { reply: r.choices[0].message.content, usage: r.usage };
}

test('two implicit conversations sharing a system prompt keep their own histories', async () => {
  const A = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who built the school?' }];
  const B = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'What is sold at the market on Sundays?' }];

  const a1 = await implicitTurn(A);
  assert.equal(a1.usage.agentkv.cache_state, 'cold');
  const b1 = await implicitTurn(B);
  // B shares the long system prompt with A's cached text: it may reuse it
  // (a fork), but must not continue A's agent.
  assert.notEqual(b1.id, a1.id, 'B continued A\'s agent');
  assert.notEqual(b1.usage.agentkv.match, 'extend', JSON.stringify(b1.usage));
  assert.notEqual(b1.usage.agentkv.match, 'exact', JSON.stringify(b1.usage));
  // The documented rule: the common prefix (the long system prompt) covers
  // more than half of A's text, so B forks A, reusing the shared prefix.
  assert.equal(b1.usage.agentkv.match, 'diverge', JSON.stringify(b1.usage));
  assert.ok(b1.usage.prompt_tokens_details.cached_tokens > 100,
    `B should reuse the shared system prompt: ${JSON.stringify(b1.usage)}`);

  A.push({ role: 'assistant', content: a1.reply }, { role: 'user', content: 'When was it built?' });
  B.push({ role: 'assistant', content: b1.reply }, { role: 'user', content: 'And on Mondays?' });

  const a2 = await implicitTurn(A);
  assert.equal(a2.id, a1.id, `A's second turn did not continue A's agent: ${JSON.stringify(a2.usage)}`);
  assert.equal(a2.usage.agentkv.match, 'extend', JSON.stringify(a2.usage));
  assert.notEqual(a2.usage.agentkv.cache_state, 'cold');
  assert.ok(a2.usage.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, JSON.stringify(a2.usage));

  const b2 = await implicitTurn(B);
  assert.equal(b2.id, b1.id, `B's second turn did not continue B's agent: ${JSON.stringify(b2.usage)}`);
  assert.equal(b2.usage.agentkv.match, 'extend', JSON.stringify(b2.usage));
  assert.ok(b2.usage.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, JSON.stringify(b2.usage));

  // A third turn of A after B's activity still continues A.
  A.push({ role: 'assistant', content: a2.reply }, { role: 'user', content: 'Who paid for it?' });
  const a3 = await implicitTurn(A);
  assert.equal(a3.id, a1.id);
  assert.equal(a3.usage.agentkv.match, 'extend', JSON.stringify(a3.usage));

  // Oracles (after the implicit turns, so they cannot be matched by them):
  // fresh explicit agents fed the same messages, cold.
  const oracle = async (tag, msgs, got) => {
    const o = await explicitTurn(`implicit-oracle-${tag}`, msgs);
    assert.equal(o.usage.agentkv.cache_state, 'cold');
    assert.equal(got.reply, o.reply, `${tag}: implicit reply differs from a cold explicit agent`);
  };
  await oracle('a1', A.slice(0, 2), a1);
  await oracle('b1', B.slice(0, 2), b1);
  await oracle('a2', A.slice(0, 4), a2);
  await oracle('b2', B.slice(0, 4), b2);
  await oracle('a3', A, a3);
});

test('an implicit request never continues an agent of a conversation it diverges from', async () => {
  // C's first turn, then D = C's system prompt + C's user message reworded:
  // D must not see C's reply in its context (it would if it extended C).
  const sys = LONG_SYSTEM + ' Today the archive is closed for cleaning.';
  const C = [{ role: 'system', content: sys }, { role: 'user', content: 'Is the archive open?' }];
  const c1 = await implicitTurn(C);
  const D = [{ role: 'system', content: sys }, { role: 'user', content: 'Is the library open?' }];
  const d1 = await implicitTurn(D);
  assert.notEqual(d1.id, c1.id);
  const od = await explicitTurn('implicit-oracle-d1', D);
  assert.equal(d1.reply, od.reply);
  // And C, continued, still gets its own history.
  C.push({ role: 'assistant', content: c1.reply }, { role: 'user', content: 'Why?' });
  const c2 = await implicitTurn(C);
  assert.equal(c2.id, c1.id, JSON.stringify(c2.usage));
  const oc = await explicitTurn('implicit-oracle-c2', C);
  assert.equal(c2.reply, oc.reply);
});

test('explicit identity from X-Agent-Id, X-Session-ID, body agent_id and session_id', async () => {
  const msgs = [{ role: 'user', content: 'Good morning.' }];
  const via = async (opts, body = {}) => (await client.chat.completions.create(
    { ...chatReq(msgs, { max_tokens: 4 }), ...body }, opts)).usage.agentkv;
  assert.equal((await via({ headers: { 'X-Agent-Id': 'id-hdr' } })).agent_id, 'id-hdr');
  assert.equal((await via({ headers: { 'X-Session-ID': 'id-sess-hdr' } })).agent_id, 'id-sess-hdr');
  // Unknown body params pass through the SDK untouched.
  assert.equal((await via({}, { agent_id: 'id-body' })).agent_id, 'id-body');
  assert.equal((await via({}, { session_id: 'id-sess-body' })).agent_id, 'id-sess-body');
  // All present ones equal: fine. The second request continues the agent.
  const again = await via({ headers: { 'X-Agent-Id': 'id-body', 'X-Session-ID': 'id-body' } },
    { agent_id: 'id-body', session_id: 'id-body' });
  assert.equal(again.agent_id, 'id-body');
  assert.notEqual(again.cache_state, 'cold');
  // Completions take the same identity.
  const c = await client.completions.create({ model: chatReq([]).model, prompt: 'Good morning.', max_tokens: 2,
    temperature: 0, agent_id: 'id-cmpl' });
  assert.equal(c.usage.agentkv.agent_id, 'id-cmpl');
});

// Agent teams (docs/api.md "Shared prefixes"): agents with their own ids that
// send the same system text compute it once. A new agent starts from another
// agent's cache of the shared prefix (idle, or running beside it), answers
// exactly as a cold prefill of its prompt, and holds the shared blocks once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serverForFile, chatReq, COLD, rawRequest, LONG_SYSTEM } from './lib/server.mjs';

const SYSTEM = `${LONG_SYSTEM}\n\nRules of the team:\n${LONG_SYSTEM}`;  // ~2 KB: over the 1 KiB minimum
const ROLES = ['coder', 'reviewer', 'planner', 'tester'];
const ctx = serverForFile('team');

const messages = (role) => [{ role: 'system', content: SYSTEM }, { role: 'user', content: `As the ${role}: who kept the mill?` }];

async function turn(id, msgs, extra = {}) {
  const r = await ctx.client.chat.completions.create(chatReq(msgs, { max_tokens: 12, ...extra }),
    { headers: { 'X-Agent-Id': id } });
  return { reply: r.choices[0].message.content, usage: r.usage };
}

test('a new agent of the team starts from another agent\'s cache of the shared system text', async () => {
  const first = await turn('team-coder', messages('coder'));
  assert.equal(first.usage.agentkv.cache_state, 'cold');
  assert.equal(first.usage.agentkv.shared_tokens, 0);
  const second = await turn('team-reviewer', messages('reviewer'));
  const u = second.usage;
  assert.notEqual(u.agentkv.cache_state, 'cold', JSON.stringify(u));
  assert.ok(u.prompt_tokens_details.cached_tokens > u.prompt_tokens / 2, JSON.stringify(u));
  assert.equal(u.agentkv.shared_tokens, u.prompt_tokens_details.cached_tokens, JSON.stringify(u));
  assert.equal(u.agentkv.agent_id, 'team-reviewer');
  // Oracle: the same messages prefilled cold.
  const cold = await turn('team-reviewer-oracle', messages('reviewer'), COLD);
  assert.equal(cold.usage.agentkv.cache_state, 'cold');
  assert.equal(cold.usage.prompt_tokens, u.prompt_tokens);
  assert.equal(second.reply, cold.reply, 'a seeded agent answers otherwise than a cold prefill');
  // Its shared blocks are the donor's, held once.
  const info = await rawRequest(ctx.server, 'GET', '/v1/agents/team-reviewer');
  assert.equal(info.status, 200);
  assert.ok(info.json.shared_ram_bytes > 0, info.text);
  // The donor goes on from its own cache, untouched.
  const msgs = messages('coder');
  msgs.push({ role: 'assistant', content: first.reply }, { role: 'user', content: 'And the school?' });
  const next = await turn('team-coder', msgs);
  assert.equal(next.usage.agentkv.match, 'extend', JSON.stringify(next.usage));
  assert.equal(next.usage.agentkv.shared_tokens, 0);
});

test('team members arriving together all answer as a cold prefill would', async () => {
  const shared = `${SYSTEM}\n(Session two.)`;  // a system text no agent has cached yet
  const req = (role) => [{ role: 'system', content: shared }, { role: 'user', content: `As the ${role}: what is sold at the market?` }];
  const got = await Promise.all(ROLES.map((r) => turn(`together-${r}`, req(r))));
  const reused = got.reduce((n, g) => n + g.usage.agentkv.shared_tokens, 0);
  assert.ok(reused > 0, `nobody reused the shared text: ${JSON.stringify(got.map((g) => g.usage.agentkv))}`);
  for (const [i, r] of ROLES.entries()) {
    const cold = await turn(`together-${r}-oracle`, req(r), COLD);
    assert.equal(got[i].reply, cold.reply, `${r}: differs from a cold prefill`);
  }
  const m = (await rawRequest(ctx.server, 'GET', '/metrics')).text;
  assert.match(m, /^agentkv_shared_prefix_hits_total\{source="[a-z]+"\} [1-9]/m, m);
});

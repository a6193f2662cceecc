// Exactness under load, with the server's default configuration (q4_0 slots
// over q4_0 blocks, batch-invariant flash attention: docs/engine.md "Exactness"): 6 different
// prompts, each sent without an agent id and with one, first one request at
// a time, then all 12 at once. At temperature 0 every answer equals the
// serial answer to the same prompt. The second time, the id-less requests
// continue the implicit agents of the first (restored from the RAM pool,
// the slots being fewer than the agents); the id-carrying ones are new
// agents decoded in batches with each other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serverForFile, chatReq, LONG_SYSTEM } from './lib/server.mjs';

const s = serverForFile('batched', { slots: 4 });
const MAX_TOKENS = 24;

const SHORT_SYSTEM = 'You are a helpful assistant who answers in one short paragraph.';
const PROMPTS = [
  [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Who built the school?' }],
  [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'What is sold at the market on Sundays?' }],
  [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: 'Describe the mill in spring.' }],
  [{ role: 'system', content: SHORT_SYSTEM }, { role: 'user', content: 'Tell me about the railway station.' }],
  [{ role: 'system', content: SHORT_SYSTEM }, { role: 'user', content: 'Why do rivers bend?' }],
  [{ role: 'user', content: 'Write two sentences about oak and beech trees.' }],
];

async function ask(messages, id) {
  const opts = id ? { headers: { 'X-Agent-Id': id } } : undefined;
  const r = await s.client.chat.completions.create(chatReq(messages, { max_tokens: MAX_TOKENS }), opts);
  return { text: r.choices[0].message.content, usage: r.usage };
}

test('6 prompts with and without ids: answers sent all at once equal those sent one at a time', async () => {
  const serial = [];
  const diffs = [];
  for (const [i, m] of PROMPTS.entries()) {
    const implicit = await ask(m);
    const named = await ask(m, `batched-serial-${i}`);
    assert.ok(implicit.text.length > 0, JSON.stringify(implicit));
    // The same prompt, one agent without an id and one with (which may start
    // from the first one's cache): the same answer.
    if (named.text !== implicit.text) {
      diffs.push(`prompt ${i} serial: with id ${JSON.stringify(named.text)} != without ${JSON.stringify(implicit.text)}`);
    }
    serial.push(implicit.text);
  }

  const all = await Promise.all(PROMPTS.flatMap((m, i) => [ask(m), ask(m, `batched-concurrent-${i}`)]));
  const states = all.map((r) => r.usage.agentkv.cache_state);
  // The id-less requests found their agents of the first round, most of
  // them no longer in the 4 slots: restored from the RAM pool.
  assert.ok(all.filter((r, j) => j % 2 === 0 && r.usage.agentkv.cache_state === 'hot').length >= 2,
    `id-less requests should be restored from RAM: ${states}`);
  all.forEach((r, j) => {
    const i = j >> 1;
    if (r.text !== serial[i]) {
      diffs.push(`prompt ${i} ${j % 2 ? 'with id' : 'without id'} (${r.usage.agentkv.cache_state}): ` +
        `${JSON.stringify(r.text)} != serial ${JSON.stringify(serial[i])}`);
    }
  });
  assert.deepEqual(diffs, [], `${diffs.length} of ${all.length + PROMPTS.length} answers differ from their serial one`);
});

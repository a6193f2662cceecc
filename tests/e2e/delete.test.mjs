// 6. DELETE /v1/agents/{id} erases the agent from RAM and disk; a later
// request for it is cold; an id with `../` is rejected and touches nothing on
// disk. Also ?evict_only=true.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import {
  Server, makeTemp, rmTemp, chatReq, rawRequest, waitForDisk, waitForManifest, readManifests,
  agentsDirs, snapshotTree, sleep, LONG_SYSTEM, MAX_NEW_TURN_TOKENS,
} from './lib/server.mjs';

let dir, cacheDir, server, client;
before(async () => {
  dir = await makeTemp('delete');
  cacheDir = path.join(dir, 'cache');
  server = await Server.start({ cacheDir });
  client = server.client();
});
after(async () => {
  if (server) {
    const ex = await server.stop();
    assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${server.log}`);
  }
  await rmTemp(dir);
});

const messages = (topic) => [
  { role: 'system', content: `${topic} ${LONG_SYSTEM}` },
  { role: 'user', content: `Tell me about the ${topic}.` },
];

async function turn(id, msgs) {
  const r = await client.chat.completions.create(chatReq(msgs, { max_tokens: 8 }), { headers: { 'X-Agent-Id': id } });
  return r;
}

// Runs one turn and waits until its save has committed on disk.
async function savedTurn(id, msgs) {
  const r = await turn(id, msgs);
  const a = await waitForDisk(server, id);
  await waitForManifest(cacheDir, id, a.tokens);
  return r;
}

const manifestsOf = async (id) => (await readManifests(cacheDir)).filter((m) => m.text.includes(`"${id}"`));
const countAgentFiles = async () => {
  let n = 0;
  for (const d of await agentsDirs(cacheDir)) n += (await fsp.readdir(d)).length;
  return n;
};
const blockFiles = async () => (await snapshotTree(cacheDir))
  .filter((e) => e.type === 'file' && e.rel.split(path.sep).includes('blocks')).map((e) => path.basename(e.rel));

test('DELETE erases the agent from RAM and disk; the next request is cold', async () => {
  await savedTurn('del-victim', messages('mill'));
  await savedTurn('del-keeper', messages('church'));

  const victimManifests = await manifestsOf('del-victim');
  assert.equal(victimManifests.length, 1, 'expected one manifest naming del-victim');
  const keeper = (await manifestsOf('del-keeper'))[0].json.record;
  const victimBlocks = victimManifests[0].json.record.blocks.map((b) => b.id);
  const keeperBlocks = new Set(keeper.blocks.map((b) => b.id));
  const onlyVictim = victimBlocks.filter((b) => !keeperBlocks.has(b));
  assert.ok(onlyVictim.length > 0, 'the victim should own blocks of its own');
  const filesBefore = await countAgentFiles();
  const blocksBefore = await blockFiles();
  for (const b of onlyVictim) assert.ok(blocksBefore.some((f) => f.startsWith(b)), `block ${b} not on disk`);

  const del = await rawRequest(server, 'DELETE', '/v1/agents/del-victim');
  assert.equal(del.status, 200, del.text);
  assert.equal(del.json.id, 'del-victim');
  assert.equal(del.json.object, 'agent.deleted');
  assert.equal(del.json.deleted, true);

  // Gone from the admin API.
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/del-victim')).status, 404);
  const list = await rawRequest(server, 'GET', '/v1/agents');
  assert.ok(!list.json.data.some((a) => a.id === 'del-victim'));
  assert.ok(list.json.data.some((a) => a.id === 'del-keeper'));

  // Gone from disk: no manifest mentions it, the agents/ dirs shrank, and
  // the blocks only it used were removed; the other agent is untouched.
  assert.deepEqual(await manifestsOf('del-victim'), [], 'a manifest still names the deleted agent');
  assert.ok(!fs.existsSync(victimManifests[0].file), `${victimManifests[0].rel} still exists`);
  assert.equal(await countAgentFiles(), filesBefore - 1, 'agents/ did not shrink by one manifest');
  const blocksAfter = await blockFiles();
  for (const b of onlyVictim) {
    assert.ok(!blocksAfter.some((f) => f.startsWith(b)), `block ${b} of the deleted agent is still on disk`);
  }
  for (const b of keeperBlocks) assert.ok(blocksAfter.some((f) => f.startsWith(b)), `keeper's block ${b} was removed`);
  assert.equal((await manifestsOf('del-keeper')).length, 1);

  // Deleting again: 404.
  assert.equal((await rawRequest(server, 'DELETE', '/v1/agents/del-victim')).status, 404);

  // The next request for that id is cold and reuses nothing.
  const again = await turn('del-victim', messages('mill'));
  assert.equal(again.usage.agentkv.cache_state, 'cold', JSON.stringify(again.usage));
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, 0, JSON.stringify(again.usage));
  // The keeper still continues warm-from-RAM.
  const k = await turn('del-keeper', messages('church'));
  assert.notEqual(k.usage.agentkv.cache_state, 'cold');
  assert.ok(k.usage.prompt_tokens_details.cached_tokens > 0);
});

test('DELETE ?evict_only=true drops the agent from RAM only; next request is warm', async () => {
  const msgs = messages('bridge');
  const r1 = await savedTurn('del-evict', msgs);
  const del = await rawRequest(server, 'DELETE', '/v1/agents/del-evict?evict_only=true');
  assert.equal(del.status, 200, del.text);
  assert.equal(del.json.evicted, true, del.text);
  assert.equal(del.json.deleted, false, del.text);
  const info = await rawRequest(server, 'GET', '/v1/agents/del-evict');
  assert.equal(info.status, 200);
  assert.equal(info.json.tier, 'warm', info.text);
  assert.equal((await manifestsOf('del-evict')).length, 1, 'evict_only must keep the manifest');
  msgs.push({ role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'Is it old?' });
  const r2 = await turn('del-evict', msgs);
  assert.equal(r2.usage.agentkv.cache_state, 'warm', JSON.stringify(r2.usage));
  assert.equal(r2.usage.agentkv.match, 'extend', JSON.stringify(r2.usage));
  assert.ok(r2.usage.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, JSON.stringify(r2.usage));
});

test('ids with ../ are rejected and nothing on disk is created or deleted', async () => {
  // Settle: every save committed, nothing pending.
  await savedTurn('del-probe', messages('school'));
  for (let i = 0; i < 50; i++) {
    const m = await rawRequest(server, 'GET', '/metrics');
    if (/^agentkv_io_pending 0$/m.test(m.text)) break;
    await sleep(100);
  }
  // Bait: files an id escaping the namespace directory could reach.
  const nsDir = path.dirname((await agentsDirs(cacheDir))[0]);
  await fsp.writeFile(path.join(dir, 'x'), 'bait');
  await fsp.writeFile(path.join(nsDir, 'x'), 'bait');
  await fsp.writeFile(path.join(nsDir, 'x.json'), 'bait');
  const tree0 = await snapshotTree(dir);

  const ids = ['../x', '../../x', '../../../x', '..', 'a/b', '..\\x', './x', '/etc/passwd'];
  for (const id of ids) {
    const enc = encodeURIComponent(id);
    for (const p of [`/v1/agents/${enc}`, `/v1/agents/${enc}?evict_only=true`]) {
      const d = await rawRequest(server, 'DELETE', p);
      assert.equal(d.status, 400, `DELETE ${p}: ${d.status} ${d.text}`);
      assert.equal(d.json?.error?.code, 'invalid_agent_id', `DELETE ${p}: ${d.text}`);
      const g = await rawRequest(server, 'GET', p);
      assert.equal(g.status, 400, `GET ${p}: ${g.status} ${g.text}`);
    }
    const c = await rawRequest(server, 'POST', '/v1/chat/completions',
      { body: chatReq(messages('x'), { max_tokens: 2 }), headers: { 'X-Agent-Id': id } });
    assert.equal(c.status, 400, `chat with X-Agent-Id ${id}: ${c.text}`);
    const b = await rawRequest(server, 'POST', '/v1/chat/completions',
      { body: { ...chatReq(messages('x'), { max_tokens: 2 }), agent_id: id } });
    assert.equal(b.status, 400, `chat with agent_id ${id}: ${b.text}`);
  }
  // Raw, un-normalised dot segments in the path: a 4xx, never a deletion.
  for (const p of ['/v1/agents/../x', '/v1/agents/../../x', '/v1/agents/%2e%2e/x', '/v1/agents/..%2f..%2fx']) {
    const d = await rawRequest(server, 'DELETE', p);
    assert.ok(d.status === 400 || d.status === 404, `DELETE ${p}: ${d.status} ${d.text}`);
  }
  await sleep(300);
  const tree1 = await snapshotTree(dir);
  assert.deepEqual(tree1, tree0, 'the file system changed after requests with bad ids');
  // The probe agent is intact.
  assert.equal((await rawRequest(server, 'GET', '/v1/agents/del-probe')).status, 200);
});

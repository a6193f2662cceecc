// Remote tier (docs/remote.md): servers with separate cache dirs sharing one
// redis-server, all started here on loopback. An agent that moves to another
// server (or whose server was killed) comes back `remote`, reuses its cached
// tokens and answers exactly as a cold agent; a Redis outage costs only
// speed; damaged remote blocks are never imported; tenants share nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Server, makeTemp, rmTemp, chatReq, COLD, rawRequest, sleep, LONG_SYSTEM, AGENTKV_BIN, MAX_NEW_TURN_TOKENS } from './lib/server.mjs';
import { RedisServer, redisAvailable, metricValue, remoteManifests, waitForRemote } from './lib/redis.mjs';

const skip = redisAvailable() ? false : 'redis-server not installed';
let dir, redis;
const servers = [];
let nServers = 0;

before(async () => {
  if (skip) return;
  dir = await makeTemp('remote');
  redis = await RedisServer.start();
});
after(async () => {
  for (const s of servers) await s.kill('SIGKILL').catch(() => {});
  if (redis) await redis.stop();
  await rmTemp(dir);
});

async function start(extra = {}) {
  const s = await Server.start({ cacheDir: `${dir}/cache-${nServers++}`, ctx: 2048, extraArgs: ['--remote', redis.url],
    ...extra });
  servers.push(s);
  return s;
}

// `cold`: an oracle that reuses no cache (COLD).
async function turn(server, id, messages, { max_tokens = 12, apiKey, cold = false } = {}) {
  const r = await server.client({ apiKey }).chat.completions.create(chatReq(messages, { max_tokens, ...(cold ? COLD : {}) }),
    { headers: { 'X-Agent-Id': id } });
  return { reply: r.choices[0].message.content, usage: r.usage };
}

async function metrics(server, headers = {}) {
  const r = await rawRequest(server, 'GET', '/metrics', { headers });
  assert.equal(r.status, 200, r.text);
  return r.text;
}

function conversation(question) {
  // Twice the long prompt: 2+ blocks of 256 tokens.
  return [{ role: 'system', content: `${LONG_SYSTEM} ${LONG_SYSTEM}` }, { role: 'user', content: question }];
}

const cachedAfter = (t) => t.usage.prompt_tokens + t.usage.completion_tokens - 1;

// Two turns of `id` on `a`, waits until the second is in Redis; returns the
// conversation with a third question appended and the second turn.
async function twoTurns(a, id) {
  const msgs = conversation('Who kept the roses by the platform?');
  const t1 = await turn(a, id, msgs);
  msgs.push({ role: 'assistant', content: t1.reply }, { role: 'user', content: 'And who kept the mill?' });
  const t2 = await turn(a, id, msgs);
  msgs.push({ role: 'assistant', content: t2.reply }, { role: 'user', content: 'What floods in spring?' });
  await waitForRemote(redis, id, cachedAfter(t2));
  return { msgs, t2 };
}

// The next turn on `b`: `remote`, reuses the cached tokens, same text as cold.
async function expectRemoteTurn(b, id, msgs, t2) {
  const t3 = await turn(b, id, msgs);
  const u = t3.usage;
  assert.equal(u.agentkv.cache_state, 'remote', JSON.stringify(u));
  assert.ok(u.prompt_tokens_details.cached_tokens >= cachedAfter(t2), `previous turn not reused: ${JSON.stringify(u)}`);
  assert.ok(u.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, `prefilled ${u.agentkv.tokens_prefilled}`);
  const cold = await turn(b, `${id}-cold`, msgs, { cold: true });
  assert.equal(cold.usage.agentkv.cache_state, 'cold');
  assert.equal(t3.reply, cold.reply, 'remote reply differs from a cold prefill');
  return t3;
}

test('an agent moves from server A to B: next turn `remote`, same text as cold', { skip }, async () => {
  const a = await start();
  const b = await start();
  const { msgs, t2 } = await twoTurns(a, 'mover');
  const t3 = await expectRemoteTurn(b, 'mover', msgs, t2);
  // B wrote it through to its own disk and pushed its own turn.
  await waitForRemote(redis, 'mover', cachedAfter(t3));
  const m = await metrics(b);
  assert.equal(metricValue(m, 'agentkv_remote_hits_total'), 1, m);
  assert.ok(metricValue(m, 'agentkv_remote_read_bytes_total') > 0);
  assert.ok(metricValue(m, 'agentkv_remote_fetch_ms_count') >= 1);
  const info = await rawRequest(b, 'GET', '/v1/agents/mover');
  assert.ok(info.json.disk_bytes > 0, `not written through: ${info.text}`);
  // And back on A (which still has its older copy): never backwards.
  msgs.push({ role: 'assistant', content: t3.reply }, { role: 'user', content: 'Thank you.' });
  const t4 = await turn(a, 'mover', msgs);
  assert.notEqual(t4.usage.agentkv.cache_state, 'cold');
  const cold4 = await turn(a, 'mover-cold4', msgs, { cold: true });
  assert.equal(t4.reply, cold4.reply);
  await a.stop();
  await b.stop();
});

test('server A killed with kill -9: the agent continues on B from Redis', { skip }, async () => {
  const a = await start();
  const { msgs, t2 } = await twoTurns(a, 'orphan');
  const info = await a.kill('SIGKILL');
  assert.equal(info.signal, 'SIGKILL');
  const b = await start();
  await expectRemoteTurn(b, 'orphan', msgs, t2);
  await b.stop();
});

test('Redis stopped mid-run: requests succeed, errors counted, writes resume', { skip }, async () => {
  const a = await start();
  const msgs = conversation('Who rang the bell?');
  const t1 = await turn(a, 'outage', msgs);
  await waitForRemote(redis, 'outage', cachedAfter(t1));
  await redis.stop();
  msgs.push({ role: 'assistant', content: t1.reply }, { role: 'user', content: 'When?' });
  const t2 = await turn(a, 'outage', msgs);  // its push fails
  assert.notEqual(t2.usage.agentkv.cache_state, 'cold');
  const fresh = await turn(a, 'outage-new', conversation('Where is the school?'));  // its fetch fails
  // Never from the remote tier; it may start from 'outage''s cache of the
  // shared system text (a prefix donor, in RAM).
  assert.ok(['cold', 'hot', 'resident'].includes(fresh.usage.agentkv.cache_state), JSON.stringify(fresh.usage));
  let m;
  for (let i = 0; i < 100 && metricValue(m ?? '', 'agentkv_remote_errors_total') < 2; i++) {
    await sleep(100);
    m = await metrics(a);
  }
  assert.ok(metricValue(m, 'agentkv_remote_errors_total') >= 2, m);
  assert.equal(metricValue(m, 'agentkv_requests_total'), 3, m);  // all ok (one outcome label)

  await redis.restart();  // empty again
  await sleep(1200);      // past the fail-fast interval
  msgs.push({ role: 'assistant', content: t2.reply }, { role: 'user', content: 'Why?' });
  const t3 = await turn(a, 'outage', msgs);
  await waitForRemote(redis, 'outage', cachedAfter(t3));  // writes resumed
  await a.stop();
});

test('a corrupt or truncated block in Redis is detected and never imported', { skip }, async () => {
  const a = await start();
  const { msgs, t2 } = await twoTurns(a, 'damaged');
  await a.stop();
  const [man] = (await remoteManifests(redis)).filter((x) => x.record.agent_id === 'damaged');
  assert.ok(man.record.blocks.length >= 2, `need 2+ blocks, have ${man.record.blocks.length}`);
  const prefix = man.key.slice(0, man.key.indexOf(':m:'));
  // Block 1 flipped: block 0 is kept (the longest valid prefix).
  const key1 = `${prefix}:b:${man.record.blocks[1].id}`;
  const good = await redis.command('GET', key1);
  const bad = Buffer.from(good);
  bad[bad.length - 3] ^= 0x01;
  await redis.command('SET', key1, bad);
  // `agentkv cache ... --remote` sees it, read-only.
  const cache = (...args) => spawnSync(AGENTKV_BIN, ['cache', ...args, '--remote', redis.url], { encoding: 'utf8' });
  const ls = cache('ls');
  assert.equal(ls.status, 0, ls.stderr);
  assert.match(ls.stdout, /default\s+damaged\s/);
  const verify = cache('verify', 'damaged');
  assert.equal(verify.status, 1, verify.stdout + verify.stderr);
  assert.match(verify.stdout, /damaged\s+BAD\s+blocks \d+ ok \/ 0 missing \/ 1 corrupt, valid prefix 256 of/);
  assert.equal(cache('verify', 'damaged').status, 1, 'verify --remote must not repair');
  const show = cache('show', 'damaged');
  assert.equal(show.status, 0, show.stderr);
  assert.match(show.stdout, /agent damaged \(namespace default/);
  const b = await start();
  const t3 = await turn(b, 'damaged', msgs);
  assert.equal(t3.usage.agentkv.cache_state, 'remote');
  assert.equal(t3.usage.prompt_tokens_details.cached_tokens, 256, JSON.stringify(t3.usage));
  const cold = await turn(b, 'damaged-cold', msgs, { cold: true });
  assert.equal(t3.reply, cold.reply);
  let m = await metrics(b);
  assert.equal(metricValue(m, 'agentkv_remote_corrupt_blocks_total'), 1, m);
  await b.stop();
  // Block 0 truncated: nothing usable, the turn is cold, and still right.
  await redis.command('SET', `${prefix}:b:${man.record.blocks[0].id}`, good.subarray(0, 100));
  const c = await start();
  const t4 = await turn(c, 'damaged', msgs);
  assert.equal(t4.usage.agentkv.cache_state, 'cold', JSON.stringify(t4.usage));
  assert.equal(t4.reply, cold.reply);
  m = await metrics(c);
  assert.equal(metricValue(m, 'agentkv_remote_corrupt_blocks_total'), 1, m);
  assert.ok(t2.usage.prompt_tokens > 0);
  await c.stop();
});

test('tenants: the same agent id and prompt under two API keys share nothing in Redis', { skip }, async () => {
  const keys = ['--api-key', 'alice:key-a,bob:key-b', '--admin-key', 'adm'];
  const a = await start({ extraArgs: ['--remote', redis.url, ...keys] });
  const before = new Set(await redis.keys());
  const msgs = conversation('Who kept the mill?');
  const ta = await turn(a, 'same-id', msgs, { apiKey: 'key-a' });
  const tb = await turn(a, 'same-id', msgs, { apiKey: 'key-b' });
  await waitForRemote(redis, 'same-id', cachedAfter(ta));
  let mine;
  for (let i = 0; i < 100; i++) {
    mine = (await remoteManifests(redis)).filter((x) => x.record.agent_id === 'same-id');
    if (mine.length === 2) break;
    await sleep(100);
  }
  assert.equal(mine.length, 2);
  const scopes = mine.map((x) => x.key.slice(0, x.key.indexOf(':m:') + 1));
  assert.notEqual(scopes[0], scopes[1]);
  const added = (await redis.keys()).filter((k) => !before.has(k));
  for (const k of added) assert.ok(k.startsWith(scopes[0]) !== k.startsWith(scopes[1]), `key in both or neither: ${k}`);
  const blocksOf = (s) => added.filter((k) => k.startsWith(`${s}b:`)).map((k) => k.slice(s.length));
  assert.ok(blocksOf(scopes[0]).length > 0);
  assert.deepEqual(blocksOf(scopes[0]), blocksOf(scopes[1]));  // same content, separate copies
  assert.equal(ta.reply, tb.reply);
  // Bob on another server cannot continue Alice's agent from Redis: only his own.
  const b = await start({ extraArgs: ['--remote', redis.url, ...keys] });
  await redis.command('DEL', mine.find((x) => x.record.namespace === 'bob').key);
  const t = await turn(b, 'same-id', msgs, { apiKey: 'key-b' });
  assert.equal(t.usage.agentkv.cache_state, 'cold', 'bob must not see alice\'s cache');
  await a.stop();
  await b.stop();
});

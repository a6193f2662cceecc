// Routing with agent affinity (docs/remote.md): deploy/nginx/agentkv.conf in
// front of three agentkv servers sharing one redis-server, all on loopback.
// Agents stay on their server; stopping one moves only its agents, and their
// next turn comes back `remote`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { Server, makeTemp, rmTemp, chatReq, rawRequest, freePort, sleep, REPO_ROOT, LONG_SYSTEM, MAX_NEW_TURN_TOKENS } from './lib/server.mjs';
import { RedisServer, redisAvailable, waitForRemote } from './lib/redis.mjs';

const nginxBin = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => fs.existsSync(p));
const skip = !redisAvailable() ? 'redis-server not installed' : !nginxBin ? 'nginx not installed' : false;
let dir, redis, nginx, nginxPort;
const servers = [];

before(async () => {
  if (skip) return;
  dir = await makeTemp('routing');
  redis = await RedisServer.start();
  for (let i = 0; i < 3; i++) {
    servers.push(await Server.start({ cacheDir: `${dir}/cache-${i}`, ctx: 2048, extraArgs: ['--remote', redis.url] }));
  }
  // The repository's config, with this test's ports and paths.
  nginxPort = await freePort();
  let conf = fs.readFileSync(path.join(REPO_ROOT, 'deploy/nginx/agentkv.conf'), 'utf8');
  let n = 0;
  conf = conf.replace(/server 127\.0\.0\.1:808[1-3]/g, () => `server 127.0.0.1:${servers[n++].port}`);
  assert.equal(n, 3);
  conf = conf.replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${nginxPort};`)
    .replaceAll('/tmp/agentkv-nginx', `${dir}/nginx`);
  conf = `daemon off;\n${conf}`;
  fs.writeFileSync(`${dir}/nginx.conf`, conf);
  const check = spawnSync(nginxBin, ['-t', '-p', dir, '-c', `${dir}/nginx.conf`], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stderr);
  nginx = spawn(nginxBin, ['-p', dir, '-c', `${dir}/nginx.conf`], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    try {
      if ((await rawRequest({ port: nginxPort }, 'GET', '/health', { timeoutMs: 1000 })).status === 200) break;
    } catch { /* starting */ }
    await sleep(100);
  }
});
after(async () => {
  if (nginx) nginx.kill('SIGKILL');
  for (const s of servers) await s.kill('SIGKILL').catch(() => {});
  if (redis) await redis.stop();
  await rmTemp(dir);
});

const client = () => new OpenAI({ baseURL: `http://127.0.0.1:${nginxPort}/v1`, apiKey: 'unused', maxRetries: 0,
  timeout: 180_000 });

async function turn(id, messages) {
  const r = await client().chat.completions.create(chatReq(messages, { max_tokens: 8 }),
    { headers: { 'X-Agent-Id': id } });
  return { reply: r.choices[0].message.content, usage: r.usage };
}

// Which live server holds agent `id` (GET /v1/agents/{id} answers 200 there only).
async function home(id) {
  const found = [];
  for (const s of servers) {
    if (s.exitInfo) continue;
    if ((await rawRequest(s, 'GET', `/v1/agents/${id}`)).status === 200) found.push(s);
  }
  return found;
}

test('agents stay on their server; stopping one moves only its agents, which come back remote', { skip }, async () => {
  const ids = Array.from({ length: 9 }, (_, i) => `route-${i}`);
  const convo = {};
  for (const id of ids) {
    convo[id] = [{ role: 'system', content: LONG_SYSTEM }, { role: 'user', content: `Question ${id}: who kept the mill?` }];
    const t = await turn(id, convo[id]);
    // A first turn: cold, or started from another agent's cache of the
    // shared system text on the same server (a prefix donor), never its own.
    assert.equal(t.usage.prompt_tokens_details.cached_tokens, t.usage.agentkv.shared_tokens, JSON.stringify(t.usage));
    assert.notEqual(t.usage.agentkv.cache_state, 'remote', JSON.stringify(t.usage));
    convo[id].push({ role: 'assistant', content: t.reply }, { role: 'user', content: 'And the school?' });
    await waitForRemote(redis, id, t.usage.prompt_tokens + t.usage.completion_tokens - 1);
  }
  const homeOf = {};
  for (const id of ids) {
    const h = await home(id);
    assert.equal(h.length, 1, `${id} on ${h.length} servers`);
    homeOf[id] = h[0];
  }
  const used = new Set(Object.values(homeOf));
  assert.ok(used.size >= 2, 'the hash should spread 9 agents over 2+ servers');

  // Second turns: same server, straight from its slot or RAM.
  for (const id of ids) {
    const t = await turn(id, convo[id]);
    assert.ok(['resident', 'hot'].includes(t.usage.agentkv.cache_state), `${id}: ${JSON.stringify(t.usage)}`);
    convo[id].push({ role: 'assistant', content: t.reply }, { role: 'user', content: 'Thank you.' });
    await waitForRemote(redis, id, t.usage.prompt_tokens + t.usage.completion_tokens - 1);
  }
  assert.deepEqual((await Promise.all(ids.map(home))).map((h) => h[0]), ids.map((id) => homeOf[id]));

  // Stop the server with the most agents.
  const victim = [...used].sort((a, b) => ids.filter((i) => homeOf[i] === b).length
    - ids.filter((i) => homeOf[i] === a).length)[0];
  await victim.stop();
  for (const id of ids) {
    const t = await turn(id, convo[id]);
    if (homeOf[id] === victim) {
      assert.equal(t.usage.agentkv.cache_state, 'remote', `${id} moved: ${JSON.stringify(t.usage)}`);
      assert.ok(t.usage.agentkv.tokens_prefilled < MAX_NEW_TURN_TOKENS, JSON.stringify(t.usage));
      const h = await home(id);
      assert.equal(h.length, 1);
      assert.notEqual(h[0], victim);
    } else {
      assert.ok(['resident', 'hot'].includes(t.usage.agentkv.cache_state), `${id} should not move: ${JSON.stringify(t.usage)}`);
      assert.equal((await home(id))[0], homeOf[id]);
    }
  }
});

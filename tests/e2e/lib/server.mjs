// Helpers for the end-to-end tests: start a real `agentkv serve` on a free
// loopback port with the bundled model, talk to it with the official openai
// SDK (and raw HTTP where the SDK would get in the way), and inspect its
// cache directory.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { before, after } from 'node:test';
import assert from 'node:assert/strict';

const here = path.dirname(fileURLToPath(import.meta.url));
export const E2E_DIR = path.resolve(here, '..');
export const REPO_ROOT = path.resolve(E2E_DIR, '..', '..');

export const AGENTKV_BIN = path.resolve(
  E2E_DIR, process.env.AGENTKV_BIN || '../../build/agentkv');
export const MODEL = path.resolve(
  E2E_DIR,
  process.env.AGENTKV_TEST_MODEL || '../../models/tiny-llama-brown-16m-q8_0.gguf');
export const MODEL_ID = path.basename(MODEL).replace(/\.gguf$/, '');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export { sleep };

/** A port that was free a moment ago (listen on 0, close). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A fresh temporary directory (removed by `rmTemp`). */
export async function makeTemp(tag) {
  return fsp.mkdtemp(path.join(os.tmpdir(), `agentkv-e2e-${tag}-`));
}

export async function rmTemp(dir) {
  if (dir && !process.env.AGENTKV_E2E_KEEP) {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/**
 * A running `agentkv serve`. Use `Server.start({cacheDir, ...})`; the port is
 * picked here (retrying on bind failure) and `/health` is polled until 200.
 */
export class Server {
  constructor(opts) {
    this.opts = opts;
    this.proc = null;
    this.port = 0;
    this.log = '';
    this.exited = null; // Promise<{code, signal}>
    this.exitInfo = null;
  }

  static async start(opts) {
    const s = new Server(opts);
    await s.#startWithRetries();
    return s;
  }

  get baseURL() { return `http://127.0.0.1:${this.port}`; }

  args() {
    const o = this.opts;
    const a = ['serve', '-m', MODEL, '--host', '127.0.0.1', '--port', String(this.port),
      '--cache-dir', o.cacheDir,
      '--slots', String(o.slots ?? 2),
      '-c', String(o.ctx ?? 1024),
      '-t', String(o.threads ?? 2),
      // The server's default slot type unless slotKv is given: most files compare a warm/extended
      // agent's text with a cold one's exactly, which the default configuration guarantees
      // (docs/engine.md, "Exactness").
      ...(o.slotKv ? ['--slot-kv', o.slotKv] : [])];
    if (o.apiKey) a.push('--api-key', o.apiKey);
    if (o.adminKey) a.push('--admin-key', o.adminKey);
    if (o.cacheRam) a.push('--cache-ram', String(o.cacheRam));
    if (o.extraArgs) a.push(...o.extraArgs);
    return a;
  }

  async #startWithRetries() {
    if (!fs.existsSync(AGENTKV_BIN)) {
      throw new Error(`agentkv binary not found at ${AGENTKV_BIN} (set AGENTKV_BIN)`);
    }
    let lastErr;
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = await freePort();
      try {
        await this.#spawnAndWait();
        return;
      } catch (e) {
        lastErr = e;
        await this.kill('SIGKILL').catch(() => {});
        // Only a bind failure is worth retrying on another port.
        if (!/bind|address already in use|EADDRINUSE|listen/i.test(this.log)) break;
      }
    }
    throw new Error(`agentkv serve did not become healthy: ${lastErr?.message}\n--- log ---\n${this.log}`);
  }

  async #spawnAndWait() {
    this.log = '';
    this.exitInfo = null;
    // Clear AGENTKV_* from the environment so only our flags count.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('AGENTKV_')));
    const proc = spawn(AGENTKV_BIN, this.args(), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const onData = (d) => {
      this.log += d.toString();
      if (this.log.length > 1 << 20) this.log = this.log.slice(-(1 << 19));
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      if (this.exitInfo) {
        throw new Error(`server exited early (${JSON.stringify(this.exitInfo)})`);
      }
      try {
        const r = await rawRequest(this, 'GET', '/health', { timeoutMs: 2000 });
        if (r.status === 200) return;
        if (r.status !== 503) throw new Error(`/health answered ${r.status}`);
      } catch (e) {
        if (/answered/.test(e.message)) throw e;
      }
      await sleep(100);
    }
    throw new Error('timed out waiting for /health');
  }

  /** Send `signal` and wait for the process to exit; returns {code, signal}. */
  async kill(signal = 'SIGTERM', timeoutMs = 60_000) {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.proc.kill(signal);
    const t = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(t);
    }
  }

  /** Graceful stop (SIGTERM). */
  async stop() { return this.kill('SIGTERM'); }

  /** An openai SDK client for this server (no retries, generous timeout). */
  client({ apiKey, headers } = {}) {
    return new OpenAI({
      baseURL: `${this.baseURL}/v1`,
      apiKey: apiKey ?? this.opts.apiKey ?? 'unused',
      maxRetries: 0,
      timeout: 180_000,
      defaultHeaders: headers,
    });
  }
}

/**
 * Raw HTTP (node:http, so the path is sent exactly as given: no `../`
 * normalisation). Returns {status, headers, text, json}.
 */
export function rawRequest(server, method, pathname, { body, headers = {}, timeoutMs = 180_000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined
      : (typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
    const h = { ...headers };
    if (data !== undefined) {
      h['content-type'] ??= 'application/json';
      h['content-length'] = Buffer.byteLength(data);
    }
    const req = http.request({
      host: '127.0.0.1', port: server.port, method, path: pathname, headers: h,
      agent: false,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${pathname} timed out`)));
    req.on('error', reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

/** Poll GET /v1/agents/{id} until it reports bytes on disk. */
export async function waitForDisk(server, id, { headers = {}, timeoutMs = 30_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await rawRequest(server, 'GET', `/v1/agents/${encodeURIComponent(id)}`, { headers });
    if (last.status === 200 && last.json?.disk_bytes > 0 && !last.json.busy) return last.json;
    await sleep(100);
  }
  throw new Error(`agent ${id} never reached disk: ${last?.status} ${last?.text}`);
}

/**
 * Walk a directory tree; returns a sorted array of
 * {rel, type, size, mtimeMs} for every entry (lstat: links not followed).
 */
export async function snapshotTree(root) {
  const out = [];
  async function walk(dir) {
    let ents;
    try { ents = await fsp.readdir(dir, { withFileTypes: true }); } catch { return; }
    for (const e of ents) {
      const p = path.join(dir, e.name);
      let st;
      try {
        st = await fsp.lstat(p);
      } catch (err) {
        if (err.code === 'ENOENT') continue;  // gone since readdir (a temp file renamed by a running server)
        throw err;
      }
      out.push({
        rel: path.relative(root, p),
        type: st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other',
        size: st.isDirectory() ? 0 : st.size,
        mtimeMs: st.mtimeMs,
      });
      if (st.isDirectory()) await walk(p);
    }
  }
  await walk(root);
  out.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return out;
}

/** Every manifest (`.../agents/*.json`) under a cache dir, parsed. */
export async function readManifests(cacheDir) {
  const tree = await snapshotTree(cacheDir);
  const out = [];
  for (const e of tree) {
    if (e.type !== 'file') continue;
    const parts = e.rel.split(path.sep);
    if (parts.length < 2 || parts[parts.length - 2] !== 'agents' || !e.rel.endsWith('.json')) continue;
    const file = path.join(cacheDir, e.rel);
    const text = await fsp.readFile(file, 'utf8');
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    out.push({ file, rel: e.rel, text, json });
  }
  return out;
}

/** The `agents/` directories under a cache dir (`<fp>/<ns-hash>/agents`). */
export async function agentsDirs(cacheDir) {
  const tree = await snapshotTree(cacheDir);
  return tree.filter((e) => e.type === 'dir' && path.basename(e.rel) === 'agents')
    .map((e) => path.join(cacheDir, e.rel));
}

/** Collect a streamed chat/completions response. */
export async function collectStream(stream, kind = 'chat') {
  const chunks = [];
  let text = '';
  for await (const ch of stream) {
    chunks.push(ch);
    const c = ch.choices?.[0];
    if (!c) continue;
    if (kind === 'chat') text += c.delta?.content ?? '';
    else text += c.text ?? '';
  }
  const finish = chunks.map((c) => c.choices?.[0]?.finish_reason).filter(Boolean);
  const usageChunks = chunks.filter((c) => c.usage);
  return { chunks, text, finish_reason: finish.at(-1) ?? null, finishes: finish,
    usage: usageChunks.at(-1)?.usage ?? null };
}

/** Build a conversation: a system prompt, then the user messages so far. */
// Body fields of a cold oracle: `cache_prompt: false` (as llama-server's)
// prefills the prompt reusing no cache. Without it a fresh agent id would
// start from another agent's cache of the same prefix (a prefix donor,
// docs/api.md "Shared prefixes").
export const COLD = Object.freeze({ cache_prompt: false });

export function chatReq(messages, extra = {}) {
  return { model: MODEL_ID, messages, max_tokens: 16, temperature: 0, ...extra };
}

// Some English prose (public-domain style, written for these tests) to make
// prompts of a few hundred tokens without depending on files.
export const LONG_SYSTEM = [
  'You are the archivist of a small river town. You keep the records of the',
  'mill, the church, the school and the market, and you answer questions about',
  'the people who lived there and the things they built. The town stands where',
  'the river bends to the south, below a line of low hills covered with oak and',
  'beech. In the spring the water rises and the meadows by the mill are flooded;',
  'in the summer the farmers bring their wheat to be ground, and the market is',
  'full of carts from the villages up the valley. The school was built of red',
  'brick in the year the railway came, and the station master kept a garden of',
  'roses beside the platform. When you answer, be brief and plain, speak of what',
  'the records say, and do not invent names that are not in the records. If a',
  'question cannot be answered from the records, say so and suggest where a',
  'careful reader might look next: the parish books, the mill ledgers, the old',
  'newspapers kept in the library, or the letters in the chest at the town hall.',
].join(' ');

/** The manifest of agent `id` (any namespace) under a cache dir, or undefined. */
export async function findManifest(cacheDir, id) {
  return (await readManifests(cacheDir)).find((m) => m.json?.record?.agent_id === id);
}

/**
 * Poll the cache dir until agent `id`'s manifest holds `nTokens` tokens (the
 * write-behind save of the last turn has committed).
 */
export async function waitForManifest(cacheDir, id, nTokens, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let m;
  while (Date.now() < deadline) {
    m = await findManifest(cacheDir, id);
    if (m && m.json.record.tokens?.length === nTokens) return m;
    await sleep(100);
  }
  throw new Error(`manifest of ${id} never reached ${nTokens} tokens (has ${m?.json?.record?.tokens?.length})`);
}

/**
 * Upper bound on the tokens a turn that only appends a short user message
 * prefills (vs ~300 for the whole prompt). The bundled model has no chat
 * template, so prompts use common's ChatML fallback, whose markup
 * ("<|im_end|>\n<|im_start|>user\n" ... "<|im_start|>assistant\n") is plain
 * text in its SentencePiece vocabulary: ~30 tokens of markup per turn, plus
 * the message.
 */
export const MAX_NEW_TURN_TOKENS = 64;

// One server for a test file: started in a fresh temp dir before the file's
// tests (`options` as Server.start's), stopped after them, where its exit
// status must be 0, and its dir removed. Returns {dir, server, client},
// filled in once it has started.
export function serverForFile(tag, options = {}) {
  const s = {};
  before(async () => {
    s.dir = await makeTemp(tag);
    s.server = await Server.start({ cacheDir: `${s.dir}/cache`, ...options });
    s.client = s.server.client();
  });
  after(async () => {
    if (s.server) {
      const ex = await s.server.stop();
      assert.equal(ex.code, 0, `server exit ${JSON.stringify(ex)}\n${s.server.log}`);
    }
    await rmTemp(s.dir);
  });
  return s;
}

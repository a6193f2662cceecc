// A redis-server for the e2e tests (started on a free loopback port, nothing
// persisted) and a minimal RESP client, binary-safe, so tests can read and
// damage what agentkv stored.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { freePort, sleep } from './server.mjs';

export function redisAvailable() {
  return spawnSync('redis-server', ['--version']).status === 0;
}

export class RedisServer {
  static async start() {
    const r = new RedisServer();
    r.port = await freePort();
    await r.restart();
    return r;
  }

  get url() { return `redis://127.0.0.1:${this.port}`; }

  /** (Re)starts on the same port, empty; resolves once it answers PING. */
  async restart() {
    this.proc = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '',
      '--appendonly', 'no', '--dir', '/tmp', '--loglevel', 'warning'], { stdio: 'ignore' });
    this.exited = new Promise((resolve) => this.proc.on('exit', resolve));
    for (let i = 0; i < 200; i++) {
      try {
        if ((await this.command('PING')) === 'PONG') return;
      } catch { /* not up yet */ }
      await sleep(25);
    }
    throw new Error('redis-server did not start');
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** One command; resolves with the reply (strings as Buffers for bulk replies). */
  command(...args) {
    return new Promise((resolve, reject) => {
      const sock = net.connect(this.port, '127.0.0.1');
      const parts = [Buffer.from(`*${args.length}\r\n`)];
      for (const a of args) {
        const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
        parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
      }
      let buf = Buffer.alloc(0);
      sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        const parsed = parse(buf, 0);
        if (parsed) {
          sock.destroy();
          if (parsed.value instanceof Error) reject(parsed.value); else resolve(parsed.value);
        }
      });
      sock.on('error', reject);
      sock.write(Buffer.concat(parts));
    });
  }

  /** Every key, as strings. */
  async keys() { return (await this.command('KEYS', '*')).map(String).sort(); }
}

// One RESP value at `pos`: {value, end} or null if incomplete.
function parse(buf, pos) {
  const nl = buf.indexOf('\r\n', pos);
  if (nl < 0) return null;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, nl);
  switch (type) {
    case '+': return { value: line, end: nl + 2 };
    case '-': return { value: new Error(line), end: nl + 2 };
    case ':': return { value: Number(line), end: nl + 2 };
    case '$': {
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      if (buf.length < nl + 2 + n + 2) return null;
      return { value: buf.subarray(nl + 2, nl + 2 + n), end: nl + 2 + n + 2 };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: nl + 2 };
      const out = [];
      let p = nl + 2;
      for (let i = 0; i < n; i++) {
        const v = parse(buf, p);
        if (!v) return null;
        out.push(v.value);
        p = v.end;
      }
      return { value: out, end: p };
    }
    default: return { value: new Error(`bad RESP type ${type}`), end: buf.length };
  }
}

/** The value of one Prometheus sample in `text` (0 if absent). */
export function metricValue(text, name) {
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

/** Every agentkv manifest in Redis: {key, version, record}. */
export async function remoteManifests(redis) {
  const out = [];
  for (const key of await redis.keys()) {
    if (!/^agentkv:v1:[^:]+:[0-9a-f]{32}:m:/.test(key)) continue;
    const [v, m] = await redis.command('HMGET', key, 'v', 'm');
    if (!v || !m) continue;
    out.push({ key, version: String(v), record: JSON.parse(m.toString('utf8')).record });
  }
  return out;
}

/** Polls Redis until agent `id`'s manifest there holds `nTokens` tokens. */
export async function waitForRemote(redis, id, nTokens, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let found;
  while (Date.now() < deadline) {
    found = (await remoteManifests(redis)).find((m) => m.record.agent_id === id);
    if (found && found.record.tokens.length === nTokens) return found;
    await sleep(100);
  }
  throw new Error(`remote manifest of ${id} never reached ${nTokens} tokens (has ${found?.record?.tokens?.length})`);
}

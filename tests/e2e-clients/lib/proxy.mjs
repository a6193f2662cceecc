// A recording HTTP proxy on loopback: every request a client sends goes
// through it to agentkv unchanged, and it keeps each exchange (method, path,
// the headers that matter with secrets redacted, the request body, the
// status and the response body, SSE frames included) for the checks and
// the fixtures. One proxy per client run; not for concurrent test files.
import http from 'node:http';

// Headers whose values are credentials: recorded as "<redacted>".
const SECRET_HEADERS = new Set(['authorization', 'x-api-key', 'proxy-authorization', 'cookie']);
// Headers that only describe the transport: left out of the record.
const TRANSPORT_HEADERS = new Set(['host', 'content-length', 'connection', 'transfer-encoding',
  'accept-encoding', 'keep-alive']);

/** The headers of a request as recorded: transport ones dropped, secrets redacted, names sorted. */
export function recordedHeaders(raw) {
  const out = {};
  for (const name of Object.keys(raw).sort()) {
    if (TRANSPORT_HEADERS.has(name)) continue;
    out[name] = SECRET_HEADERS.has(name) ? '<redacted>' : raw[name];
  }
  return out;
}

/** Parses an SSE body into [{event, data}] (data JSON-parsed where it is JSON). */
export function parseSse(text) {
  const events = [];
  for (const frame of text.split(/\r?\n\r?\n/)) {
    let event = null;
    const data = [];
    for (const line of frame.split(/\r?\n/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (event === null && data.length === 0) continue;
    const joined = data.join('\n');
    let json;
    try { json = JSON.parse(joined); } catch { json = undefined; }
    events.push({ event, data: json ?? joined });
  }
  return events;
}

function parseJson(text) {
  try { return JSON.parse(text); } catch { return undefined; }
}

/**
 * The 16M test model never ends a reply by itself, so every reply stops at the
 * client's output cap, and Claude Code and Codex then end with an error
 * ("exceeded the N output token maximum", "Incomplete response returned").
 * With `endCapped`, the proxy reports such a reply as a natural end instead:
 * Anthropic stop_reason "max_tokens" -> "end_turn", a Responses
 * "incomplete" response or item -> "completed". Only the end marker changes;
 * the text, the tool calls and usage are agentkv's. Returns the rewritten
 * object, or null when there is nothing to change.
 */
export function endCappedReply(data) {
  if (!data || typeof data !== 'object') return null;
  let changed = false;
  const fix = (o) => {
    if (!o || typeof o !== 'object') return;
    if (o.stop_reason === 'max_tokens') { o.stop_reason = 'end_turn'; changed = true; }
    if (o.status === 'incomplete') { o.status = 'completed'; changed = true; }
    if (o.incomplete_details) { o.incomplete_details = null; changed = true; }
    if (o.type === 'response.incomplete') { o.type = 'response.completed'; changed = true; }
    for (const k of ['delta', 'response', 'item', 'message']) fix(o[k]);
    if (Array.isArray(o.output)) o.output.forEach(fix);
  };
  fix(data);
  return changed ? data : null;
}

/** One SSE frame, rewritten by endCappedReply where it applies; returns the frame text. */
function rewriteFrame(frame, ex) {
  const [parsed] = parseSse(frame);
  if (!parsed || typeof parsed.data !== 'object') return frame;
  const fixed = endCappedReply(parsed.data);
  if (!fixed) return frame;
  ex.ended_capped = true;
  const event = parsed.event === 'response.incomplete' ? 'response.completed' : parsed.event;
  return `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(fixed)}`;
}

export class RecordingProxy {
  /** target: {host, port} of the agentkv server. */
  constructor(target, { endCapped = false, maxOutputTokens = 0 } = {}) {
    this.target = target;
    this.endCapped = endCapped;
    this.maxOutputTokens = maxOutputTokens;
    this.exchanges = [];
    this.server = null;
    this.port = 0;
  }

  /**
   * target: {host, port}; options: endCapped (see endCappedReply);
   * maxOutputTokens: added as max_output_tokens to a Responses request that
   * sets none (Codex has no setting for it; the record keeps the body as sent).
   */
  static async start(target, options = {}) {
    const p = new RecordingProxy(target, options);
    p.server = http.createServer((req, res) => p.#handle(req, res));
    await new Promise((resolve, reject) => {
      p.server.once('error', reject);
      p.server.listen(0, '127.0.0.1', resolve);
    });
    p.port = p.server.address().port;
    return p;
  }

  get baseURL() { return `http://127.0.0.1:${this.port}`; }

  /** Resolves once every exchange begun so far is recorded (its `ms` set), or after timeoutMs. */
  async settled(timeoutMs = 10_000) {
    const until = Date.now() + timeoutMs;
    while (this.exchanges.some((ex) => ex.ms === null) && Date.now() < until) {
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  async stop() {
    if (!this.server) return;
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
    this.server = null;
  }

  #handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      const ex = {
        seq: this.exchanges.length,
        method: req.method,
        path: req.url,
        headers: recordedHeaders(req.headers),
        body: parseJson(body.toString('utf8')) ?? (body.length ? body.toString('utf8') : null),
        status: null,
        response_headers: {},
        response: null,
        started_ms: Date.now(),
        ms: null,
      };
      this.exchanges.push(ex);
      if (this.maxOutputTokens && req.url.startsWith('/v1/responses') && ex.body?.max_output_tokens == null
          && typeof ex.body === 'object') {
        body = Buffer.from(JSON.stringify({ ...ex.body, max_output_tokens: this.maxOutputTokens }));
        ex.capped_by_proxy = this.maxOutputTokens;
      }
      const headers = { ...req.headers, host: `${this.target.host}:${this.target.port}` };
      if (ex.capped_by_proxy) headers['content-length'] = String(body.length);
      delete headers['accept-encoding'];  // keep responses readable (agentkv does not compress anyway)
      const up = http.request({ host: this.target.host, port: this.target.port, method: req.method,
        path: req.url, headers, agent: false }, (ures) => {
        ex.status = ures.statusCode;
        ex.response_headers = recordedHeaders(ures.headers);
        const sse = /text\/event-stream/.test(ures.headers['content-type'] ?? '');
        const rewrite = this.endCapped && ures.statusCode === 200;
        const down = { ...ures.headers };
        if (rewrite) delete down['content-length'];  // a rewritten body has another length
        res.writeHead(ures.statusCode, down);
        const out = [];
        let pending = '';  // SSE text after the last complete frame
        ures.setEncoding('utf8');
        ures.on('data', (c) => {
          out.push(c);
          if (!rewrite) { res.write(c); return; }
          if (!sse) return;  // JSON: rewritten whole at the end
          pending += c;
          let at;
          while ((at = pending.indexOf('\n\n')) >= 0) {
            res.write(`${rewriteFrame(pending.slice(0, at), ex)}\n\n`);
            pending = pending.slice(at + 2);
          }
        });
        // The record is what arrived, whether the response ended or was cut
        // off: a client may exit on the stream's last event before the
        // chunked terminator reaches the proxy (its close then cancels
        // upstream, and `end` never comes).
        const record = () => {
          if (ex.ms !== null) return;
          const text = out.join('');
          ex.response = sse ? { sse: parseSse(text) } : (parseJson(text) ?? text);
          ex.ms = Date.now() - ex.started_ms;
        };
        ures.on('end', () => {
          const text = out.join('');
          if (rewrite && sse && pending) res.write(rewriteFrame(pending, ex));
          if (rewrite && !sse) {
            const fixed = endCappedReply(parseJson(text));
            if (fixed) ex.ended_capped = true;
            res.write(fixed ? JSON.stringify(fixed) : text);
          }
          res.end();
          record();
        });
        ures.on('close', record);
        ures.on('error', () => res.destroy());
      });
      up.on('error', (e) => {
        if (ex.ms !== null) return;  // cancelled after its response was recorded
        ex.status = 502;
        ex.response = `proxy: ${e.message}`;
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(ex.response);
      });
      // A client that goes away cancels the upstream request too (agentkv then stops generating).
      res.on('close', () => { if (!res.writableFinished) up.destroy(); });
      up.end(body);
    });
  }
}

// Reading a recorded exchange (lib/proxy.mjs): which API it used, whether it
// was the main conversation or a side request, and its prompt reuse from
// agentkv's own usage fields (each API's prompt/cached counters plus the
// agentkv extension: agent_id, match, tokens_prefilled).

const GENERATION_ROUTES = [
  ['/v1/messages', 'anthropic'],
  ['/v1/responses', 'responses'],
  ['/v1/chat/completions', 'chat'],
];

/** 'anthropic' | 'responses' | 'chat' | null (not a generation request). */
export function apiOf(ex) {
  if (ex.method !== 'POST') return null;
  const p = ex.path.split('?')[0];
  return GENERATION_ROUTES.find(([route]) => p === route)?.[1] ?? null;
}

/**
 * A main-conversation request carries the client's tools; title generation,
 * quota probes (max_tokens 1) and summaries do not.
 */
export function isMain(ex) {
  const b = ex.body;
  return apiOf(ex) !== null && Array.isArray(b?.tools) && b.tools.length > 0
    && b.max_tokens !== 1 && b.max_output_tokens !== 1;
}

/**
 * {prompt, cached, agent, match, prefilled, shared} of a generation exchange, from its
 * response (the last usage seen in a stream), or null when it has none (an
 * error).
 */
export function usageOf(ex) {
  const api = apiOf(ex);
  let u = null;
  const r = ex.response;
  if (r?.sse) {
    for (const { data } of r.sse) {
      if (typeof data !== 'object' || data === null) continue;
      const cand = data.usage ?? data.message?.usage ?? data.response?.usage;
      if (cand?.agentkv) u = { ...u, ...cand };
      else if (cand && u) u = { ...u, ...cand };
    }
  } else if (r && typeof r === 'object') {
    u = r.usage ?? null;
  }
  if (!u?.agentkv) return null;
  let prompt;
  let cached;
  if (api === 'anthropic') {
    cached = u.cache_read_input_tokens ?? 0;
    prompt = (u.input_tokens ?? 0) + cached + (u.cache_creation_input_tokens ?? 0);
  } else if (api === 'responses') {
    prompt = u.input_tokens;
    cached = u.input_tokens_details?.cached_tokens ?? 0;
  } else {
    prompt = u.prompt_tokens;
    cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  }
  return { prompt, cached, agent: u.agentkv.agent_id, match: u.agentkv.match,
    prefilled: u.agentkv.tokens_prefilled, shared: u.agentkv.shared_tokens ?? 0 };
}

/** The reply's text as agentkv streamed or returned it (text deltas joined). */
export function replyTextOf(ex) {
  const r = ex.response;
  if (!r) return '';
  if (!r.sse) {
    if (Array.isArray(r.content)) return r.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    if (r.choices) return r.choices[0]?.message?.content ?? '';
    if (r.output_text !== undefined) return r.output_text;
    return '';
  }
  let text = '';
  for (const { data } of r.sse) {
    if (typeof data !== 'object' || data === null) continue;
    if (data.type === 'content_block_delta' && data.delta?.type === 'text_delta') text += data.delta.text;
    else if (data.type === 'response.output_text.delta') text += data.delta;
    else if (data.choices?.[0]?.delta?.content) text += data.choices[0].delta.content;
  }
  return text;
}

/** One line per exchange for a failure message: the request-level evidence; turn is a number or a label. */
export function describe(ex, turn) {
  const u = usageOf(ex);
  const b = ex.body ?? {};
  const n = (b.messages ?? b.input ?? []).length;
  let err = ex.status !== 200 ? ` ${JSON.stringify(ex.response).slice(0, 300)}` : '';
  // A 200 without usage: how its stream ended (the last events' types, or the tail of its body).
  if (!err && apiOf(ex) && !u) {
    const sse = ex.response?.sse;
    err = sse ? ` no usage; ${sse.length} events, last: ${sse.slice(-4).map(({ data }) => data?.type ?? JSON.stringify(data)?.slice(0, 80)).join(', ')}`
      : ` no usage; body: ${JSON.stringify(ex.response)?.slice(-300)}`;
  }
  return `${typeof turn === 'number' ? `turn ${turn}` : turn} #${ex.seq} ${ex.method} ${ex.path} ${ex.status}${isMain(ex) ? ' main' : apiOf(ex) ? ' side' : ''}`
    + ` items=${n} tools=${(b.tools ?? []).length}`
    + (u ? ` prompt=${u.prompt} cached=${u.cached} (${pct(u)}) match=${u.match} shared=${u.shared} agent=${u.agent}` : '') + err;
}

export function pct(u) {
  return u.prompt > 0 ? `${((100 * u.cached) / u.prompt).toFixed(1)}%` : 'n/a';
}

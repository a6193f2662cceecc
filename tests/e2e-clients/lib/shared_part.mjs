// The part of a main-conversation request that two sessions of one client
// in one project share: its system text and tools, i.e. everything the
// request renders before its first user message. Its size in tokens is
// measured by agentkv's own tokenizer: the probe request built here is the
// recorded request with everything from the first user message on replaced
// by a one-word user message; its prompt_tokens is that shared part plus the
// few tokens of the word and the chat template's turn markers (so a bound a
// little above the shared part: checks against it are slightly stricter than
// the definition).
import { apiOf } from './usage.mjs';

const PROBE_WORD = 'x';

/** Items before the first one with role "user" (a message of any API). */
function beforeFirstUser(items) {
  const i = items.findIndex((m) => m?.role === 'user');
  return i < 0 ? items : items.slice(0, i);
}

/**
 * {path, body} of the probe for the recorded main request `ex` (not
 * streamed, 2 output tokens), or null when `ex` is not a generation request.
 */
export function sharedPartProbe(ex) {
  const api = apiOf(ex);
  if (!api) return null;
  const b = { ...ex.body };
  delete b.stream;
  delete b.stream_options;
  if (api === 'anthropic') {
    b.messages = [{ role: 'user', content: PROBE_WORD }];
    b.max_tokens = 2;
  } else if (api === 'responses') {
    b.input = [...beforeFirstUser(b.input ?? []), { type: 'message', role: 'user', content: PROBE_WORD }];
    b.max_output_tokens = 16;  // the Responses API's minimum
  } else {
    b.messages = [...beforeFirstUser(b.messages ?? []), { role: 'user', content: PROBE_WORD }];
    b.max_tokens = 2;
  }
  return { path: ex.path, body: b };
}

/** The probe's prompt tokens from its (non-streamed) response JSON, or null. */
export function probePromptTokens(api, json) {
  const u = json?.usage;
  if (!u) return null;
  if (api === 'anthropic') return (u.input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
  if (api === 'responses') return u.input_tokens ?? null;
  return u.prompt_tokens ?? null;
}

// How each real coding agent is run against agentkv for one turn of one
// session: its binary (installed by npm ci here), a temp HOME and an empty
// temp project dir (so nothing it does touches the machine), its settings
// pointing at the recording proxy, no login, no traffic beyond loopback, and
// its output cap. A client is {name, version, api, proxyOptions, setup(dir,
// baseURL), argv(turn, prompt), env}; turn 1 starts the session, turns 2-3
// continue it (the client's own "continue the last session" flag).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SUITE_DIR = path.resolve(here, '..');
const bin = (name) => path.join(SUITE_DIR, 'node_modules', '.bin', name);
const pkgVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(SUITE_DIR, 'node_modules', name, 'package.json'), 'utf8')).version;

// Output tokens per reply: the 16M model never stops, so every reply runs to the cap.
export const OUTPUT_CAP = 32;

// What every client process gets: a clean environment (no proxies, keys or
// settings of the machine), HOME in the run's temp dir.
function baseEnv(dir) {
  return { PATH: process.env.PATH, HOME: path.join(dir, 'home'), LANG: 'C.UTF-8', TERM: 'dumb', NO_COLOR: '1' };
}

export const CLAUDE = {
  name: 'claude-code',
  binary: bin('claude'),
  version: () => pkgVersion('@anthropic-ai/claude-code'),
  api: 'anthropic',
  // Claude Code ends a reply cut at its cap with an error (exit 1 after 3 retries).
  proxyOptions: { endCapped: true },
  setup() {},
  env(dir, baseURL) {
    return {
      ...baseEnv(dir),
      ANTHROPIC_BASE_URL: baseURL,
      ANTHROPIC_API_KEY: 'dummy',  // no login
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(OUTPUT_CAP),
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    };
  },
  // -p: one prompt, no terminal UI. Tools that change anything (Bash, Edit,
  // Write) ask for permission, which -p cannot grant: they are denied.
  argv(turn, prompt) {
    return ['-p', prompt, '--max-turns', '2', '--output-format', 'json', ...(turn > 1 ? ['--continue'] : [])];
  },
};

export const CODEX = {
  name: 'codex',
  binary: bin('codex'),
  version: () => pkgVersion('@openai/codex'),
  api: 'responses',
  // Codex has no output cap setting (agentkv's default is 256 tokens), and
  // exits 1 on "Incomplete response returned".
  proxyOptions: { endCapped: true, maxOutputTokens: OUTPUT_CAP },
  setup(dir, baseURL) {
    const home = path.join(dir, 'codex-home');
    fs.mkdirSync(home, { recursive: true });
    fs.writeFileSync(path.join(home, 'config.toml'), [
      'model = "tiny"',
      'model_provider = "agentkv"',
      'approval_policy = "never"',
      'sandbox_mode = "read-only"',
      'check_for_update_on_startup = false',
      '[analytics]',
      'enabled = false',
      '[model_providers.agentkv]',
      'name = "agentkv"',
      `base_url = "${baseURL}/v1"`,
      'wire_api = "responses"',
      'env_key = "AGENTKV_TEST_KEY"',
      'request_max_retries = 0',
      'stream_max_retries = 0',
      '',
    ].join('\n'));
  },
  env(dir) {
    return { ...baseEnv(dir), CODEX_HOME: path.join(dir, 'codex-home'), AGENTKV_TEST_KEY: 'dummy' };
  },
  argv(turn, prompt) {
    return turn > 1 ? ['exec', '--skip-git-repo-check', 'resume', '--last', prompt]
      : ['exec', '--skip-git-repo-check', prompt];
  },
};

export const OPENCODE = {
  name: 'opencode',
  binary: bin('opencode'),
  version: () => pkgVersion('opencode-ai'),
  api: 'chat',
  proxyOptions: {},  // OpenCode ends a capped reply normally
  setup(dir, baseURL) {
    fs.writeFileSync(path.join(dir, 'opencode.json'), JSON.stringify({
      $schema: 'https://opencode.ai/config.json',
      provider: {
        agentkv: {
          npm: '@ai-sdk/openai-compatible',  // bundled in the opencode binary: nothing is downloaded
          name: 'agentkv',
          options: { baseURL: `${baseURL}/v1`, apiKey: 'dummy' },
          models: { tiny: { name: 'tiny', limit: { context: 32768, output: OUTPUT_CAP } } },
        },
      },
      model: 'agentkv/tiny',
      small_model: 'agentkv/tiny',
      autoupdate: false,
      share: 'disabled',
      // Denied tools are also left out of the request's tools.
      permission: { edit: 'deny', bash: 'deny', webfetch: 'deny' },
    }, null, 2));
  },
  env(dir) {
    return {
      ...baseEnv(dir),
      OPENCODE_CONFIG: path.join(dir, 'opencode.json'),
      OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
      OPENCODE_DISABLE_SHARE: '1',
      OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    };
  },
  argv(turn, prompt) {
    return ['run', ...(turn > 1 ? ['--continue'] : []), prompt];
  },
};

export const CLIENTS = [CLAUDE, CODEX, OPENCODE];

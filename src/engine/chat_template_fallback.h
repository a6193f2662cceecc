#pragma once
// The chat template agentkv uses when a GGUF has none (the bundled model).
//
// llama.cpp's common library falls back to plain ChatML in that case, which
// knows no tools. Ours renders every conversation without tools byte for
// byte as common's ChatML fallback does, and adds tools the way Qwen2.5 /
// Hermes do (a "# Tools" block with one JSON signature per line in the
// system turn, calls as <tool_call>{"name", "arguments"}</tool_call>, results
// as <tool_response> in a user turn), a format common's template analysis
// recognises, so its tool-call parser and grammar work for such models too.

namespace agentkv::engine {

extern const char* const kFallbackChatTemplate;

}  // namespace agentkv::engine

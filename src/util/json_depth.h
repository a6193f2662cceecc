#pragma once
// The nesting depth of JSON text, measured without parsing it.
//
// Every JSON the server takes from a client (a request body, a tool call's
// `arguments` string, a schema) and every JSON the chat layer parses out of
// model output is checked with this before anything builds or walks a DOM:
// nlohmann's parser is iterative, but dump(), llama.cpp's
// json_schema_to_grammar and Jinja's from_json recurse once per level, so
// depth, not size, decides whether they overflow the stack.

#include <cstddef>
#include <string_view>

namespace agentkv {

// The deepest request JSON the server accepts: 128 levels of objects and
// arrays, the body's own braces included. OpenAI-compatible servers bound
// this at 64-128; real schemas (body > tools > function > parameters >
// properties > items ...) stay far below 30. At 128 every recursive walk
// above stays well within a worker thread's stack (docs/api.md,
// "Request limits: nesting and memory").
inline constexpr size_t kMaxJsonDepth = 128;

// The maximum nesting depth of the objects and arrays in `text` (0 for a
// scalar or empty text), counting only brackets outside strings (escapes
// honoured). Scans at most until the depth exceeds `stop_above`, and then
// returns stop_above + 1: the cost is O(bytes) and nothing is allocated.
// `text` need not be valid JSON (then the result is the depth of its
// unbalanced brackets, a bound a parser would also meet before failing).
size_t JsonNestingDepth(std::string_view text, size_t stop_above = kMaxJsonDepth);

// True when JsonNestingDepth(text) <= max_depth.
inline bool JsonDepthWithin(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  return JsonNestingDepth(text, max_depth) <= max_depth;
}

}  // namespace agentkv

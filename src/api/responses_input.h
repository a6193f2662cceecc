#pragma once
// The `input` of a POST /v1/responses (responses_json.h): a string (one user
// message) or items, into ChatMessages, as the chat route renders the same
// conversation (text parts joined with "\n"; a function_call joins the
// assistant message just before it, or starts one with empty content;
// function_call_output is a kTool message named after its call, which must
// come earlier; a reasoning item's text becomes the next assistant
// message's reasoning_content). Used by responses_json.cc.

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/backend.h"
#include "api/errors.h"

namespace agentkv::api {

// Appends the body's `input` to *out. On failure returns the 400 naming the
// field ("input[1].content[0].type"); *out is then unspecified.
[[nodiscard]] std::optional<ApiError> ParseResponsesInput(const nlohmann::json& body, std::vector<ChatMessage>* out);

}  // namespace agentkv::api

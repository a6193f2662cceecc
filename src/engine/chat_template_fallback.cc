#include "engine/chat_template_fallback.h"

namespace agentkv::engine {

const char* const kFallbackChatTemplate = R"JINJA({%- if tools -%}
  {{- '<|im_start|>system\n' -}}
  {%- if messages[0].role == 'system' -%}
    {{- messages[0].content + '\n\n' -}}
  {%- endif -%}
  {{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
  {%- for tool in tools -%}
    {{- '\n' -}}
    {{- tool | tojson -}}
  {%- endfor -%}
  {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
  {%- if message.role == 'system' and loop.first and tools -%}
  {%- elif message.role == 'assistant' and message.tool_calls -%}
    {{- '<|im_start|>assistant' -}}
    {%- if message.content -%}
      {{- '\n' + message.content -}}
    {%- endif -%}
    {%- for tool_call in message.tool_calls -%}
      {%- if tool_call.function is defined -%}
        {%- set tool_call = tool_call.function -%}
      {%- endif -%}
      {{- '\n<tool_call>\n{"name": "' -}}
      {{- tool_call.name -}}
      {{- '", "arguments": ' -}}
      {{- tool_call.arguments | tojson -}}
      {{- '}\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- elif message.role == 'tool' -%}
    {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}
      {{- '<|im_start|>user' -}}
    {%- endif -%}
    {{- '\n<tool_response>\n' -}}
    {{- message.content -}}
    {{- '\n</tool_response>' -}}
    {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}
      {{- '<|im_end|>\n' -}}
    {%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%})JINJA";

}  // namespace agentkv::engine

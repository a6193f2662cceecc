#!/usr/bin/env python3
"""Writes openai-openapi-subset.json: the schemas of OpenAI's published
OpenAPI document (github.com/openai/openai-openapi, openapi.json) that the
e2e tests validate agentkv's responses against, with everything they
reference. Usage: extract_openapi_subset.py FULL_OPENAPI_JSON > subset.json"""
import json
import sys

ROOTS = ["CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "CreateCompletionResponse",
         "ErrorResponse", "Response", "ResponseStreamEvent"]

doc = json.load(open(sys.argv[1]))
schemas = doc["components"]["schemas"]
keep, todo = {}, list(ROOTS)
while todo:
    name = todo.pop()
    if name in keep:
        continue
    keep[name] = schemas[name]
    stack = [schemas[name]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                todo.append(ref.rsplit("/", 1)[1])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
out = {"openapi": doc["openapi"], "info": {"title": doc["info"]["title"], "version": doc["info"]["version"],
                                           "x-subset-of": "openai/openai-openapi openapi.json"},
       "components": {"schemas": dict(sorted(keep.items()))}}
json.dump(out, sys.stdout, indent=1, sort_keys=False)
print()

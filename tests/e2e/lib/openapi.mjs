// Validates agentkv's responses against OpenAI's published OpenAPI schemas
// (lib/openai-openapi-subset.json, extracted from openai/openai-openapi's
// openapi.json by lib/extract_openapi_subset.py) with ajv.
//
// The document is OpenAPI 3.x: `nullable: true` is turned into a JSON Schema
// type union (and `null` added to enums) before ajv compiles it, as the
// schema's README asks. OpenAPI's own keywords (x-*, discriminator,
// example...) are ignored (strict: false).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';

const here = path.dirname(fileURLToPath(import.meta.url));
const doc = JSON.parse(fs.readFileSync(path.join(here, 'openai-openapi-subset.json'), 'utf8'));

function denullable(node) {
  if (Array.isArray(node)) return node.map(denullable);
  if (!node || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) out[k] = denullable(v);
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (Array.isArray(out.type) && !out.type.includes('null')) out.type = [...out.type, 'null'];
    else if (!out.type && (out.anyOf || out.oneOf || out.allOf || out.$ref)) {
      const { description, ...rest } = out;
      return { description, anyOf: [rest, { type: 'null' }] };
    }
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  return out;
}

const ajv = new Ajv({ strict: false, allErrors: true, formats: { uri: true, unixtime: true, float: true } });
ajv.addSchema({ $id: 'openai', components: denullable(doc.components) });
const validators = new Map();

/** Throws (with ajv's errors and the object) unless `obj` matches schema `name`. */
export function assertSchema(name, obj) {
  let v = validators.get(name);
  if (!v) {
    v = ajv.getSchema(`openai#/components/schemas/${name}`);
    if (!v) throw new Error(`no schema ${name}`);
    validators.set(name, v);
  }
  if (!v(obj)) {
    throw new Error(`response does not match OpenAI's ${name}: ${ajv.errorsText(v.errors)}\n` +
      JSON.stringify(obj).slice(0, 2000));
  }
}

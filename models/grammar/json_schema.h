// JSON Schema to GBNF, for OpenAI's response_format (json_schema, strict
// or not, and json_object) and strict tool calls.
//
// Every string the grammar produces must validate against the schema, so
// the converter handles a subset of JSON Schema exactly and refuses the
// rest: a keyword it does not know or cannot enforce is a kiln::Error
// naming the keyword and its JSON pointer ("JSON schema keyword
// 'multipleOf' at /properties/n/multipleOf is not supported"), which a
// server turns into a 422. Where the subset gives the model less freedom
// than the schema, it is always in the direction of valid output:
//   - objects: `properties`, `required`, `additionalProperties` (false,
//     true or a schema; when absent, only the listed properties are
//     generated, or any property when none are listed). Required
//     properties come first, then optional ones, each in schema order (as
//     llama.cpp's converter orders them); extra keys are plain-character
//     strings different from every listed name.
//   - arrays: `items`, `prefixItems`, `minItems`, `maxItems` (a maximum
//     above 2000, GBNF's bound, generates at most 2000 items).
//   - strings: `minLength`, `maxLength` (counted in code points; \u escapes
//     of surrogates are never generated; maximum above 2000 as for arrays),
//     `pattern` (models/grammar/json_regex.h; not combined with lengths),
//     `format` date, time, date-time (RFC 3339, real calendar days, leap
//     years included) and uuid.
//   - integers: `minimum`, `maximum`, `exclusiveMinimum`,
//     `exclusiveMaximum` exactly, as decimal digit ranges; at most 15
//     digits, so values stay exact in a double.
//   - numbers: the same bounds exactly (no exponent then, and at most 15
//     significant digits so that the parsed double compares like the
//     decimal text); unbounded numbers may have exponents.
//   - `enum`, `const` (values written in compact JSON), `anyOf`, `oneOf`
//     (only when its branches provably exclude each other: by type, by
//     distinct enum values, by a required discriminating property or a
//     required property the other branch never writes), `allOf` (merged
//     when its parts' keywords combine), `$ref` to "#..." JSON pointers
//     (`$defs`, `definitions`, recursion included), `type` lists.
//   - annotations (title, description, default, examples, ...) are ignored.
// Whitespace: an optional single space, or a newline and up to 20 spaces
// or tabs, after each token (as llama.cpp's converter allows, and bounded).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

// GBNF whose root matches the JSON texts that validate against `schema`.
// Properties are generated in the order the schema lists them, which only
// an ordered_json keeps (nlohmann::json sorts keys: parse the request with
// nlohmann::ordered_json::parse to keep the client's order).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::string json_schema_to_gbnf(const nlohmann::json& schema);
// GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace kiln

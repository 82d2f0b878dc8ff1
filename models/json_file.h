// A JSON file whose top level must be an object (config.json,
// tokenizer.json, a safetensors index): read whole, or a kiln::Error that
// names the file ("cannot read '<path>'", "'<path>' is not a JSON object").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

nlohmann::json read_json_object(const std::string& path);

}  // namespace kiln

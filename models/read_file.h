// Files read whole: their bytes, or a JSON object (config.json,
// tokenizer.json, a safetensors index). A file that cannot be read is a
// kiln::Error "<what> '<path>' cannot be read"; JSON whose top level is not
// an object, "'<path>' is not a JSON object".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

std::string read_file(const std::string& path, const std::string& what);
nlohmann::json read_json_object(const std::string& path);

}  // namespace kiln

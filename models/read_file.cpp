#include "models/read_file.h"

#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace kiln {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + " '" + path + "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json read_json_object(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(read_file(path, "JSON file"), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("'" + path + "' is not a JSON object");
  return j;
}

}  // namespace kiln

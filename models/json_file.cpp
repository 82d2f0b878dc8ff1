#include "models/json_file.h"

#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace kiln {

nlohmann::json read_json_object(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("'" + path + "' is not a JSON object");
  return j;
}

}  // namespace kiln

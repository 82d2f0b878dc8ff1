#include "runtime/compile_cache.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/compile_key.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "KILN-CPU-OBJECT 1";
constexpr const char* kSchemaDir = "cpu-v1";
constexpr const char* kSpecMagic = "KILN-SPEC 1";
constexpr const char* kSpecExtension = ".kspec";

struct Parsed {
  std::string kernel, digest, sha;
  int64_t size = -1;
  std::string_view payload;
};

// Returns false for anything that is not a complete, self-consistent entry.
bool parse_entry(const std::string& bytes, Parsed* out) {
  size_t end = bytes.find("\n\n");
  if (end == std::string::npos || end > 4096) return false;
  std::istringstream head(bytes.substr(0, end));
  std::string line;
  if (!std::getline(head, line) || line != kMagic) return false;
  while (std::getline(head, line)) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) return false;
    std::string k = line.substr(0, sp), v = line.substr(sp + 1);
    if (k == "kernel")
      out->kernel = v;
    else if (k == "digest")
      out->digest = v;
    else if (k == "sha256")
      out->sha = v;
    else if (k == "size")
      out->size = std::strtoll(v.c_str(), nullptr, 10);
  }
  out->payload = std::string_view(bytes).substr(end + 2);
  return out->size >= 0 && static_cast<int64_t>(out->payload.size()) == out->size &&
         sha256_hex(out->payload) == out->sha;
}

bool read_file(const fs::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

std::string CompileCache::default_dir() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
  return "";
}

CompileCache::CompileCache(std::string dir) : root_(dir) {
  if (dir.empty()) return;
  dir_ = (fs::path(dir) / kSchemaDir).string();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    disable("cannot create it: " + ec.message());
  } else if (!fs::is_directory(dir_, ec)) {
    disable("it is not a directory");
  } else if (access(dir_.c_str(), W_OK) != 0) {
    disable("it is not writable");
  }
}

void CompileCache::disable(const std::string& why) {
  std::fprintf(stderr,
               "kiln: warning: compile cache '%s' is unusable (%s); compiling in memory only\n",
               dir_.c_str(), why.c_str());
  dir_.clear();
}

std::string CompileCache::entry_path(const std::string& digest) const {
  return (fs::path(dir_) / (digest + ".kobj")).string();
}

std::optional<std::string> CompileCache::load(const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) {
    ++misses;
    return std::nullopt;
  }
  std::string bytes;
  if (bad_.count(digest) || !read_file(entry_path(digest), &bytes)) {
    ++misses;
    return std::nullopt;
  }
  Parsed p;
  if (!parse_entry(bytes, &p) || p.digest != digest) {
    bad_.insert(digest);
    ++corrupt;
    ++misses;
    return std::nullopt;
  }
  ++hits;
  return std::string(p.payload);
}

void CompileCache::store(const std::string& digest, const std::string& kernel,
                         std::string_view object) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) return;
  std::string data = std::string(kMagic) + "\nkernel " + kernel + "\ndigest " + digest + "\nsize " +
                     std::to_string(object.size()) + "\nsha256 " + sha256_hex(object) + "\n\n";
  data.append(object);
  write_entry(digest + ".kobj", data);
  bad_.erase(digest);
}

void CompileCache::write_entry(const std::string& name, const std::string& data) {
  std::random_device rd;
  fs::path tmp =
      fs::path(dir_) / (name + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      disable("writing an entry failed (disk full?)");
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, fs::path(dir_) / name, ec);
  if (ec) {
    fs::remove(tmp, ec);
    disable("renaming an entry into place failed");
  }
}

std::optional<std::string> CompileCache::find_digest(const std::string& spec_key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string bytes;
  if (dir_.empty() || !read_file(fs::path(dir_) / (spec_key + kSpecExtension), &bytes))
    return std::nullopt;
  // "KILN-SPEC 1\ndigest <64 hex digits>\n", nothing else.
  const std::string head = std::string(kSpecMagic) + "\ndigest ";
  if (bytes.size() != head.size() + 65 || bytes.compare(0, head.size(), head) != 0 ||
      bytes.back() != '\n')
    return std::nullopt;
  std::string digest = bytes.substr(head.size(), 64);
  for (char c : digest)
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c)))
      return std::nullopt;
  return digest;
}

void CompileCache::remember_digest(const std::string& spec_key, const std::string& digest) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) return;
  write_entry(spec_key + kSpecExtension, std::string(kSpecMagic) + "\ndigest " + digest + "\n");
}

std::vector<CompileCache::Entry> CompileCache::list() const {
  std::vector<Entry> out;
  if (dir_.empty()) return out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    if (f.path().extension() != ".kobj") continue;
    Entry e;
    e.digest = f.path().stem().string();
    std::string bytes;
    if (read_file(f.path(), &bytes)) {
      e.bytes = static_cast<int64_t>(bytes.size());
      Parsed p;
      e.valid = parse_entry(bytes, &p) && p.digest == e.digest;
      e.kernel = p.kernel;
    }
    out.push_back(e);
  }
  return out;
}

int CompileCache::clear() {
  if (dir_.empty()) return 0;
  int n = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir_, ec)) {
    auto ext = f.path().extension();
    const bool counted =
        ext == ".kobj" || f.path().filename().string().find(".tmp.") != std::string::npos;
    if (counted || ext == kSpecExtension) n += fs::remove(f.path(), ec) && counted ? 1 : 0;
  }
  return n;
}

}  // namespace kiln

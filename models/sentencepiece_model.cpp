#include "models/sentencepiece_model.h"

#include <cstring>

#include "ir/error.h"
#include "models/read_file.h"

namespace kiln {

namespace {

// Protobuf's wire format: (field << 3 | wire type) tags, varints, 32-bit
// floats and length-delimited bytes; unknown fields are skipped.
class Wire {
 public:
  Wire(std::string_view b, const std::string& name) : b_(b), name_(name) {}

  bool done() const { return pos_ >= b_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("SentencePiece model '" + name_ + "': " + what + " at byte " +
                std::to_string(pos_));
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) fail("a varint runs past the end");
      const auto c = static_cast<uint8_t>(b_[pos_++]);
      v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if (!(c & 0x80)) return v;
    }
    fail("a varint longer than 10 bytes");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > b_.size() - pos_) fail("a field of " + std::to_string(n) + " bytes runs past the end");
    std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  float f32() {
    if (b_.size() - pos_ < 4) fail("a float runs past the end");
    float f;
    std::memcpy(&f, b_.data() + pos_, 4);
    pos_ += 4;
    return f;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1:
        if (b_.size() - pos_ < 8) fail("a fixed64 runs past the end");
        pos_ += 8;
        break;
      case 2: bytes(); break;
      case 5: f32(); break;
      default: fail("wire type " + std::to_string(wire_type) + " is not protobuf's");
    }
  }

 private:
  std::string_view b_;
  const std::string& name_;
  size_t pos_ = 0;
};

// Reads the fields of one message, calling on(field, wire type, wire)
// for each; `on` returns false for a field it does not read.
template <class On>
void each_field(Wire& w, On on) {
  while (!w.done()) {
    const uint64_t tag = w.varint();
    const auto field = static_cast<uint32_t>(tag >> 3), type = static_cast<uint32_t>(tag & 7);
    if (!on(field, type)) w.skip(type);
  }
}

}  // namespace

SentencePieceModel SentencePieceModel::parse(std::string_view bytes, const std::string& name) {
  SentencePieceModel m;
  Wire top(bytes, name);
  auto as_int = [](uint64_t v) { return static_cast<int32_t>(static_cast<int64_t>(v)); };
  each_field(top, [&](uint32_t field, uint32_t type) {
    if (type != 2 || field < 1 || field > 3) return false;
    Wire sub(top.bytes(), name);
    if (field == 1) {  // pieces
      Piece p;
      each_field(sub, [&](uint32_t f, uint32_t t) {
        if (f == 1 && t == 2)
          p.text = std::string(sub.bytes());
        else if (f == 2 && t == 5)
          p.score = sub.f32();
        else if (f == 3 && t == 0)
          p.type = as_int(sub.varint());
        else
          return false;
        return true;
      });
      if (p.type < 1 || p.type > 6)
        top.fail("piece " + std::to_string(m.pieces.size()) + " has type " +
                 std::to_string(p.type));
      m.pieces.push_back(std::move(p));
    } else if (field == 2) {  // trainer_spec
      each_field(sub, [&](uint32_t f, uint32_t t) {
        if (t != 0) return false;
        if (f == 3)
          m.model_type = as_int(sub.varint());
        else if (f == 35)
          m.byte_fallback = sub.varint() != 0;
        else if (f == 40)
          m.unk_id = as_int(sub.varint());
        else if (f == 41)
          m.bos_id = as_int(sub.varint());
        else if (f == 42)
          m.eos_id = as_int(sub.varint());
        else
          return false;
        return true;
      });
    } else {  // normalizer_spec
      each_field(sub, [&](uint32_t f, uint32_t t) {
        if (f != 3 || t != 0) return false;
        m.add_dummy_prefix = sub.varint() != 0;
        return true;
      });
    }
    return true;
  });
  if (m.pieces.empty()) throw Error("SentencePiece model '" + name + "': it holds no pieces");
  return m;
}

SentencePieceModel SentencePieceModel::read(const std::string& path) {
  return parse(read_file(path, "SentencePiece model"), path);
}

}  // namespace kiln

#include "data/spm_model.h"

#include <cstring>

#include "util/error.h"

namespace moelab {
namespace {

// Protobuf wire format: each field is a varint key (number << 3 | wire type)
// followed by a varint (0), 8 bytes (1), a varint length and bytes (2) or 4 bytes (5).
class WireReader {
 public:
  WireReader(const std::string& bytes, const std::string& origin)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), origin_(origin) {}
  WireReader(const char* begin, const char* end, const std::string& origin)
      : p_(begin), end_(end), origin_(origin) {}

  bool done() const { return p_ >= end_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) fail("truncated varint");
      const auto byte = static_cast<uint8_t>(*p_++);
      value |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("varint longer than 10 bytes");
  }

  // The bytes of a length-delimited field.
  std::pair<const char*, const char*> bytes() {
    const uint64_t length = varint();
    if (length > uint64_t(end_ - p_)) fail("field longer than the message");
    const char* begin = p_;
    p_ += length;
    return {begin, p_};
  }

  float fixed32_float() {
    if (end_ - p_ < 4) fail("truncated fixed32");
    float value;
    std::memcpy(&value, p_, 4);  // little-endian, as protobuf and x86 are
    p_ += 4;
    return value;
  }

  void skip(int wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        return;
      case 1:
        if (end_ - p_ < 8) fail("truncated fixed64");
        p_ += 8;
        return;
      case 2:
        bytes();
        return;
      case 5:
        if (end_ - p_ < 4) fail("truncated fixed32");
        p_ += 4;
        return;
      default:
        fail("unknown wire type " + std::to_string(wire_type));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(origin_ + ": not a SentencePiece model (" + what + ")");
  }

 private:
  const char* p_;
  const char* end_;
  const std::string& origin_;
};

// Calls on_field(number, wire_type, reader) for every field; the callback must
// consume the field's value (or call reader.skip).
template <typename OnField>
void for_each_field(WireReader& reader, OnField on_field) {
  while (!reader.done()) {
    const uint64_t key = reader.varint();
    on_field(static_cast<int>(key >> 3), static_cast<int>(key & 7));
  }
}

std::string as_string(std::pair<const char*, const char*> span) {
  return std::string(span.first, span.second);
}

SpmPiece parse_piece(std::pair<const char*, const char*> span, const std::string& origin) {
  WireReader reader(span.first, span.second, origin);
  SpmPiece piece;
  for_each_field(reader, [&](int field, int wire) {
    if (field == 1 && wire == 2) {
      piece.text = as_string(reader.bytes());
    } else if (field == 2 && wire == 5) {
      piece.score = reader.fixed32_float();
    } else if (field == 3 && wire == 0) {
      const uint64_t type = reader.varint();
      if (type < 1 || type > 6) reader.fail("piece type " + std::to_string(type));
      piece.type = static_cast<PieceType>(type);
    } else {
      reader.skip(wire);
    }
  });
  return piece;
}

void parse_trainer_spec(std::pair<const char*, const char*> span, SpmModel& model,
                        const std::string& origin) {
  WireReader reader(span.first, span.second, origin);
  for_each_field(reader, [&](int field, int wire) {
    if (field == 3 && wire == 0) {
      model.model_type = static_cast<int>(reader.varint());
    } else if (field == 24 && wire == 0) {
      model.treat_whitespace_as_suffix = reader.varint() != 0;
    } else if (field == 35 && wire == 0) {
      model.byte_fallback = reader.varint() != 0;
    } else {
      reader.skip(wire);
    }
  });
}

void parse_normalizer_spec(std::pair<const char*, const char*> span, SpmModel& model,
                           const std::string& origin) {
  WireReader reader(span.first, span.second, origin);
  for_each_field(reader, [&](int field, int wire) {
    if (field == 1 && wire == 2) {
      model.normalizer_name = as_string(reader.bytes());
    } else if (field == 2 && wire == 2) {
      model.precompiled_charsmap = as_string(reader.bytes());
    } else if (field == 3 && wire == 0) {
      model.add_dummy_prefix = reader.varint() != 0;
    } else if (field == 4 && wire == 0) {
      model.remove_extra_whitespaces = reader.varint() != 0;
    } else if (field == 5 && wire == 0) {
      model.escape_whitespaces = reader.varint() != 0;
    } else {
      reader.skip(wire);
    }
  });
}

}  // namespace

SpmModel parse_spm_model(const std::string& bytes, const std::string& origin) {
  SpmModel model;
  WireReader reader(bytes, origin);
  for_each_field(reader, [&](int field, int wire) {
    if (field == 1 && wire == 2) {
      model.pieces.push_back(parse_piece(reader.bytes(), origin));
    } else if (field == 2 && wire == 2) {
      parse_trainer_spec(reader.bytes(), model, origin);
    } else if (field == 3 && wire == 2) {
      parse_normalizer_spec(reader.bytes(), model, origin);
    } else {
      reader.skip(wire);
    }
  });
  if (model.pieces.empty()) reader.fail("no pieces");
  return model;
}

UserSymbols::UserSymbols(const SpmModel& model) {
  for (const auto& piece : model.pieces) {
    if (piece.type == PieceType::kUserDefined) symbols_.push_back(piece.text);
  }
}

size_t UserSymbols::match(std::string_view text) const {
  size_t longest = 0;
  for (const auto& symbol : symbols_) {
    if (symbol.size() > longest && text.substr(0, symbol.size()) == symbol) longest = symbol.size();
  }
  return longest;
}

}  // namespace moelab

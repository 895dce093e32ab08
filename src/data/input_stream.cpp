#include "data/input_stream.h"

#include <zlib.h>
#include <zstd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace moelab {

namespace {

constexpr size_t kReadChunk = size_t{1} << 18;

// zlib's gz* functions read gzip members (concatenated too) and pass plain
// files through unchanged.
class GzipOrPlainStream : public InputStream {
 public:
  GzipOrPlainStream(gzFile file, std::string path) : file_(file), path_(std::move(path)) {
    gzbuffer(file_, kReadChunk);
  }
  ~GzipOrPlainStream() override { gzclose(file_); }

  // Bytes decoded before a damaged spot are returned first; the error comes
  // with the next read, so messages count the lines that were intact.
  size_t read(char* out, size_t capacity) override {
    const int got = gzread(file_, out, static_cast<unsigned>(capacity));
    if (got > 0) return static_cast<size_t>(got);
    int error = Z_OK;
    std::string message = gzerror(file_, &error);
    if (got == 0 && (error == Z_OK || error == Z_STREAM_END)) return 0;
    if (message.rfind(path_ + ": ", 0) == 0) message.erase(0, path_.size() + 2);
    throw CorruptStream("truncated or corrupt gzip (" + message + ")",
                        static_cast<int64_t>(gzoffset(file_)));
  }

 private:
  gzFile file_;
  std::string path_;
};

class ZstdStream : public InputStream {
 public:
  explicit ZstdStream(std::FILE* file)
      : file_(file), context_(ZSTD_createDCtx()), input_(ZSTD_DStreamInSize()) {}
  ~ZstdStream() override {
    ZSTD_freeDCtx(context_);
    std::fclose(file_);
  }

  size_t read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (in_.pos == in_.size && !refill()) {
        if (frame_open_) throw CorruptStream("truncated zstd stream (frame ends early)", offset_);
        return 0;
      }
      const size_t status = ZSTD_decompressStream(context_, &output, &in_);
      if (ZSTD_isError(status)) {
        throw CorruptStream(std::string("corrupt zstd stream (") + ZSTD_getErrorName(status) + ")",
                            offset_);
      }
      frame_open_ = status != 0;
    }
    return output.pos;
  }

 private:
  bool refill() {
    const size_t got = std::fread(input_.data(), 1, input_.size(), file_);
    if (got == 0 && std::ferror(file_)) throw CorruptStream("read error", offset_);
    offset_ += static_cast<int64_t>(got);
    in_ = ZSTD_inBuffer{input_.data(), got, 0};
    return got > 0;
  }

  std::FILE* file_;
  ZSTD_DCtx* context_;
  std::vector<char> input_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  int64_t offset_ = 0;
  bool frame_open_ = false;
};

bool starts_with_zstd_magic(std::FILE* file) {
  std::array<unsigned char, 4> magic{};
  const size_t got = std::fread(magic.data(), 1, magic.size(), file);
  std::rewind(file);
  return got == magic.size() && magic == std::array<unsigned char, 4>{0x28, 0xB5, 0x2F, 0xFD};
}

}  // namespace

std::unique_ptr<InputStream> open_input_stream(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw InputError(path + ": cannot open input file");
  if (starts_with_zstd_magic(file)) return std::make_unique<ZstdStream>(file);
  std::fclose(file);
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) throw InputError(path + ": cannot open input file");
  return std::make_unique<GzipOrPlainStream>(gz, path);
}

LineReader::LineReader(const std::string& path) : path_(path), stream_(open_input_stream(path)) {}

bool LineReader::fill() {
  buffer_.erase(0, position_);
  position_ = 0;
  const size_t kept = buffer_.size();
  buffer_.resize(kept + kReadChunk);
  size_t got = 0;
  try {
    got = stream_->read(&buffer_[kept], kReadChunk);
  } catch (const CorruptStream& error) {
    throw InputError(path_ + ": after line " + std::to_string(line_number_) + " (compressed byte " +
                     std::to_string(error.offset()) + "): " + error.what());
  }
  buffer_.resize(kept + got);
  at_end_ = got == 0;
  return got > 0;
}

bool LineReader::next(std::string* line) {
  size_t newline = buffer_.find('\n', position_);
  while (newline == std::string::npos && !at_end_) {
    const size_t searched = buffer_.size() - position_;
    if (!fill()) break;
    newline = buffer_.find('\n', searched);
  }
  if (newline == std::string::npos) {
    if (position_ == buffer_.size()) return false;
    newline = buffer_.size();  // the last line has no "\n"
  }
  line->assign(buffer_, position_, newline - position_);
  position_ = std::min(newline + 1, buffer_.size());
  ++line_number_;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

}  // namespace moelab

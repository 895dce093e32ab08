// Decompressed bytes of one corpus file, read in order: plain, gzip or zstd,
// recognised from the first bytes (not the name), so `x.jsonl.zst`,
// `x.json.gz` or an unsuffixed file all read the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace moelab {

// A truncated or corrupt compressed stream; `offset` is how far into the
// compressed file the reader had got. LineReader turns it into a located InputError.
class CorruptStream : public std::runtime_error {
 public:
  CorruptStream(const std::string& problem, int64_t offset)
      : std::runtime_error(problem), offset_(offset) {}
  int64_t offset() const { return offset_; }

 private:
  int64_t offset_;
};

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Up to `capacity` bytes into `out`; 0 only at the end. Throws CorruptStream.
  virtual size_t read(char* out, size_t capacity) = 0;
};

// InputError naming `path` when it cannot be opened.
std::unique_ptr<InputStream> open_input_stream(const std::string& path);

// Lines of an InputStream, without their "\n" or "\r\n". A CorruptStream
// becomes an InputError "path: after line N (compressed byte B): ...".
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  bool next(std::string* line);  // false at the end of the file
  int64_t line_number() const { return line_number_; }

 private:
  bool fill();

  std::string path_;
  std::unique_ptr<InputStream> stream_;
  std::string buffer_;
  size_t position_ = 0;
  bool at_end_ = false;
  int64_t line_number_ = 0;
};

}  // namespace moelab

#include "metrics/event_file.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "util/atomic_file.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace moelab {
namespace {

// Field numbers of the messages written (tensorflow/core/util/event.proto,
// tensorflow/core/framework/summary.proto).
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum SummaryField { kValue = 1 };
enum ValueField { kTag = 1, kSimpleValue = 2, kHisto = 5 };
enum HistogramField { kMin = 1, kMax, kNum, kSum, kSumSquares, kBucketLimit, kBucket };
enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

constexpr int kHistogramBuckets = 30;

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char((v & 0x7F) | 0x80);
  out += char(v);
}

void put_key(std::string& out, int field, WireType type) {
  put_varint(out, (uint64_t(field) << 3) | type);
}

template <typename T>
void put_little_endian(std::string& out, T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out += char((bits >> (8 * i)) & 0xFF);
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, kFixed64);
  put_little_endian(out, v);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) put_little_endian(packed, v);
  put_bytes(out, field, packed);
}

// Equal-width buckets over [min, max]; bucket i counts the values in
// (limit[i-1], limit[i]], as TensorFlow's histograms do.
std::string histogram_proto(const std::vector<double>& values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  double sum = 0, sum_squares = 0;
  for (double v : values) {
    sum += v;
    sum_squares += v * v;
  }
  const int buckets = *hi > *lo ? std::min<int>(kHistogramBuckets, int(values.size())) : 1;
  std::vector<double> limits(buckets), counts(buckets, 0.0);
  for (int b = 0; b < buckets; ++b) limits[b] = *lo + (*hi - *lo) * double(b + 1) / buckets;
  limits.back() = *hi;
  for (double v : values) {
    counts[std::lower_bound(limits.begin(), limits.end(), v) - limits.begin()] += 1;
  }
  std::string out;
  put_double(out, kMin, *lo);
  put_double(out, kMax, *hi);
  put_double(out, kNum, double(values.size()));
  put_double(out, kSum, sum);
  put_double(out, kSumSquares, sum_squares);
  put_packed_doubles(out, kBucketLimit, limits);
  put_packed_doubles(out, kBucket, counts);
  return out;
}

std::string summary_value(const SummaryValue& value) {
  std::string out;
  put_bytes(out, kTag, value.tag);
  if (value.histogram.empty()) {
    put_key(out, kSimpleValue, kFixed32);
    put_little_endian(out, float(value.scalar));
  } else {
    put_bytes(out, kHisto, histogram_proto(value.histogram));
  }
  return out;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string event_header(int64_t step) {
  std::string out;
  put_double(out, kWallTime, seconds_since_epoch());
  put_key(out, kStep, kVarint);
  put_varint(out, uint64_t(step));
  return out;
}

uint64_t read_little_endian(const std::string& bytes, size_t at, size_t size) {
  uint64_t v = 0;
  for (size_t i = 0; i < size; ++i) v |= uint64_t(uint8_t(bytes[at + i])) << (8 * i);
  return v;
}

std::optional<uint64_t> read_varint(const std::string& bytes, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
    const uint8_t b = uint8_t(bytes[at++]);
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  return std::nullopt;
}

// The step of an encoded Event (0 when it has none, as protobuf defaults it);
// nullopt when the message does not parse.
std::optional<int64_t> event_step(const std::string& event) {
  int64_t step = 0;
  for (size_t at = 0; at < event.size();) {
    const auto key = read_varint(event, at);
    if (!key) return std::nullopt;
    const int field = int(*key >> 3);
    switch (*key & 7) {
      case kVarint: {
        const auto v = read_varint(event, at);
        if (!v) return std::nullopt;
        if (field == kStep) step = int64_t(*v);
        break;
      }
      case kFixed64:
        at += 8;
        break;
      case kFixed32:
        at += 4;
        break;
      case kBytes: {
        const auto size = read_varint(event, at);
        if (!size || *size > event.size() - at) return std::nullopt;
        at += *size;
        break;
      }
      default:
        return std::nullopt;
    }
    if (at > event.size()) return std::nullopt;
  }
  return step;
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& path)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw InputError(path + ": cannot create the TensorBoard event file");
  std::string version;
  put_double(version, kWallTime, seconds_since_epoch());
  put_bytes(version, kFileVersion, "brain.Event:2");
  write_record(version);
  flush();
}

void EventFileWriter::write(int64_t step, const std::vector<SummaryValue>& values) {
  std::string summary;
  for (const auto& value : values) put_bytes(summary, kValue, summary_value(value));
  std::string event = event_header(step);
  put_bytes(event, kSummary, summary);
  write_record(event);
}

void EventFileWriter::flush() {
  out_.flush();
  if (!out_) throw InputError(path_ + ": cannot write the TensorBoard event file");
}

void EventFileWriter::write_record(const std::string& payload) {
  std::string length;
  put_little_endian(length, uint64_t(payload.size()));
  std::string crc;
  put_little_endian(crc, masked_crc32c(length.data(), length.size()));
  out_ << length << crc << payload;
  crc.clear();
  put_little_endian(crc, masked_crc32c(payload.data(), payload.size()));
  out_ << crc;
}

size_t keep_events_up_to(const std::string& path, int64_t max_step) {
  const std::string bytes = read_text_file(path, "TensorBoard event file");
  size_t kept_bytes = 0, records = 0;
  for (size_t at = 0; bytes.size() - at >= 12;) {
    const uint64_t length = read_little_endian(bytes, at, 8);
    if (read_little_endian(bytes, at + 8, 4) != masked_crc32c(bytes.data() + at, 8)) break;
    if (length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4) break;
    const std::string payload = bytes.substr(at + 12, length);
    if (read_little_endian(bytes, at + 12 + length, 4) !=
        masked_crc32c(payload.data(), payload.size()))
      break;
    const auto step = event_step(payload);
    if (!step || *step > max_step) break;  // events are in step order
    at += 12 + length + 4;
    kept_bytes = at;
    ++records;
  }
  if (kept_bytes < bytes.size()) write_file_durably(path, bytes.substr(0, kept_bytes));
  return records;
}

}  // namespace moelab

// TensorBoard event files, written without protobuf's library: TFRecord framing
// (length, masked CRC-32C of the length, payload, masked CRC-32C of the
// payload) around Event messages whose few fields are encoded by hand. LibTorch
// links its own protobuf, which has clashed with Debian's (see the SentencePiece
// note in data/tokenizer.h); five message fields do not justify a second one.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace moelab {

// One value of an Event's Summary: a scalar, or a histogram of `histogram`'s
// values when that is not empty.
struct SummaryValue {
  std::string tag;
  double scalar = 0;  // stored as TensorBoard's simple_value, a float
  std::vector<double> histogram;
};

class EventFileWriter {
 public:
  // Creates `path` (InputError naming it if it cannot) holding the
  // file-version record every event file starts with.
  explicit EventFileWriter(const std::string& path);
  // One Event at `step` with all of `values`, timestamped now.
  void write(int64_t step, const std::vector<SummaryValue>& values);
  // Makes what was written visible to a reader (TensorBoard polls the file).
  void flush();

 private:
  void write_record(const std::string& payload);

  std::string path_;
  std::ofstream out_;
};

// Keeps the whole, intact records of event file `path` whose step is at most
// `max_step` and drops the rest, a torn or corrupt tail included (a killed
// run's last write). Rewrites the file durably only when something is dropped.
// Returns the number of records kept.
size_t keep_events_up_to(const std::string& path, int64_t max_step);

}  // namespace moelab

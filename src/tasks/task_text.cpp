#include "tasks/task_text.h"

#include "data/checksum.h"

namespace moelab {

std::string task_text_checksum(const TaskText& task) {
  // Fields end with a byte no UTF-8 text holds, so no two item lists serialise alike.
  const char end = '\xff';
  std::string all;
  for (const TextItem& item : task.items) {
    all += item.context + end + std::to_string(item.gold) + end + item.group + end;
    for (const TextChoice& c : item.choices) all += c.context + end + c.continuation + end;
    all += '\xfe';
  }
  return checksum_hex(xxhash64_bytes(all));
}

}  // namespace moelab

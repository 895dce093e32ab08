#include "data/split_behavior.h"

namespace moelab {

std::optional<SplitBehavior> split_behavior_named(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return std::nullopt;
}

void BehaviorSplitter::flush() {
  if (holding_ && end_ > begin_) emit_(begin_, end_);
  holding_ = false;
}

void BehaviorSplitter::segment(size_t begin, size_t end, bool is_match) {
  bool extend = false;
  switch (behavior_) {
    case SplitBehavior::kRemoved:
      if (!is_match && end > begin) emit_(begin, end);
      return;
    case SplitBehavior::kIsolated:
      if (end > begin) emit_(begin, end);
      return;
    case SplitBehavior::kContiguous:  // runs of matches, runs of the rest
      extend = is_match == previous_is_match_;
      break;
    case SplitBehavior::kMergedWithPrevious:  // a match ends the piece before it
      extend = is_match && !previous_is_match_;
      break;
    case SplitBehavior::kMergedWithNext:  // a match starts the piece after it
      extend = !is_match && held_is_lone_match_;
      break;
  }
  previous_is_match_ = is_match;
  if (extend && holding_) {
    end_ = end;
    held_is_lone_match_ = false;
    return;
  }
  flush();
  holding_ = true;
  begin_ = begin;
  end_ = end;
  held_is_lone_match_ = is_match;
}

}  // namespace moelab

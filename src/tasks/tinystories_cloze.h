// The TinyStories last-word cloze, in LAMBADA's style: from each story of the
// TinyStories V1 validation text, the context is the story up to its last
// word and the continuation is " <word>", kept only where that word already
// occurs earlier in the story (so the story, not the sentence alone, tells it:
// LAMBADA's selection, by a rule rather than by annotators) and the story has
// at least kMinWords words. The last word is the last run of ASCII letters,
// followed by nothing but punctuation, quotes and space, and preceded by a
// space. Version 1; its items' checksum is pinned in the task registry, so a
// changed source file or rule is refused rather than silently scored.
#pragma once

#include <string>

#include "tasks/task_text.h"

namespace moelab {

// Stories are separated by lines holding only "<|endoftext|>".
TaskText build_tinystories_cloze(const std::string& valid_text_path);

}  // namespace moelab

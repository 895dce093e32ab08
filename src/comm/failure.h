// How an error on one rank becomes a prompt, clear exit of the whole job
// instead of the other ranks waiting forever in their next collective.
#pragma once

#include <string>

#include "comm/communicator.h"

namespace moelab {

// Collective over `group` (CPU tensors, so use an MPI or local communicator):
// returns when no rank passed an error; otherwise every rank throws InputError
// carrying the message of the lowest failing rank. That rank throws its own
// message; the others throw "rank N reported: <message>".
void agree_or_throw(Communicator& group, const std::string& local_error);

}  // namespace moelab

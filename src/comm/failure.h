// How an error on one rank becomes a prompt, clear exit of the whole job
// instead of the other ranks waiting forever in their next collective.
#pragma once

#include <exception>
#include <string>

#include "comm/communicator.h"

namespace moelab {

// Logs `e` with this rank's id and aborts every rank of the job: exit code 2
// for an InputError, 1 otherwise. For the top-level catch of an MPI program.
[[noreturn]] void fail_fast(const std::exception& e);

// Collective over `group` (CPU tensors, so use an MPI or local communicator):
// returns when no rank passed an error; otherwise every rank throws InputError
// carrying the message of the lowest failing rank. That rank throws its own
// message; the others throw "rank N reported: <message>".
void agree_or_throw(Communicator& group, const std::string& local_error);

}  // namespace moelab

// How an error on one rank becomes a prompt, clear exit of the whole job
// instead of the other ranks waiting forever in their next collective.
#pragma once

#include <string>

#include "comm/communicator.h"

namespace moelab {

// Collective over `group` (CPU tensors, so use an MPI or local communicator):
// "" when no rank passed an error; otherwise the message of the lowest failing
// rank, as that rank passed it, and "rank N reported: <message>" on the others.
std::string agree_on_error(Communicator& group, const std::string& local_error);

// agree_on_error, then every rank throws InputError with the message, if any.
void agree_or_throw(Communicator& group, const std::string& local_error);

}  // namespace moelab

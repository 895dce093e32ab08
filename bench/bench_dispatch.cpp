// Times expert-parallel dispatch + combine for the reference MoE layer
// (global batch 16 x 256 tokens, d = 256, E = 4, top-2; bf16 hidden states, as a
// bf16 run exchanges them) at the world size it is
// launched with, e.g. `mpirun -np 2 build/bin/bench_dispatch --ep 2`.
// Prints ms per dispatch+combine (forward; slowest rank) with the breakdown
// permute / exchange / un-permute, and ms per forward+backward.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "comm/process_groups.h"
#include "model/all_to_all_dispatcher.h"
#include "model/phase_timer.h"
#include "util/allocator.h"
#include "util/error.h"
#include "util/mpi_session.h"
#include "util/stopwatch.h"

namespace moelab {
namespace {

struct Options {
  int64_t global_tokens = 16 * 256;
  int64_t width = 256;
  int64_t experts = 4;
  int64_t top_k = 2;
  int64_t ep = 0;  // 0 = the whole world
  int iterations = 100;
  std::string dtype = "bf16";  // what the MoE layer exchanges: its compute dtype
};

// The slowest rank's value: the one that sets the pace of a collective step.
double slowest(Communicator& world, double value) {
  torch::Tensor t = torch::tensor({value}, torch::kDouble);
  world.all_reduce_max(t);
  return t.item<double>();
}

void run(const Options& options) {
  const int world_size = MpiSession::size();
  const int64_t ep = options.ep > 0 ? options.ep : world_size;
  ProcessGroups groups =
      make_process_groups(ep, options.experts, Backend::kMpi, false, "bench_dispatch");
  Communicator& world = *groups.world;
  const int64_t tokens = options.global_tokens / world_size;
  AllToAllDispatcher dispatcher(groups.ep, options.experts);

  torch::manual_seed(1234 + world.rank());
  const torch::Tensor hidden = torch::randn({tokens, options.width})
                                   .to(options.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat);
  // Distinct experts per token, like a router's top-k.
  const torch::Tensor ids =
      std::get<1>(torch::rand({tokens, options.experts}).topk(options.top_k, 1));

  const torch::Tensor gates = torch::rand(ids.sizes()).to(hidden.scalar_type());
  auto forward = [&] { return dispatcher.combine(dispatcher.dispatch(hidden, ids).tokens, gates); };
  // The upstream gradient is given rather than made by a .sum(), whose bf16
  // reduction would cost more than the dispatch; the leaf's grad is reset so it
  // is written, not accumulated, as for a hidden state inside the model.
  const torch::Tensor trainable = hidden.clone().requires_grad_(true);
  const torch::Tensor upstream = forward();
  auto forward_backward = [&] {
    trainable.mutable_grad().reset();
    torch::autograd::backward(
        {dispatcher.combine(dispatcher.dispatch(trainable, ids).tokens, gates)}, {upstream});
  };
  // Ten untimed passes first, so the heap reaches its steady size: on this VM a
  // page fault costs ~20 us and the first passes fault in fresh buffers. Timings
  // then cover the timed passes only.
  const auto mean_ms = [&](const auto& pass) {
    for (int i = 0; i < 10; ++i) pass();
    PhaseTimer::reset();
    world.barrier();
    Stopwatch watch;
    for (int i = 0; i < options.iterations; ++i) pass();
    return slowest(world, watch.peek() / options.iterations);
  };

  // The breakdown is the forward passes' (backward runs in autograd nodes).
  PhaseTimer::enable(true);
  const double forward_ms = mean_ms(forward);
  PhaseTimer::enable(false);
  const auto phase_ms = [&](Phase phase) {
    return slowest(world, 1e3 * PhaseTimer::seconds(phase) / options.iterations);
  };
  const double permute = phase_ms(Phase::kPermute);
  const double exchange = phase_ms(Phase::kExchange);
  const double unpermute = phase_ms(Phase::kUnpermute);
  const double train_ms = mean_ms(forward_backward);
  if (world.rank() == 0) {
    std::printf("layout: %s\n", groups.layout().c_str());
    std::printf("tokens per rank %lld (global %lld), d %lld, E %lld, top-%lld, %s, threads %d\n",
                static_cast<long long>(tokens), static_cast<long long>(options.global_tokens),
                static_cast<long long>(options.width), static_cast<long long>(options.experts),
                static_cast<long long>(options.top_k), options.dtype.c_str(),
                torch::get_num_threads());
    std::printf(
        "dispatch+combine forward: %.3f ms (permute %.3f, exchange %.3f, un-permute %.3f)\n",
        forward_ms, permute, exchange, unpermute);
    std::printf("dispatch+combine forward+backward: %.3f ms\n", train_ms);
  }
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  moelab::keep_freed_memory();
  moelab::MpiSession session(&argc, &argv);
  moelab::Options options;
  CLI::App app("Times expert-parallel dispatch + combine");
  app.add_option("--tokens", options.global_tokens, "global tokens per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--width", options.width, "hidden size d")->check(CLI::PositiveNumber);
  app.add_option("--experts", options.experts, "number of experts E")->check(CLI::PositiveNumber);
  app.add_option("--top-k", options.top_k, "experts per token")->check(CLI::PositiveNumber);
  app.add_option("--ep", options.ep, "expert-parallel group size (default: all ranks)");
  app.add_option("--dtype", options.dtype, "hidden-state dtype: bf16 (as in bf16 training) or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  app.add_option("--iterations", options.iterations, "timed iterations")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
    if (options.top_k > options.experts)
      throw CLI::ValidationError("--top-k", "must not exceed --experts");
    moelab::run(options);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    spdlog::error("rank {}: {}", moelab::MpiSession::rank(), e.what());
    moelab::MpiSession::abort(moelab::exit_code_of(e));
  }
  return 0;
}

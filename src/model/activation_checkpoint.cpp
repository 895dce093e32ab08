#include "model/activation_checkpoint.h"

namespace moelab {
namespace {

thread_local bool g_recomputing = false;

// Carries the piece through ctx->saved_data, which holds only IValues.
struct PieceHolder : torch::CustomClassHolder {
  explicit PieceHolder(CheckpointedPiece p) : piece(std::move(p)) {}
  CheckpointedPiece piece;
};

class RecomputeScope {
 public:
  RecomputeScope() : outer_(g_recomputing) { g_recomputing = true; }
  ~RecomputeScope() { g_recomputing = outer_; }

 private:
  bool outer_;
};

class Checkpoint : public torch::autograd::Function<Checkpoint> {
 public:
  // Autograd runs this without recording a graph: only the inputs are kept.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                CheckpointedPiece piece, at::TensorList inputs) {
    ctx->saved_data["piece"] = c10::IValue::make_capsule(c10::make_intrusive<PieceHolder>(piece));
    ctx->save_for_backward(inputs.vec());
    return piece(inputs.vec());
  }

  // Runs the piece again with a graph and backpropagates through it: the
  // parameters inside get their gradients there, the inputs' are returned.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto holder =
        c10::static_intrusive_pointer_cast<PieceHolder>(ctx->saved_data["piece"].toCapsule());
    std::vector<torch::Tensor> inputs;
    for (const auto& saved : ctx->get_saved_variables()) {
      inputs.push_back(saved.detach().requires_grad_(saved.requires_grad()));
    }
    std::vector<torch::Tensor> outputs;
    {
      torch::AutoGradMode grad_mode(true);
      RecomputeScope recompute;
      outputs = holder->piece(inputs);
    }
    std::vector<torch::Tensor> roots, grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, grads);
    torch::autograd::variable_list input_grads = {torch::Tensor()};  // for `piece`
    for (const auto& input : inputs) input_grads.push_back(input.grad());
    return input_grads;
  }
};

}  // namespace

std::vector<torch::Tensor> checkpointed(const CheckpointedPiece& piece,
                                        const std::vector<torch::Tensor>& inputs) {
  if (!torch::GradMode::is_enabled()) return piece(inputs);
  // As a TensorList, not a vector: autograd takes a vector argument for a
  // constant and would not connect the inputs to the graph.
  return Checkpoint::apply(piece, at::TensorList(inputs));
}

bool recomputing() {
  return g_recomputing;
}

}  // namespace moelab

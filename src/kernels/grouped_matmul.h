// Grouped matmul: the rows of x come in consecutive groups, one per expert, and
// group g is multiplied by its own matrix w[g]. The expert FFNs' three GEMMs.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace moelab {

// Whether this CPU runs grouped_matmul's own kernel for `dtype`: all groups in
// one parallel loop, without padding, where LibTorch runs the many small GEMMs
// of fine-grained experts one at a time, at a fraction of its peak. In bf16 its
// tiles are AVX512-BF16 dot products, or AMX tile products where the CPU has
// AMX-BF16; in fp32, AVX-512F FMAs (grouped_matmul_f32.h).
bool grouped_matmul_has_cpu_kernel(torch::ScalarType dtype);
bool grouped_matmul_has_amx();
// Whether grouped_matmul runs its CPU kernel on `dtype` operands of K x N per
// group: the 16-column tiles divide N, and the backward's dx (K columns) too.
bool grouped_matmul_cpu_kernel_fits(torch::ScalarType dtype, int64_t k, int64_t n);

// The kernel's micro-kernel on a CPU that has both: the best (AMX), or the
// AVX512-BF16 dot products, which tests pin to check them on such CPUs too.
enum class CpuTiles { kBest, kAvx512Dot };

// x: [rows, K]; w: [E, K, N] (any strides); counts[g]: the rows of group g,
// summing to rows. Returns [rows, N], group g's rows times w[g]. bf16 or fp32
// on a CPU with the kernel (K and N multiples of 16) runs it, forward and
// backward; everything else runs LibTorch's _grouped_mm.
torch::Tensor grouped_matmul(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts, CpuTiles tiles = CpuTiles::kBest);

// The same with the weight given as parts w_i [E, K, N_i] side by side along
// their columns (the experts' gate and up projections), without joining them:
// bf16 x with bf16 parts, or with fp32 parts (master weights) that the CPU
// kernel rounds to bf16 as it packs them and whose gradients it writes in
// fp32, so a bf16 step casts no expert weight either way. Other paths join the
// parts in x's dtype first.
torch::Tensor grouped_matmul(const torch::Tensor& x, at::TensorList w_parts,
                             const std::vector<int64_t>& counts, CpuTiles tiles = CpuTiles::kBest);

// The parts side by side along their columns as one [E, K, N] weight in
// `dtype`: what the paths that take one weight multiply by.
torch::Tensor join_weight_parts(at::TensorList w_parts, torch::ScalarType dtype);

// One mm per group: the kernel's reference in tests.
torch::Tensor grouped_matmul_reference(const torch::Tensor& x, const torch::Tensor& w,
                                       const std::vector<int64_t>& counts);

}  // namespace moelab

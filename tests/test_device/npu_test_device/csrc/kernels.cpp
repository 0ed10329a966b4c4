// The test device's own kernels: what a vendor's extension ships for vLLM's hot operators.
//
// Each is an operator of a library named as the device (`torch.ops.<device>`, the name
// PrivateUse1 was renamed to; register_kernels, called once the backend is renamed), with
// a PrivateUse1 kernel and a Meta kernel, as a real extension registers its device kernels:
//   rms_norm, fused_add_rms_norm   vLLM IR's rms_norm / fused_add_rms_norm (native semantics)
//   silu_and_mul                   vLLM's SiluAndMul
//   rotary_embedding               vLLM's rotary_embedding, in place on query and key
//   reshape_and_cache              the KV write of the paged-attention contract below
//   paged_attention                causal paged attention over a mixed batch (the same contract:
//                                  reference_kernels/paged_attention/contract.py), into `out`
// The PrivateUse1 kernel does what a device kernel does: the host allocates the results
// (the device's allocator; the graph's pool while capturing), then the work is launched -
// run now on host views of the device's bytes, or recorded into the graph being captured
// (graphs.cpp) and run at each replay. The work reads everything it needs from device
// memory when it runs (paged_attention reads seq_lens and query_start_loc then), so one
// captured launch serves every replay whatever the batch's lengths. Each launch is counted
// under its operator's name, `<device>::<kernel>` (npu_test::dispatch_counts); the Meta
// kernel sizes the results without running, for graph capture and torch.compile.

#include "runtime.h"

#include <ATen/ATen.h>
#include <ATen/Functions.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace npu_test {

namespace {

// The library the kernels are registered in: the device's name (register_kernels).
std::string kernel_namespace;

// Count the kernel's call and launch its work on `on`'s device (runtime.h: launch).
void launch(const char* kernel, const at::Tensor& on, std::function<void()> work) {
  const auto name = kernel_namespace + "::" + kernel;
  count_call(name);
  npu_test::launch(on.device().index(), name, std::move(work));
}

// --- norms and activation (vLLM IR native semantics) -------------------------------------

at::Tensor normalized(
    const at::Tensor& x, const std::optional<at::Tensor>& weight, double epsilon,
    std::optional<int64_t> variance_size, c10::ScalarType out_dtype) {
  const auto variance_of =
      variance_size ? x.narrow(-1, 0, *variance_size) : x;
  const auto variance = variance_of.pow(2).mean(-1, /*keepdim=*/true);
  auto result = x * at::rsqrt(variance + epsilon);
  if (weight && weight->defined()) {
    const auto w = on_host(*weight);
    result = result.to(w.scalar_type()) * w;
  }
  return result.to(out_dtype);
}

at::Tensor rms_norm(
    const at::Tensor& x, const std::optional<at::Tensor>& weight, double epsilon,
    std::optional<int64_t> variance_size) {
  auto out = at::empty_like(x);
  launch("rms_norm", x, [x, weight, epsilon, variance_size, out]() {
    const auto host = on_host(x);
    on_host(out).copy_(
        normalized(host.to(at::kFloat), weight, epsilon, variance_size, host.scalar_type()));
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(
    const at::Tensor& x, const at::Tensor& residual, const std::optional<at::Tensor>& weight,
    double epsilon, std::optional<int64_t> variance_size) {
  auto out = at::empty_like(x);
  auto sum = at::empty_like(x);
  launch("fused_add_rms_norm", x,
         [x, residual, weight, epsilon, variance_size, out, sum]() {
           const auto host = on_host(x);
           const auto added = host.to(at::kFloat) + on_host(residual).to(at::kFloat);
           on_host(sum).copy_(added.to(host.scalar_type()));
           on_host(out).copy_(
               normalized(added, weight, epsilon, variance_size, host.scalar_type()));
         });
  return {out, sum};
}

std::vector<int64_t> halved_last(const at::Tensor& x) {
  auto sizes = x.sizes().vec();
  sizes.back() /= 2;
  return sizes;
}

at::Tensor silu_and_mul(const at::Tensor& x) {
  c10::DeviceGuard guard(x.device());
  auto out = at::empty(halved_last(x), x.options());
  launch("silu_and_mul", x, [x, out]() {
    const auto host = on_host(x);
    const auto d = host.size(-1) / 2;
    on_host(out).copy_(at::silu(host.narrow(-1, 0, d)) * host.narrow(-1, d, d));
  });
  return out;
}

// --- rotary embedding, in place -----------------------------------------------------------

void rotate_in_place(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t tokens,
    int64_t head_size, int64_t rotary_dim, bool is_neox) {
  const auto heads = x.reshape({tokens, -1, head_size});  // a view: x is [T, H*D] or [T, H, D]
  const auto rot = heads.narrow(-1, 0, rotary_dim);
  const auto c = cos.unsqueeze(-2).to(x.scalar_type());
  const auto s = sin.unsqueeze(-2).to(x.scalar_type());
  const auto half = rotary_dim / 2;
  const auto x1 = is_neox ? rot.narrow(-1, 0, half) : rot.slice(-1, 0, rotary_dim, 2);
  const auto x2 = is_neox ? rot.narrow(-1, half, half) : rot.slice(-1, 1, rotary_dim, 2);
  const auto o1 = x1 * c - x2 * s;
  const auto o2 = x2 * c + x1 * s;
  x1.copy_(o1);
  x2.copy_(o2);
}

void rotary_embedding(
    const at::Tensor& positions, const at::Tensor& query, const std::optional<at::Tensor>& key,
    int64_t head_size, const at::Tensor& cos_sin_cache, bool is_neox) {
  launch("rotary_embedding", query,
         [positions, query, key, head_size, cos_sin_cache, is_neox]() {
           const auto flat = on_host(positions).flatten();
           const auto cache = on_host(cos_sin_cache);
           const auto rotary_dim = cache.size(-1);
           const auto picked = cache.index_select(0, flat).chunk(2, -1);
           const auto tokens = flat.numel();
           rotate_in_place(on_host(query), picked[0], picked[1], tokens, head_size,
                           rotary_dim, is_neox);
           if (key && key->defined()) {
             rotate_in_place(on_host(*key), picked[0], picked[1], tokens, head_size,
                             rotary_dim, is_neox);
           }
         });
}

// --- paged attention (reference_kernels/paged_attention/contract.py) ----------------------

void reshape_and_cache(
    const at::Tensor& key, const at::Tensor& value, const at::Tensor& key_cache,
    const at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  launch("reshape_and_cache", key,
         [key, value, key_cache, value_cache, slot_mapping]() {
           using at::indexing::Slice;
           const auto slots = on_host(slot_mapping);
           const auto tokens = slots.size(0);
           const auto valid = slots.ge(0);
           const auto kept = slots.masked_select(valid);
           const auto block_size = key_cache.size(2);
           const auto block = kept.div(block_size, "floor");
           const auto offset = kept.remainder(block_size);
           const auto rows = valid.nonzero().squeeze(1);
           auto k_cache = on_host(key_cache);
           auto v_cache = on_host(value_cache);
           k_cache.index_put_({block, Slice(), offset},
                              on_host(key).narrow(0, 0, tokens).index_select(0, rows)
                                  .to(k_cache.scalar_type()));
           v_cache.index_put_({block, Slice(), offset},
                              on_host(value).narrow(0, 0, tokens).index_select(0, rows)
                                  .to(v_cache.scalar_type()));
         });
}

void paged_attention(
    const at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache,
    const at::Tensor& value_cache, const at::Tensor& block_table, const at::Tensor& seq_lens,
    const at::Tensor& query_start_loc, double scale) {
  launch("paged_attention", query,
         [out, query, key_cache, value_cache, block_table, seq_lens, query_start_loc, scale]() {
           const auto q_all = on_host(query);
           const auto k_cache = on_host(key_cache);
           const auto v_cache = on_host(value_cache);
           const auto table = on_host(block_table).to(at::kLong);
           const auto lens = on_host(seq_lens).to(at::kLong);
           const auto starts = on_host(query_start_loc).to(at::kLong);
           auto output = on_host(out);
           const auto num_kv_heads = k_cache.size(1);
           const auto block_size = k_cache.size(2);
           const auto head_size = k_cache.size(3);
           const auto group = q_all.size(1) / num_kv_heads;
           const auto* len = lens.data_ptr<int64_t>();
           const auto* start = starts.data_ptr<int64_t>();
           for (int64_t r = 0; r < lens.size(0); ++r) {
             const auto q_len = start[r + 1] - start[r];
             const auto seq_len = len[r];
             if (q_len <= 0 || seq_len <= 0) {
               continue;
             }
             const auto blocks = table[r].narrow(0, 0, (seq_len + block_size - 1) / block_size);
             const auto gather = [&](const at::Tensor& cache) {
               return cache.index_select(0, blocks)
                   .permute({1, 0, 2, 3})
                   .reshape({num_kv_heads, -1, head_size})
                   .narrow(1, 0, seq_len)
                   .to(at::kFloat)
                   .repeat_interleave(group, 0);
             };
             const auto k = gather(k_cache);
             const auto v = gather(v_cache);
             const auto q = q_all.narrow(0, start[r], q_len).to(at::kFloat).transpose(0, 1) * scale;
             auto logits = at::matmul(q, k.transpose(1, 2));
             const auto positions = at::arange(seq_len - q_len, seq_len, at::kLong);
             const auto visible =
                 at::arange(seq_len, at::kLong).unsqueeze(0).le(positions.unsqueeze(1));
             logits = logits.masked_fill(visible.logical_not(), -INFINITY);
             const auto attended = at::matmul(at::softmax(logits, -1), v);
             output.narrow(0, start[r], q_len)
                 .copy_(attended.transpose(0, 1).to(output.scalar_type()));
           }
         });
}

// --- meta kernels: sizes without running ---------------------------------------------------

at::Tensor rms_norm_meta(
    const at::Tensor& x, const std::optional<at::Tensor>& /*weight*/, double /*epsilon*/,
    std::optional<int64_t> /*variance_size*/) {
  return at::empty_like(x);
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_meta(
    const at::Tensor& x, const at::Tensor& /*residual*/,
    const std::optional<at::Tensor>& /*weight*/, double /*epsilon*/,
    std::optional<int64_t> /*variance_size*/) {
  return {at::empty_like(x), at::empty_like(x)};
}

at::Tensor silu_and_mul_meta(const at::Tensor& x) {
  return at::empty(halved_last(x), x.options());
}

void rotary_embedding_meta(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, int64_t,
    const at::Tensor&, bool) {}

void reshape_and_cache_meta(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const at::Tensor&) {}

void paged_attention_meta(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {}

// The libraries of the kernels, alive for the process (torch keeps their registrations as
// long as the objects live; a static macro could not take the device's name at run time).
std::vector<std::unique_ptr<torch::Library>> kernel_libraries;

void register_kernels(const std::string& ns) {
  TORCH_CHECK(kernel_libraries.empty(), "the test device's kernels are registered already");
  kernel_namespace = ns;
  auto defs = std::make_unique<torch::Library>(
      torch::Library::DEF, ns, std::nullopt, __FILE__, __LINE__);
  defs->def("rms_norm(Tensor x, Tensor? weight, float epsilon, int? variance_size=None) -> Tensor");
  defs->def(
      "fused_add_rms_norm(Tensor x, Tensor residual, Tensor? weight, float epsilon, "
      "int? variance_size=None) -> (Tensor, Tensor)");
  defs->def("silu_and_mul(Tensor x) -> Tensor");
  defs->def(
      "rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!)? key, int head_size, "
      "Tensor cos_sin_cache, bool is_neox) -> ()");
  defs->def(
      "reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, "
      "Tensor(b!) value_cache, Tensor slot_mapping) -> ()");
  defs->def(
      "paged_attention(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, "
      "Tensor block_table, Tensor seq_lens, Tensor query_start_loc, float scale) -> ()");
  auto device = std::make_unique<torch::Library>(
      torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  device->impl("rms_norm", TORCH_FN(rms_norm));
  device->impl("fused_add_rms_norm", TORCH_FN(fused_add_rms_norm));
  device->impl("silu_and_mul", TORCH_FN(silu_and_mul));
  device->impl("rotary_embedding", TORCH_FN(rotary_embedding));
  device->impl("reshape_and_cache", TORCH_FN(reshape_and_cache));
  device->impl("paged_attention", TORCH_FN(paged_attention));
  auto meta = std::make_unique<torch::Library>(
      torch::Library::IMPL, ns, c10::DispatchKey::Meta, __FILE__, __LINE__);
  meta->impl("rms_norm", TORCH_FN(rms_norm_meta));
  meta->impl("fused_add_rms_norm", TORCH_FN(fused_add_rms_norm_meta));
  meta->impl("silu_and_mul", TORCH_FN(silu_and_mul_meta));
  meta->impl("rotary_embedding", TORCH_FN(rotary_embedding_meta));
  meta->impl("reshape_and_cache", TORCH_FN(reshape_and_cache_meta));
  meta->impl("paged_attention", TORCH_FN(paged_attention_meta));
  kernel_libraries.push_back(std::move(defs));
  kernel_libraries.push_back(std::move(device));
  kernel_libraries.push_back(std::move(meta));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(npu_test, m) {
  m.def("register_kernels(str ns) -> ()", &register_kernels);
}

}  // namespace npu_test

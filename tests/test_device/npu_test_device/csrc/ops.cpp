// The test device's operators: the few a device must own, and one fallback for all others.
//
// Owned (TORCH_LIBRARY_IMPL(aten, PrivateUse1)): what makes and reshapes device tensors and
// moves bytes between the device and the host - empty, empty_strided, as_strided, view,
// _reshape_alias, resize_, set_, _copy_from, _copy_from_and_resize, _local_scalar_dense.
//
// Everything else (TORCH_LIBRARY_IMPL(_, PrivateUse1) fallback, every namespace) runs on host
// views of the same storage: each npu tensor argument becomes a CPU tensor over the same
// bytes, the operator's CPU kernel runs, and each result comes back to the device - the
// argument itself for in-place and out= results, a device view over the same storage for
// view results, a new device tensor (the device's allocator, the bytes copied) otherwise.
// Nothing is copied to run an operator, so writes through views (a KV cache, a slice of a
// buffer) land in device memory as on real hardware. Each dispatch to the device is
// counted by operator name (npu_test::dispatch_counts), so a test can see what ran here,
// and each that the fallback served once more as "cpu_fallback:<name>": the operators a
// real device's extension must implement for the same work.
//
// npu_test::host_view(t) gives the same host view to Python (the collectives use it).
//
// On a stream other than the default one (streams.cpp), an operator or copy is launched the
// same way, its work queued on the stream's thread instead of recorded. While a graph
// captures (graphs.cpp), an operator or copy launched on the capturing stream
// is recorded, not run: its results are allocated now (from the graph's pool), sized by the
// operator's meta kernel as a GPU runtime sizes them on the host, and each replay runs the
// operator again into the same memory. Operators that only make views run at once (no work
// is launched); reading a value to the host, or copying to or from pageable host memory,
// fails as it does on a GPU.

#include "runtime.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace npu_test {

namespace {

// --- dispatch counts ---------------------------------------------------------------------

std::mutex counts_mutex;
std::map<std::string, int64_t> counts;

std::string key_of(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void count(const c10::OperatorName& name) {
  count_call(key_of(name));
}

void count(const char* name) {
  count_call(name);
}

std::tuple<std::vector<std::string>, std::vector<int64_t>> dispatch_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  std::vector<std::string> names;
  std::vector<int64_t> values;
  for (const auto& [name, value] : counts) {
    names.push_back(name);
    values.push_back(value);
  }
  return {names, values};
}

void reset_dispatch_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  counts.clear();
}

// --- host views --------------------------------------------------------------------------

// What a host view holds: the device storage (alive as long as the view) and the host's
// access to its bytes (runtime.h: device memory is closed to the host otherwise).
struct HostWindow {
  explicit HostWindow(const c10::Storage& device) : storage(device), access(device.data()) {}
  c10::Storage storage;
  HostAccess access;
};

void release_host_window(void* ctx) {
  delete static_cast<HostWindow*>(ctx);
}

// A CPU tensor over the bytes of an npu tensor: same storage offset, sizes and strides,
// readable and writable while it lives. Its storage is resizable through the CPU allocator,
// so a CPU kernel that grows an output leaves the device's bytes alone and the fallback sees
// the growth (write_back).
at::Tensor host_view_of(const at::Tensor& tensor) {
  const auto& storage = tensor.storage();
  c10::DataPtr bytes(
      storage.mutable_data(), new HostWindow(storage), &release_host_window,
      c10::Device(c10::DeviceType::CPU));
  c10::Storage host(
      c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(bytes),
      c10::GetCPUAllocator(), /*resizable=*/true);
  auto view = at::empty({0}, tensor.options().device(c10::kCPU));
  view.set_(host, tensor.storage_offset(), tensor.sizes(), tensor.strides());
  return view;
}

at::Tensor to_host(const at::Tensor& tensor) {
  return tensor.defined() && tensor.is_privateuseone() ? host_view_of(tensor) : tensor;
}

at::Tensor host_view(const at::Tensor& tensor) {
  return to_host(tensor);
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().data() == b.storage().data();
}

// A host view a CPU kernel reallocated (resized) no longer holds the device's bytes: copy
// its result back into the device tensor, grown to match.
void write_back(const at::Tensor& device, const at::Tensor& host) {
  if (same_bytes(host, host_view_of(device)) && host.sizes() == device.sizes() &&
      host.strides() == device.strides()) {
    return;
  }
  const auto& impl = device.unsafeGetTensorImpl();
  const auto needed = (host.storage_offset() + host.numel()) * host.itemsize();
  if (device.storage().nbytes() < static_cast<size_t>(needed)) {
    resize_storage(device.storage(), needed);
  }
  impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
  host_view_of(device).copy_(host);
}

// One argument of the call, with what the device side must see again after it.
struct Argument {
  size_t position;
  at::Tensor device;
  at::Tensor host;
};

class HostCall {
 public:
  // `into`: results written into these device tensors (a replayed graph node), by return.
  HostCall(
      const c10::OperatorHandle& op, torch::jit::Stack* stack,
      const std::vector<c10::IValue>* into = nullptr)
      : op_(op), stack_(stack), into_(into) {}

  void run() {
    const auto& schema = op_.schema();
    const auto first = stack_->size() - schema.arguments().size();
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      move_to_host(i, (*stack_)[first + i]);
    }
    op_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack_);
    for (auto& [device, host] : generators_) {
      device.set_state(host.get_state());
    }
    for (const auto& argument : arguments_) {
      const auto* alias = schema.arguments()[argument.position].alias_info();
      if (alias != nullptr && alias->isWrite()) {
        write_back(argument.device, argument.host);
      }
    }
    const auto results = stack_->size() - schema.returns().size();
    for (size_t i = 0; i < schema.returns().size(); ++i) {
      auto& value = (*stack_)[results + i];
      const c10::IValue* into = into_ != nullptr ? &(*into_)[i] : nullptr;
      if (value.isTensor()) {
        value = to_device(
            value.toTensor(), schema.returns()[i].alias_info(),
            into != nullptr && into->isTensor() ? into->toTensor() : at::Tensor());
      } else if (value.isTensorList()) {
        auto list = value.toTensorList();
        for (size_t j = 0; j < list.size(); ++j) {
          list[j] = to_device(
              list[j], schema.returns()[i].alias_info(),
              into != nullptr && into->isTensorList() ? into->toTensorList()[j] : at::Tensor());
        }
        value = list;
      }
    }
  }

 private:
  at::Tensor host_of(size_t position, const at::Tensor& tensor) {
    if (!tensor.defined() || !tensor.is_privateuseone()) {
      return tensor;
    }
    if (!device_) {
      device_ = tensor.device();
    }
    auto host = host_view_of(tensor);
    arguments_.push_back({position, tensor, host});
    return host;
  }

  void move_to_host(size_t position, c10::IValue& value) {
    if (value.isTensor()) {
      value = host_of(position, value.toTensor());
    } else if (value.isTensorList()) {
      auto list = value.toTensorList();
      c10::List<at::Tensor> host;
      for (const at::Tensor& tensor : list) {
        host.push_back(host_of(position, tensor));
      }
      value = host;
    } else if (value.isOptionalTensorList()) {
      auto list = value.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> host;
      for (const std::optional<at::Tensor>& tensor : list) {
        host.push_back(tensor ? std::optional(host_of(position, *tensor)) : std::nullopt);
      }
      value = host;
    } else if (value.isDevice() && value.toDevice().is_privateuseone()) {
      if (!device_) {
        device_ = value.toDevice();
      }
      value = c10::Device(c10::kCPU);
    } else if (value.isGenerator() && value.toGenerator().device().is_privateuseone()) {
      // The device's generators are host generators (runtime.cpp): the CPU kernel draws
      // from one with the same state, which is handed back afterwards.
      auto device = value.toGenerator();
      auto host = at::make_generator<at::CPUGeneratorImpl>();
      host.set_state(device.get_state());
      generators_.emplace_back(device, host);
      value = host;
    }
  }

  at::Tensor to_device(
      const at::Tensor& result, const c10::AliasInfo* alias, const at::Tensor& into) {
    if (!result.defined() || !result.is_cpu() || !device_) {
      return result;
    }
    if (into.defined()) {
      host_view_of(into).copy_(result);
      return into;
    }
    for (const auto& argument : arguments_) {
      if (argument.host.defined() && result.is_same(argument.host)) {
        return argument.device;  // in-place and out= results: the argument itself
      }
    }
    if (alias != nullptr) {  // a view of an argument: the same bytes, seen on the device
      for (const auto& argument : arguments_) {
        if (same_bytes(result, argument.host)) {
          return argument.device.as_strided(
              result.sizes(), result.strides(), result.storage_offset());
        }
      }
    }
    c10::DeviceGuard guard(*device_);
    auto options = result.options().device(*device_);
    auto made = result.is_non_overlapping_and_dense()
        ? at::empty_strided(result.sizes(), result.strides(), options)
        : at::empty(result.sizes(), options);
    host_view_of(made).copy_(result);
    return made;
  }

  const c10::OperatorHandle& op_;
  torch::jit::Stack* stack_;
  const std::vector<c10::IValue>* into_;
  std::optional<c10::Device> device_;
  std::vector<Argument> arguments_;
  std::vector<std::pair<at::Generator, at::Generator>> generators_;
};

// --- graph capture: record instead of run ---------------------------------------------------

std::optional<c10::Device> device_of_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto first = stack.size() - op.schema().arguments().size();
  for (size_t i = first; i < stack.size(); ++i) {
    const auto& value = stack[i];
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().is_privateuseone()) {
      return value.toTensor().device();
    }
    if (value.isTensorList()) {
      for (const at::Tensor& tensor : value.toTensorList()) {
        if (tensor.defined() && tensor.is_privateuseone()) {
          return tensor.device();
        }
      }
    }
    if (value.isDevice() && value.toDevice().is_privateuseone()) {
      return value.toDevice();
    }
  }
  return std::nullopt;
}

at::Tensor meta_like(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.is_privateuseone()) {
    return tensor;
  }
  const auto elements = (static_cast<int64_t>(tensor.storage().nbytes()) + tensor.itemsize() - 1) /
      tensor.itemsize();
  return at::empty({elements}, tensor.options().device(c10::kMeta))
      .as_strided(tensor.sizes(), tensor.strides(), tensor.storage_offset());
}

c10::IValue meta_of(const c10::IValue& value) {
  if (value.isTensor()) {
    return meta_like(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> meta;
    for (const at::Tensor& tensor : value.toTensorList()) {
      meta.push_back(meta_like(tensor));
    }
    return meta;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> meta;
    for (const std::optional<at::Tensor>& tensor : value.toOptionalTensorList()) {
      meta.push_back(tensor ? std::optional(meta_like(*tensor)) : std::nullopt);
    }
    return meta;
  }
  if (value.isDevice() && value.toDevice().is_privateuseone()) {
    return c10::Device(c10::kMeta);
  }
  return value;
}

at::Tensor device_like(const at::Tensor& meta, c10::Device device) {
  c10::DeviceGuard guard(device);
  auto options = meta.options().device(device);
  return meta.is_non_overlapping_and_dense()
      ? at::empty_strided(meta.sizes(), meta.strides(), options)
      : at::empty(meta.sizes(), options);
}

std::string name_of(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// Launch `op` without running it, while this thread captures on `device` or its current
// stream there is not the default one: its results allocated now (during a capture, from
// the graph's pool), its work recorded into the graph (run at each replay into the same
// memory) or queued on the stream (streams.cpp). False where the results cannot be sized
// without running it (a queued launch then waits and runs it; a capture refuses it).
bool defer_call(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device) {
  const bool capture = recording(device.index());
  const auto& schema = op.schema();
  const auto first = stack->size() - schema.arguments().size();
  const auto alias_of = [](const c10::Argument& argument) { return argument.alias_info(); };
  bool writes = false;
  for (const auto& argument : schema.arguments()) {
    writes = writes || (alias_of(argument) != nullptr && alias_of(argument)->isWrite());
  }
  bool views = false;
  for (const auto& result : schema.returns()) {
    views = views || (alias_of(result) != nullptr && !alias_of(result)->isWrite());
  }
  if (views && !writes) {  // a view: new sizes and strides over the same bytes, no work
    HostCall(op, stack).run();
    return true;
  }
  std::vector<c10::IValue> arguments(stack->begin() + first, stack->end());
  std::vector<c10::IValue> results(schema.returns().size());
  bool needs_sizes = false;
  for (const auto& result : schema.returns()) {
    needs_sizes = needs_sizes || alias_of(result) == nullptr;
  }
  // Sized on the host at launch, as a GPU runtime does: new results, and the out= arguments
  // an operator resizes (an out= kernel resizes its output before it launches its work).
  torch::jit::Stack sized;
  bool sized_ok = false;
  if (needs_sizes || writes) {
    for (const auto& value : arguments) {
      sized.push_back(meta_of(value));
    }
    try {
      op.callBoxed(&sized);
      sized_ok = true;
    } catch (const std::exception& error) {  // no meta kernel, or a data-dependent size
      if (!needs_sizes) {
        // written in place only: launched into the arguments as they are
      } else if (!capture) {
        return false;
      } else {
        const std::string why = error.what();
        refuse_during_capture(
            "launching " + name_of(schema.operator_name()) +
            ", whose results cannot be sized without running it (" +
            why.substr(0, why.find('\n')) + ")");
      }
    }
  }
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    const auto* alias = alias_of(schema.returns()[i]);
    const auto& meta = sized_ok ? sized[sized.size() - schema.returns().size() + i] : c10::IValue();
    if (alias != nullptr) {  // an argument written in place (out=, foo_): the argument itself
      for (size_t j = 0; j < arguments.size(); ++j) {
        const auto* written = alias_of(schema.arguments()[j]);
        if (written != nullptr && written->beforeSets() == alias->beforeSets()) {
          results[i] = arguments[j];
          if (meta.isTensor() && arguments[j].isTensor() &&
              arguments[j].toTensor().sizes() != meta.toTensor().sizes()) {
            arguments[j].toTensor().resize_(meta.toTensor().sizes());
          }
        }
      }
      continue;
    }
    if (meta.isTensor()) {
      results[i] = device_like(meta.toTensor(), device);
    } else if (meta.isTensorList()) {
      c10::List<at::Tensor> made;
      for (const at::Tensor& tensor : meta.toTensorList()) {
        made.push_back(device_like(tensor, device));
      }
      results[i] = made;
    } else {
      results[i] = meta;
    }
  }
  std::vector<c10::IValue> into;
  for (size_t i = 0; i < results.size(); ++i) {
    into.push_back(alias_of(schema.returns()[i]) == nullptr ? results[i] : c10::IValue());
  }
  launch(device.index(), name_of(schema.operator_name()), [op, arguments, into]() {
    torch::jit::Stack replayed(arguments.begin(), arguments.end());
    HostCall(op, &replayed, &into).run();
  });
  torch::jit::drop(*stack, schema.arguments().size());
  for (auto& result : results) {
    stack->push_back(std::move(result));
  }
  return true;
}

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto key = key_of(op.schema().operator_name());
  count_call(key);
  count_call("cpu_fallback:" + key);
  if (const auto device = device_of_call(op, *stack)) {
    const auto index = device->index();
    if (deferred(index)) {
      if (defer_call(op, stack, *device)) {
        return;
      }
      synchronize_stream(index, current_stream_id(index));  // data-dependent: wait, then run
    }
  }
  HostCall(op, stack).run();
}

// A copy launched while this thread captures or on a stream other than the default one:
// recorded or queued where a GPU launches it (device memory; pinned host memory, in a
// capture always, on a stream without blocking). Where a GPU would synchronize (pageable
// host memory, or a blocking copy on a stream) a capture refuses it, and a stream's copy
// waits for the stream's work and runs now (false).
bool launched_copy(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const auto index = (self.is_privateuseone() ? self : dst).device().index();
  if (!deferred(index)) {
    return false;
  }
  const bool capture = recording(index);
  for (const auto* host : {&self, &dst}) {
    if (host->is_privateuseone()) {
      continue;
    }
    const bool pinned = is_pinned_host(host->data_ptr());
    if (capture && !pinned) {
      refuse_during_capture(
          host == &dst ? "copying to pageable host memory (a host sync)"
                       : "copying from pageable host memory (a host sync)");
    }
    if (!capture && !(pinned && non_blocking)) {
      synchronize_stream(index, current_stream_id(index));
      return false;
    }
  }
  launch(index, "aten::_copy_from", [self, dst]() { to_host(dst).copy_(to_host(self)); });
  return true;
}

// --- the operators the device owns ---------------------------------------------------------

c10::DeviceIndex index_of(std::optional<c10::Device> device) {
  return device && device->has_index() ? device->index() : current_device();
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
    std::optional<bool> /*pin_memory*/, std::optional<c10::MemoryFormat> memory_format) {
  count("aten::empty.memory_format");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  return at::detail::empty_generic(
      size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
    std::optional<bool> /*pin_memory*/) {
  count("aten::empty_strided");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index_of(device)));
  return at::detail::empty_strided_generic(
      size, stride, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::dtype_or_default(dtype));
}

at::Tensor as_strided(
    const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
    std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(
    const at::Tensor& self, c10::IntArrayRef size,
    std::optional<c10::MemoryFormat> memory_format) {
  count("aten::resize_");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  impl->empty_tensor_restride(memory_format.value_or(c10::MemoryFormat::Contiguous));
  const auto needed = (self.storage_offset() + self.numel()) * self.itemsize();
  if (self.storage().nbytes() < static_cast<size_t>(needed)) {
    resize_storage(self.storage(), needed);
  }
  return self;
}

at::Tensor& set_storage(
    at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  count("aten::set_.source_Storage_storage_offset");
  TORCH_CHECK(source.device().is_privateuseone(), "set_: the storage is not ", c10::get_privateuse1_backend(), " memory");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, stride, storage_offset);
  return self;
}

at::Tensor& set_whole_storage(at::Tensor& self, c10::Storage source) {
  const auto numel = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {1});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(
      self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  count("aten::_copy_from");
  if (launched_copy(self, dst, non_blocking)) {
    return dst;
  }
  to_host(dst).copy_(to_host(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  count("aten::_copy_from_and_resize");
  dst.resize_(self.sizes());
  if (launched_copy(self, dst, /*non_blocking=*/false)) {
    return dst;
  }
  to_host(dst).copy_(to_host(self));
  return dst;
}

void manual_seed(int64_t device, int64_t seed) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  check_device(index);
  auto generator = at::detail::getPrivateUse1Hooks().getDefaultGenerator(index);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(static_cast<uint64_t>(seed));
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  count("aten::_local_scalar_dense");
  const auto index = self.device().index();
  if (recording(index)) {
    refuse_during_capture("reading a value to the host (.item(), a host sync)");
  }
  synchronize_stream(index, current_stream_id(index));  // the value waits for its stream
  return at::_local_scalar_dense(to_host(self));
}

}  // namespace

at::Tensor on_host(const at::Tensor& tensor) {
  return to_host(tensor);
}

void count_call(const std::string& name) {
  std::lock_guard<std::mutex> lock(counts_mutex);
  ++counts[name];
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_whole_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

TORCH_LIBRARY(npu_test, m) {
  m.def("host_view(Tensor(a) self) -> Tensor(a)");
  m.def("dispatch_counts() -> (str[], int[])", &dispatch_counts);
  m.def("reset_dispatch_counts() -> ()", &reset_dispatch_counts);
  m.def("manual_seed(int device, int seed) -> ()", &manual_seed);
}

TORCH_LIBRARY_IMPL(npu_test, PrivateUse1, m) {
  m.impl("host_view", host_view);
}

TORCH_LIBRARY_IMPL(npu_test, CPU, m) {
  m.impl("host_view", host_view);
}

}  // namespace npu_test

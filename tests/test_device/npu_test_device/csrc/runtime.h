// The test device's runtime, as the operators (ops.cpp) see it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace npu_test {

c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
void check_device(c10::DeviceIndex index);
int64_t device_capacity();

// The allocator every npu tensor's storage comes from.
at::Allocator* device_allocator();

// Grow (with the device's allocator, keeping the bytes) or shrink a storage in place.
void resize_storage(const c10::Storage& storage, size_t nbytes);

// Allocate device memory outside any graph pool (the pools of graphs.cpp are made of it).
at::DataPtr allocate_device_memory(c10::DeviceIndex device, size_t nbytes);

// Whether `ptr` is in the device's pinned host memory.
bool is_pinned_host(const void* ptr);

// Device memory the host cannot read: each block is mapped without access and opened only
// while a HostAccess to it lives (a host view's lifetime, ops.cpp: the operators, the
// kernels and the copies reach the device's bytes through host views only). A host read
// or write of a block outside one fails with a message naming the device memory it hit.
// `device_bytes` is a block's start (a storage's data); any other pointer is left alone.
class HostAccess {
 public:
  explicit HostAccess(const void* device_bytes);
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  const void* base_;
  uint64_t serial_;  // the block's allocation, so that a block freed and mapped again at
                     // the same address is not closed by an access to its predecessor
};

// This thread's current stream on `device` (its id: 0 is the default stream).
c10::StreamId current_stream_id(c10::DeviceIndex device);

// A CPU tensor over the same bytes as an npu tensor (any other tensor as it is): how the
// device's kernels (kernels.cpp) and its operator fallback (ops.cpp) reach its memory.
at::Tensor on_host(const at::Tensor& tensor);

// --- graph capture (graphs.cpp) ---
// Whether work on `device` launched now, from this thread on its current stream, goes into
// the graph being captured instead of running.
bool recording(c10::DeviceIndex device);
// Record `work` (named `name`) into the capture; it runs at each replay.
void record(const std::string& name, std::function<void()> work);
// An allocation on `device` while a graph captures there: from the graph's pool, or a
// refusal that invalidates the capture; std::nullopt when no capture concerns it.
std::optional<at::DataPtr> allocate_during_capture(c10::DeviceIndex device, size_t nbytes);
// Throw (and invalidate the capture) where this thread is capturing: `what` is not allowed.
void refuse_during_capture(const std::string& what);

// --- streams (streams.cpp) ---
// Whether work launched now from this thread on `device` does not run at once: a capture
// records it, or its current stream (not the default one) queues it.
bool deferred(c10::DeviceIndex device);
// Queue `work` on `stream` of `device`: its thread runs it after the work queued before.
void enqueue(c10::DeviceIndex device, c10::StreamId stream, std::function<void()> work);
// Queue a marker on `stream`: when its thread reaches it, `reached` runs in the same step
// that counts the marker done, so whoever sees one (an event complete) sees the other (the
// stream idle up to it). `reached` must not wait nor launch.
void enqueue_marker(c10::DeviceIndex device, c10::StreamId stream, std::function<void()> reached);
// Launch `work` from this thread on `device` as a GPU launch goes: recorded (as `name`) into
// the graph this thread captures there, queued on its current stream, or (the default
// stream) run now.
void launch(c10::DeviceIndex device, const std::string& name, std::function<void()> work);
// Wait for the work queued so far (the default stream's never waits: it ran at launch).
void synchronize_stream(c10::DeviceIndex device, c10::StreamId stream);
void synchronize_device(c10::DeviceIndex device);
bool stream_idle(c10::DeviceIndex device, c10::StreamId stream);
// Run `wait` (a blocking wait for a stream's work) with Python's GIL released.
void host_wait(const std::function<void()>& wait);

// Count one call under `name` (operators and runtime hooks alike; npu_test::dispatch_counts).
void count_call(const std::string& name);

}  // namespace npu_test

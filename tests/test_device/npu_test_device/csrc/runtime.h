// The test device's runtime, as the operators (ops.cpp) see it.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

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

// Count one call under `name` (operators and runtime hooks alike; npu_test::dispatch_counts).
void count_call(const std::string& name);

}  // namespace npu_test

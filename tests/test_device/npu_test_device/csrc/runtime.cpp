// The test device's runtime: what torch asks of a PrivateUse1 backend before any operator runs.
//
// Memory is host memory (the device is a stand-in), but it is the device's own: every byte a
// tensor on `npu` owns comes from DeviceMemory below, counted per device against a capacity,
// so `data_ptr`, views, strides, copies, memory statistics and out-of-memory behave as on a
// device with its own memory. And as on a device the host cannot read it: each block is a
// mapping of its own without access (mmap PROT_NONE), opened (mprotect) only while a
// HostAccess to it lives - the device's operators, kernels and copies (ops.cpp, kernels.cpp)
// - so a stray host read or write of device memory stops the process with a message naming
// the block (SIGSEGV handler below), where plain host memory would have answered. Work on a
// stream other than the default one runs on that stream's thread (streams.cpp); events
// complete when their stream reaches them.
//
// Each piece names the torch hook it serves:
//   DeviceMemory      c10::DeviceAllocator, REGISTER_ALLOCATOR(PrivateUse1): tensors' storage,
//                     torch.accelerator.memory_* / get_memory_info
//   PinnedMemory      at::HostAllocator, REGISTER_HOST_ALLOCATOR(PrivateUse1): pin_memory(),
//                     is_pinned(), torch.accelerator.empty_host_cache
//   Guard             c10::impl::DeviceGuardImplInterface, C10_REGISTER_GUARD_IMPL(PrivateUse1):
//                     current device, streams, events, synchronize, device count, capability
//   Generator         at::CPUGeneratorImpl on PrivateUse1: torch.Generator(device="npu")
//   Hooks             at::PrivateUse1HooksInterface, RegisterPrivateUse1HooksInterface:
//                     availability, generators, pinned memory, device of a pointer

#include "runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace npu_test {

namespace {

constexpr int64_t kDefaultDeviceCount = 2;
constexpr int64_t kDefaultCapacity = int64_t{4} << 30;  // 4 GiB a device

int64_t env_int(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? fallback : std::stoll(text);
}

thread_local c10::DeviceIndex current_device_index = 0;

}  // namespace

c10::DeviceIndex device_count() {
  static const auto count = static_cast<c10::DeviceIndex>(
      env_int("NPU_TEST_DEVICE_COUNT", kDefaultDeviceCount));
  return count;
}

int64_t device_capacity() {
  static const int64_t capacity = env_int("NPU_TEST_DEVICE_MEMORY", kDefaultCapacity);
  return capacity;
}

c10::DeviceIndex current_device() {
  return current_device_index;
}

void check_device(c10::DeviceIndex index) {
  TORCH_CHECK(
      index >= 0 && index < device_count(), c10::get_privateuse1_backend(), ":", static_cast<int>(index),
      " does not exist: this test device has ", static_cast<int>(device_count()),
      " devices (NPU_TEST_DEVICE_COUNT)");
}

void set_device(c10::DeviceIndex index) {
  check_device(index);
  current_device_index = index;
}

// --- device memory -----------------------------------------------------------------------

namespace {

void free_device_memory(void* ptr);

struct DeviceMemory final : c10::DeviceAllocator {
  DeviceMemory() : stats_(static_cast<size_t>(device_count())) {}

  struct Block {
    c10::DeviceIndex device;
    size_t nbytes;
    size_t mapped;  // whole pages
    uint64_t serial;
    int64_t open;  // HostAccess objects alive
  };

  at::DataPtr allocate(size_t nbytes) override {
    const auto device = current_device();
    if (nbytes > 0) {
      if (auto pooled = allocate_during_capture(device, nbytes)) {
        return std::move(*pooled);
      }
    }
    return allocate_outside_pools(device, nbytes);
  }
  at::DataPtr allocate_outside_pools(c10::DeviceIndex device, size_t nbytes) {
    void* data = nullptr;
    if (nbytes > 0) {
      count_call("runtime::DeviceAllocator::allocate");
      std::lock_guard<std::mutex> lock(mutex_);
      auto& stats = stats_[device];
      const auto in_use = stats.allocated_bytes[kAll].current;
      TORCH_CHECK_WITH(
          OutOfMemoryError, in_use + static_cast<int64_t>(nbytes) <= device_capacity(),
          c10::get_privateuse1_backend(), ":", static_cast<int>(device), " is out of memory: ", nbytes,
          " bytes asked, ", in_use, " of ", device_capacity(), " in use");
      const size_t mapped = (nbytes + page_size() - 1) / page_size() * page_size();
      data = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      TORCH_CHECK(data != MAP_FAILED, "the host could not back ", nbytes, " bytes of ", c10::get_privateuse1_backend(), " memory");
      blocks_[data] = {device, nbytes, mapped, next_serial_++, 0};
      for (auto* stat : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                         &stats.requested_bytes}) {
        (*stat)[kAll].increase(nbytes);
      }
      for (auto* stat : {&stats.allocation, &stats.segment, &stats.active}) {
        (*stat)[kAll].increase(1);
      }
      stats.num_device_alloc++;
    }
    return {data, data, &free_device_memory, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  void release(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto block = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(block != blocks_.end(), "npu memory freed twice or never allocated");
    auto& stats = stats_[block->second.device];
    const size_t nbytes = block->second.nbytes;
    for (auto* stat : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                       &stats.requested_bytes}) {
      (*stat)[kAll].decrease(nbytes);
    }
    for (auto* stat : {&stats.allocation, &stats.segment, &stats.active}) {
      (*stat)[kAll].decrease(1);
    }
    stats.num_device_free++;
    const size_t mapped = block->second.mapped;
    blocks_.erase(block);
    munmap(ptr, mapped);
  }

  // HostAccess: the block starting at `base` readable and writable while one is open.
  uint64_t open(const void* base) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto block = blocks_.find(const_cast<void*>(base));
    if (block == blocks_.end()) {
      return 0;  // not a block's start: pinned host memory, or no device memory
    }
    if (block->second.open++ == 0) {
      TORCH_CHECK(mprotect(block->first, block->second.mapped, PROT_READ | PROT_WRITE) == 0,
                  "mprotect failed on ", c10::get_privateuse1_backend(), " memory");
    }
    return block->second.serial;
  }

  void close(const void* base, uint64_t serial) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto block = blocks_.find(const_cast<void*>(base));
    if (block == blocks_.end() || block->second.serial != serial) {
      return;  // freed while open (its mapping is gone)
    }
    if (--block->second.open == 0) {
      mprotect(block->first, block->second.mapped, PROT_NONE);
    }
  }

  // For the SIGSEGV handler: the block holding `address`, without waiting for the lock
  // (the faulting thread may hold it); false when it cannot tell.
  bool find_unlocked(const void* address, Block* found) {
    if (!mutex_.try_lock()) {
      return false;
    }
    const auto* block = holding(address, /*whole_pages=*/true);
    if (block != nullptr) {
      *found = *block;
    }
    mutex_.unlock();
    return block != nullptr;
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_device_memory;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    HostAccess to(dest), from(src);
    std::memcpy(dest, src, count);
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t /*pool*/) override {  // no cache: freed memory goes back
    count_call("runtime::DeviceAllocator::emptyCache");
  }

  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    count_call("runtime::DeviceAllocator::getDeviceStats");
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_[device];
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat(stats_[device], [](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
    stats_[device].num_device_alloc = 0;
    stats_[device].num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat(stats_[device], [](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    count_call("runtime::DeviceAllocator::getMemoryInfo");
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto used = stats_[device].allocated_bytes[kAll].current;
    return {static_cast<size_t>(device_capacity() - used),
            static_cast<size_t>(device_capacity())};
  }

  c10::DeviceIndex device_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto* block = holding(ptr, /*whole_pages=*/false);
    TORCH_CHECK(block != nullptr, "pointer ", ptr, " is not in the memory of any ", c10::get_privateuse1_backend(), " device");
    return block->device;
  }

 private:
  // The block holding `address` (the caller holds mutex_): in its bytes, or with
  // `whole_pages` anywhere in the pages mapped for it; nullptr where none does.
  const Block* holding(const void* address, bool whole_pages) const {
    for (const auto& [base, block] : blocks_) {
      const auto* begin = static_cast<const char*>(base);
      if (address >= begin && address < begin + (whole_pages ? block.mapped : block.nbytes)) {
        return &block;
      }
    }
    return nullptr;
  }

  static constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

  static size_t page_size() {
    static const auto size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return size;
  }

  static void for_each_stat(
      c10::CachingDeviceAllocator::DeviceStats& stats, void (*visit)(c10::CachingAllocator::Stat&)) {
    for (auto* array : {&stats.allocation, &stats.segment, &stats.active,
                        &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.requested_bytes}) {
      visit((*array)[kAll]);
    }
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
  std::vector<c10::CachingDeviceAllocator::DeviceStats> stats_;
  uint64_t next_serial_ = 1;
};

DeviceMemory device_memory;

// --- a host access to device memory: the message, then the fault as it would be -----------

struct sigaction previous_segv_action;

void write_text(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void write_number(uint64_t value, int base) {
  char digits[32];
  int at = 32;
  do {
    digits[--at] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && at > 0);
  ssize_t ignored = write(STDERR_FILENO, digits + at, 32 - at);
  (void)ignored;
}

void on_segv(int number, siginfo_t* info, void* context) {
  DeviceMemory::Block block{};
  if (device_memory.find_unlocked(info->si_addr, &block)) {
    write_text("\nnpu_test_device: the host read or wrote device memory at 0x");
    write_number(reinterpret_cast<uintptr_t>(info->si_addr), 16);
    write_text(" (a block of ");
    write_number(block.nbytes, 10);
    write_text(" bytes on ");
    write_text(c10::get_privateuse1_backend().c_str());
    write_text(":");
    write_number(static_cast<uint64_t>(block.device), 10);
    write_text("). The host reaches device memory only through the device's copies "
               "(tensor.cpu(), tensor.to(...), copy_) or its operators, never through a "
               "pointer (data_ptr()) read on the host.\n");
  }
  // The fault as it would have been without this handler: the previous one, or the default.
  if ((previous_segv_action.sa_flags & SA_SIGINFO) != 0 &&
      previous_segv_action.sa_sigaction != nullptr) {
    previous_segv_action.sa_sigaction(number, info, context);
    return;
  }
  if (previous_segv_action.sa_handler != SIG_DFL && previous_segv_action.sa_handler != SIG_IGN &&
      previous_segv_action.sa_handler != nullptr) {
    previous_segv_action.sa_handler(number);
    return;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(number, &fallback, nullptr);  // returning runs the access again: the default action
}

const bool segv_handler_installed = [] {
  struct sigaction action {};
  action.sa_sigaction = &on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  return sigaction(SIGSEGV, &action, &previous_segv_action) == 0;
}();

void free_device_memory(void* ptr) {
  device_memory.release(ptr);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &device_memory);

// --- pinned host memory ------------------------------------------------------------------

void free_pinned_memory(void* ptr);

struct PinnedMemory final : at::HostAllocator {
  at::DataPtr allocate(size_t nbytes) override {
    void* data = nullptr;
    if (nbytes > 0) {
      count_call("runtime::HostAllocator::allocate");
      data = std::malloc(nbytes);
      TORCH_CHECK(data != nullptr, "could not pin ", nbytes, " bytes of host memory");
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[data] = nbytes;
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(nbytes);
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(nbytes);
    }
    return {data, data, &free_pinned_memory, c10::Device(c10::DeviceType::CPU)};
  }

  void release(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto block = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(block != blocks_.end(), "pinned memory freed twice");
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(block->second);
    blocks_.erase(block);
    std::free(ptr);
  }

  bool owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [base, nbytes] : blocks_) {
      const auto* begin = static_cast<const char*>(base);
      if (ptr >= begin && ptr < begin + nbytes) {
        return true;
      }
    }
    return false;
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_pinned_memory;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    return true;  // queued work holds its tensors: a block is freed after its last use
  }

  void empty_cache() override {}

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {}

  void reset_peak_stats() override {}

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> blocks_;
  at::HostStats stats_;
};

PinnedMemory pinned_memory;

void free_pinned_memory(void* ptr) {
  pinned_memory.release(ptr);
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned_memory);

// --- device guard: devices, streams, events ----------------------------------------------

// An event: recorded on a stream, complete when the stream's thread reaches it (at once on
// the default stream). Shared with the marker queued on the stream, which may outlive it.
struct EventState {
  std::mutex mutex;
  std::condition_variable completed_cv;
  uint64_t recorded = 0;   // records so far
  uint64_t completed = 0;  // the last record the stream reached
  std::chrono::steady_clock::time_point when;

  void complete(uint64_t record) {
    std::lock_guard<std::mutex> lock(mutex);
    when = std::chrono::steady_clock::now();
    completed = std::max(completed, record);
    completed_cv.notify_all();
  }

  void wait(uint64_t record) {
    host_wait([&] {  // the GIL is never taken back while this event's lock is held
      std::unique_lock<std::mutex> lock(mutex);
      completed_cv.wait(lock, [&] { return completed >= record; });
    });
  }

  uint64_t next_record() {
    std::lock_guard<std::mutex> lock(mutex);
    return ++recorded;
  }

  uint64_t last_record() {
    std::lock_guard<std::mutex> lock(mutex);
    return recorded;
  }
};

using Event = std::shared_ptr<EventState>;

// One current stream per thread and device, as torch expects of a device runtime.
thread_local std::unordered_map<c10::DeviceIndex, c10::StreamId> current_streams;
std::atomic<c10::StreamId> next_stream_id{1};

struct Guard final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override {
    return kType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    const auto previous = getDevice();
    setDevice(device);
    return previous;
  }

  c10::Device getDevice() const override {
    return {kType, current_device()};
  }

  void setDevice(c10::Device device) const override {
    count_call("runtime::Guard::setDevice");
    TORCH_INTERNAL_ASSERT(device.type() == kType);
    if (device.has_index()) {
      set_device(device.index());
    }
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.has_index() && device.index() >= 0 && device.index() < device_count()) {
      current_device_index = device.index();
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    const auto found = current_streams.find(device.index());
    const auto id = found == current_streams.end() ? 0 : found->second;
    return c10::Stream(c10::Stream::UNSAFE, device, id);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, 0);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high*/) const override {
    return getNewStream(device, 0);
  }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    count_call("runtime::Guard::getNewStream");
    // torch.Stream(device="npu") names no index: the stream is the current device's.
    const c10::Device on(kType, device.has_index() ? device.index() : current_device());
    return c10::Stream(c10::Stream::UNSAFE, on, next_stream_id++);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    count_call("runtime::Guard::exchangeStream");
    const auto previous = getStream(stream.device());
    current_streams[stream.device_index()] = stream.id();
    return previous;
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex /*device*/,
              const c10::EventFlag /*flag*/) const override {
    count_call("runtime::Guard::recordEvent");
    if (*event == nullptr) {
      *event = new Event(std::make_shared<EventState>());
    }
    Event state = *static_cast<Event*>(*event);
    const auto record = state->next_record();
    if (stream.id() == 0) {
      state->complete(record);  // the default stream's work ran at launch
    } else {
      // complete as the stream counts everything before it done: a stream queried after
      // the event's synchronize is idle up to it
      enqueue_marker(stream.device_index(), stream.id(),
                     [state, record] { state->complete(record); });
    }
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    delete static_cast<Event*>(event);
  }

  // `stream` waits for the event: its later work runs after the event's record completes.
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return;
    }
    Event state = *static_cast<Event*>(event);
    const auto record = state->last_record();
    if (stream.id() == 0) {
      state->wait(record);  // the default stream runs on the host thread: the host waits
    } else {
      enqueue(stream.device_index(), stream.id(), [state, record] { state->wait(record); });
    }
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    Event state = *static_cast<Event*>(event);
    std::lock_guard<std::mutex> lock(state->mutex);
    return state->completed >= state->recorded;
  }

  void synchronizeEvent(void* event) const override {
    count_call("runtime::Guard::synchronizeEvent");
    refuse_during_capture("waiting for an event on the host");
    if (event != nullptr) {
      Event state = *static_cast<Event*>(event);
      state->wait(state->last_record());
    }
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "both events must be recorded first");
    synchronizeEvent(start);
    synchronizeEvent(end);
    const auto elapsed =
        (*static_cast<Event*>(end))->when - (*static_cast<Event*>(start))->when;
    return std::chrono::duration<double, std::milli>(elapsed).count();
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    return {};  // every dtype: the host's arithmetic runs them all
  }

  bool queryStream(const c10::Stream& stream) const override {
    return stream_idle(stream.device_index(), stream.id());
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    refuse_during_capture("synchronizing a stream");
    synchronize_stream(stream.device_index(), stream.id());
  }

  void synchronizeDevice(const c10::DeviceIndex device) const override {
    count_call("runtime::Guard::synchronizeDevice");
    refuse_during_capture("synchronizing the device");
    synchronize_device(device < 0 ? current_device() : device);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// --- generators and hooks ----------------------------------------------------------------

struct Generator final : at::CPUGeneratorImpl {
  explicit Generator(c10::DeviceIndex index) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count() > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex /*device*/) const override {
    return true;
  }

  void init() const override {}

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto previous = current_device();
    set_device(device);
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    static std::vector<at::Generator> defaults = [] {
      std::vector<at::Generator> made;
      for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
        made.push_back(at::make_generator<Generator>(i));
        made.back().set_current_seed(c10::detail::getNonDeterministicRandom());
      }
      return made;
    }();
    const auto index = device < 0 ? current_device() : device;
    check_device(index);
    return defaults[index];
  }

  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    count_call("runtime::Hooks::getNewGenerator");
    return at::make_generator<Generator>(device < 0 ? current_device() : device);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return &pinned_memory;
  }

  bool isPinnedPtr(const void* data) const override {
    count_call("runtime::Hooks::isPinnedPtr");
    return pinned_memory.owns(data);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    return {c10::DeviceType::PrivateUse1, device_memory.device_of(data)};
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage(storage, nbytes);
  }
};

const bool hooks_registered = [] {
  static Hooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

}  // namespace

HostAccess::HostAccess(const void* device_bytes)
    : base_(device_bytes), serial_(device_bytes == nullptr ? 0 : device_memory.open(device_bytes)) {}

HostAccess::~HostAccess() {
  if (serial_ != 0) {
    device_memory.close(base_, serial_);
  }
}

at::DataPtr allocate_device_memory(c10::DeviceIndex device, size_t nbytes) {
  return device_memory.allocate_outside_pools(device, nbytes);
}

bool is_pinned_host(const void* ptr) {
  return pinned_memory.owns(ptr);
}

c10::StreamId current_stream_id(c10::DeviceIndex device) {
  const auto found = current_streams.find(device);
  return found == current_streams.end() ? 0 : found->second;
}

at::Allocator* device_allocator() {
  return &device_memory;
}

void resize_storage(const c10::Storage& storage, size_t nbytes) {
  if (nbytes <= storage.nbytes()) {
    storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
    return;
  }
  const auto device = storage.device().index();
  const auto previous = current_device();
  set_device(device);
  auto grown = device_memory.allocate(nbytes);
  set_device(previous);
  if (storage.nbytes() > 0) {
    HostAccess to(grown.get()), from(storage.data());
    std::memcpy(grown.get(), storage.data(), storage.nbytes());
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

}  // namespace npu_test

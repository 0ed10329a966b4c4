// The test device's graphs: torch.accelerator.Graph on npu.
//
// Serves at::GraphImplInterface, registered in at::GraphImplRegistry under the device's
// name (register_graph_impl, called once the backend is renamed). It keeps the rules a GPU
// graph keeps, so a plugin that captures here captures correctly on hardware:
//   - between capture_begin and capture_end, work launched from the capturing thread on the
//     capturing stream of the capturing device is recorded, not run (ops.cpp asks
//     `recording` before it runs an operator or a copy); replay runs the record again on the
//     same memory, in order;
//   - capture happens on a stream other than the default stream (as CUDA requires);
//   - memory allocated on the device during capture comes from the graph's pool and stays
//     alive with the pool, after its tensors are freed, until every graph sharing the pool
//     is reset or destroyed; graphs share a pool by passing one's `pool()` to another, or
//     the id `graph_pool_handle()` makes (torch.npu.graph_pool_handle, as on CUDA);
//   - a host sync, a copy to or from pageable host memory, reading a value to the host
//     (`.item()`), and (global capture mode) another thread's allocation on the device fail
//     where they happen and invalidate the capture: capture_end then fails too, and the
//     graph can be captured again after `reset()`.
// Replays count "runtime::Graph::replay" and each replayed node as "replay:<name>"
// (npu_test::dispatch_counts), so a test sees which kernels a replay ran.

#include "runtime.h"

#include <ATen/core/GraphImplInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

namespace npu_test {

namespace {

// A graph's memory pool: device memory that outlives the tensors it was allocated for.
struct Pool {
  c10::MempoolId_t id;
  std::mutex mutex;
  std::vector<at::DataPtr> blocks;  // freed back to the device when the pool is destroyed
};

std::mutex pools_mutex;
std::map<c10::MempoolId_t, std::weak_ptr<Pool>> pools;
std::atomic<c10::CaptureId_t> next_pool_id{1};

std::shared_ptr<Pool> pool_for(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(pools_mutex);
  if (id.first != 0 || id.second != 0) {
    if (auto shared = pools[id].lock()) {
      return shared;
    }
  } else {
    id = {next_pool_id++, 0};
  }
  auto made = std::make_shared<Pool>();
  made->id = id;
  pools[id] = made;
  return made;
}

void release_pool_ref(void* ctx) {
  delete static_cast<std::shared_ptr<Pool>*>(ctx);
}

struct Node {
  std::string name;
  std::function<void()> work;
};

struct Capture {
  c10::DeviceIndex device;
  c10::StreamId stream;
  std::thread::id thread;
  at::GraphCaptureMode mode;
  std::shared_ptr<Pool> pool;
  // shared with replays queued on a stream, which a reset() must not cut short
  std::shared_ptr<std::vector<Node>> nodes = std::make_shared<std::vector<Node>>();
  std::string invalidated_by;  // empty while the capture is valid
};

// At most one capture at a time in the process (what vLLM and torch.cuda.graph do).
std::mutex capture_mutex;
Capture* active = nullptr;
std::atomic<bool> capturing{false};

bool this_thread_captures(const Capture& capture, c10::DeviceIndex device) {
  return capture.device == device && capture.thread == std::this_thread::get_id();
}

[[noreturn]] void invalidate(Capture& capture, const std::string& what) {
  if (capture.invalidated_by.empty()) {
    capture.invalidated_by = what;
  }
  TORCH_CHECK(
      false, c10::get_privateuse1_backend(), ":", static_cast<int>(capture.device), " is capturing a graph: ", what,
      " is not allowed during capture (a graph records device work; it cannot wait for it or "
      "hand its results to the host). The capture is invalidated: end it, reset() the graph, "
      "and capture again without it.");
}

class Graph final : public at::GraphImplInterface {
 public:
  explicit Graph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}

  ~Graph() override {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (active == &capture_) {
      active = nullptr;
      capturing = false;
    }
  }

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    const auto device = current_device();
    const auto stream = current_stream_id(device);
    TORCH_CHECK(
        stream != 0,
        c10::get_privateuse1_backend(), " graphs are captured on a stream other than the default stream: capture "
        "inside `with torch.Stream(device=\"", c10::get_privateuse1_backend(), "\"):` (as on CUDA, where the legacy "
        "default stream cannot be captured)");
    TORCH_CHECK(!captured_, "this graph holds a capture already: reset() it first");
    std::lock_guard<std::mutex> lock(capture_mutex);
    TORCH_CHECK(active == nullptr, "another ", c10::get_privateuse1_backend(), " graph is being captured in this process");
    capture_ = Capture{device, stream, std::this_thread::get_id(), mode, pool_for(pool)};
    active = &capture_;
    capturing = true;
    count_call("runtime::Graph::capture_begin");
  }

  void capture_end() override {
    {
      std::lock_guard<std::mutex> lock(capture_mutex);
      TORCH_CHECK(active == &capture_, "capture_end() without capture_begin() on this graph");
      active = nullptr;
      capturing = false;
    }
    count_call("runtime::Graph::capture_end");
    if (!capture_.invalidated_by.empty()) {
      const auto reason = capture_.invalidated_by;
      capture_ = Capture{};
      TORCH_CHECK(false, "the ", c10::get_privateuse1_backend(), " graph capture was invalidated by ", reason,
                  ": nothing was captured; reset() the graph and capture again without it");
    }
    captured_ = true;
    if (!keep_graph_) {
      instantiate();
    }
  }

  void instantiate() override {
    TORCH_CHECK(captured_, "instantiate() needs a finished capture");
    instantiated_ = true;
  }

  void replay() override {
    TORCH_CHECK(captured_, "replay() needs a finished capture");
    if (!instantiated_) {
      instantiate();
    }
    TORCH_CHECK(!recording(capture_.device), "a graph cannot be replayed while it captures");
    count_call("runtime::Graph::replay");
    for (const auto& node : *capture_.nodes) {
      count_call("replay:" + node.name);
    }
    launch(capture_.device, "runtime::Graph::replay", [nodes = capture_.nodes] {
      for (const auto& node : *nodes) {
        node.work();
      }
    });
  }

  void reset() override {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (active == &capture_) {
      active = nullptr;
      capturing = false;
    }
    capture_ = Capture{};
    captured_ = instantiated_ = false;
  }

  c10::MempoolId_t pool() const override {
    TORCH_CHECK(capture_.pool != nullptr, "this graph has no pool before its capture begins");
    return capture_.pool->id;
  }

  void enable_debug_mode() override {
    debug_ = true;
  }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "call enable_debug_mode() before capturing, then debug_dump()");
    std::ofstream out(path);
    for (const auto& node : *capture_.nodes) {
      out << node.name << "\n";
    }
  }

 private:
  bool keep_graph_;
  bool captured_ = false;
  bool instantiated_ = false;
  bool debug_ = false;
  Capture capture_{};
};

void register_graph_impl() {
  const auto key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
  if (!at::GraphImplRegistry()->Has(key)) {
    at::GraphImplRegistry()->Register(key, [](at::GraphImplArgs args) {
      return std::unique_ptr<at::GraphImplInterface>(std::make_unique<Graph>(args));
    });
  }
}

}  // namespace

bool recording(c10::DeviceIndex device) {
  if (!capturing) {
    return false;
  }
  std::lock_guard<std::mutex> lock(capture_mutex);
  return active != nullptr && this_thread_captures(*active, device) &&
      current_stream_id(device) == active->stream;
}

void record(const std::string& name, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(capture_mutex);
  TORCH_INTERNAL_ASSERT(active != nullptr, "record() outside a capture");
  active->nodes->push_back({name, std::move(work)});
}

std::optional<at::DataPtr> allocate_during_capture(c10::DeviceIndex device, size_t nbytes) {
  if (!capturing) {
    return std::nullopt;
  }
  std::shared_ptr<Pool> pool;
  {
    std::lock_guard<std::mutex> lock(capture_mutex);
    if (active == nullptr || active->device != device) {
      return std::nullopt;
    }
    if (!this_thread_captures(*active, device)) {
      const bool global = active->mode == at::GraphCaptureMode::Global ||
          active->mode == at::GraphCaptureMode::Default;
      if (!global) {
        return std::nullopt;
      }
      invalidate(*active, "allocating device memory from another thread (global capture mode)");
    }
    pool = active->pool;
  }
  auto block = allocate_device_memory(device, nbytes);
  void* data = block.get();
  {
    std::lock_guard<std::mutex> lock(pool->mutex);
    pool->blocks.push_back(std::move(block));
  }
  return at::DataPtr(
      data, new std::shared_ptr<Pool>(pool), &release_pool_ref,
      c10::Device(c10::DeviceType::PrivateUse1, device));
}

void refuse_during_capture(const std::string& what) {
  if (!capturing) {
    return;
  }
  std::lock_guard<std::mutex> lock(capture_mutex);
  if (active != nullptr && active->thread == std::this_thread::get_id()) {
    invalidate(*active, what);
  }
}

// A pool id no graph uses yet, for graphs to share (torch.npu.graph_pool_handle, as CUDA's).
std::tuple<int64_t, int64_t> graph_pool_handle() {
  return {0, static_cast<int64_t>(next_pool_id++)};
}

TORCH_LIBRARY_FRAGMENT(npu_test, m) {
  m.def("register_graph_impl() -> ()", &register_graph_impl);
  m.def("graph_pool_handle() -> (int, int)", &graph_pool_handle);
}

}  // namespace npu_test

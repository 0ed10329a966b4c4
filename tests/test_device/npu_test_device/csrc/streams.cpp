// The test device's streams: work on a stream other than the default one runs on that
// stream's own thread, in order, while the host goes on - as on a GPU, where a launch
// returns before the kernel ran.
//
// Launching is what graph capture already does (ops.cpp, kernels.cpp): an operator's
// results are allocated at launch, sized by its meta kernel, and its work - the host call
// into that memory - is queued instead of recorded. What a GPU cannot do without waiting
// waits here too: reading a value to the host (`.item()`), a copy to or from pageable host
// memory, an operator whose result sizes depend on its data, a collective. Events recorded
// on a stream complete when its thread reaches them; synchronizing a stream, an event or the
// device waits for exactly that. The default stream runs its work at once, on the host
// thread, and does not wait for the others (torch's streams are non-blocking): a missing
// `wait_stream`, event or synchronize shows up as a wrong result, as on hardware. An error
// in queued work is raised at the next synchronization, as a GPU's asynchronous errors are.
// A process that ends with work queued waits for it (the package's exit handler).

#include "runtime.h"

#include <Python.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace npu_test {

void host_wait(const std::function<void()>& wait) {
  // Released while the host waits: a stream's thread takes the GIL whenever a tensor that
  // Python also holds changes hands (torch keeps the two reference counts in step).
  struct GilReleased {
    PyThreadState* state =
        Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    ~GilReleased() {
      if (state != nullptr) {
        PyEval_RestoreThread(state);
      }
    }
  } released;
  wait();
}

namespace {

class StreamQueue {
 public:
  explicit StreamQueue(c10::DeviceIndex device) {
    std::thread([this, device] { run(device); }).detach();  // lives with the process
  }

  // `reached` (a marker's) runs under the queue's lock as `work` counts done.
  void push(std::function<void()> work, std::function<void()> reached = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(work), std::move(reached)});
    ++launched_;
    ready_.notify_one();
  }

  // Wait until everything pushed so far has run; raise the first error it met.
  void drain() {
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      target = launched_;
    }
    host_wait([&] {  // the GIL is never taken back while this queue's lock is held
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return finished_ >= target; });
    });
    std::unique_lock<std::mutex> lock(mutex_);
    if (error_) {
      auto error = std::exchange(error_, nullptr);
      lock.unlock();
      std::rethrow_exception(error);
    }
  }

  bool idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_ == launched_;
  }

 private:
  void run(c10::DeviceIndex device) {
    set_device(device);  // the work's allocations and guards see the stream's device
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr failed;
      try {
        if (item.work) {
          item.work();
        }
      } catch (...) {
        failed = std::current_exception();
      }
      item.work = nullptr;  // the tensors it held go before the stream counts it done
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed && !error_) {
        error_ = failed;
      }
      ++finished_;
      if (item.reached) {
        item.reached();
      }
      done_.notify_all();
    }
  }

  struct Item {
    std::function<void()> work;
    std::function<void()> reached;
  };

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable done_;
  std::deque<Item> queue_;
  uint64_t launched_ = 0;
  uint64_t finished_ = 0;
  std::exception_ptr error_;
};

std::mutex queues_mutex;
// Never destroyed: their threads run until the process ends.
auto* queues = new std::map<std::pair<c10::DeviceIndex, c10::StreamId>, StreamQueue*>();

StreamQueue& queue_of(c10::DeviceIndex device, c10::StreamId stream) {
  std::lock_guard<std::mutex> lock(queues_mutex);
  auto& found = (*queues)[{device, stream}];
  if (found == nullptr) {
    found = new StreamQueue(device);
  }
  return *found;
}

// The queue of a stream that has had work, or nullptr: asking about a stream starts no thread.
StreamQueue* existing_queue(c10::DeviceIndex device, c10::StreamId stream) {
  std::lock_guard<std::mutex> lock(queues_mutex);
  const auto found = queues->find({device, stream});
  return found == queues->end() ? nullptr : found->second;
}

}  // namespace

bool deferred(c10::DeviceIndex device) {
  return current_stream_id(device) != 0 || recording(device);
}

void enqueue(c10::DeviceIndex device, c10::StreamId stream, std::function<void()> work) {
  count_call("runtime::Stream::enqueue");
  queue_of(device, stream).push(std::move(work));
}

void enqueue_marker(c10::DeviceIndex device, c10::StreamId stream, std::function<void()> reached) {
  count_call("runtime::Stream::enqueue");
  queue_of(device, stream).push(nullptr, std::move(reached));
}

void launch(c10::DeviceIndex device, const std::string& name, std::function<void()> work) {
  if (recording(device)) {
    record(name, std::move(work));
  } else if (current_stream_id(device) != 0) {
    enqueue(device, current_stream_id(device), std::move(work));
  } else {
    work();
  }
}

void synchronize_stream(c10::DeviceIndex device, c10::StreamId stream) {
  if (auto* queue = existing_queue(device, stream)) {
    queue->drain();
  }
}

void synchronize_device(c10::DeviceIndex device) {
  std::vector<StreamQueue*> all;
  {
    std::lock_guard<std::mutex> lock(queues_mutex);
    for (const auto& [key, queue] : *queues) {
      if (key.first == device) {
        all.push_back(queue);
      }
    }
  }
  for (auto* queue : all) {
    queue->drain();
  }
}

bool stream_idle(c10::DeviceIndex device, c10::StreamId stream) {
  auto* queue = existing_queue(device, stream);
  return queue == nullptr || queue->idle();
}

namespace {

// npu_test::sleep(on, ms): work that takes `ms` on the current stream of `on`'s device, as
// torch.cuda._sleep spins a GPU: a test sees the host go on while a stream is busy.
void sleep_on_stream(const at::Tensor& on, int64_t milliseconds) {
  launch(on.device().index(), "npu_test::sleep", [milliseconds] {
    std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(npu_test, m) {
  m.def("sleep(Tensor on, int milliseconds) -> ()");
}

TORCH_LIBRARY_IMPL(npu_test, PrivateUse1, m) {
  m.impl("sleep", sleep_on_stream);
}

}  // namespace npu_test

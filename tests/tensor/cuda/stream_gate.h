// A gate that holds a stream back, so work on another stream or the host runs first, as a busy
// GPU lets it: how the stream-order and sanitizer suites plant the mistakes only timing shows.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>

namespace ember::testing {

// Holds `stream` at this point of its queue until open(): a host function that waits (at most
// 10 s, so a mistake fails the test instead of hanging it). On a GPU as in the simulator.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : stream_(stream), opened_(open_.get_future().share()) {
    EXPECT_EQ(cudaLaunchHostFunc(stream, &StreamGate::hold, &opened_), cudaSuccess);
  }
  // The host function reads opened_: it must have run before the gate goes.
  ~StreamGate() {
    open();
    cudaStreamSynchronize(stream_);
  }
  void open() {
    if (!is_open_) open_.set_value();
    is_open_ = true;
  }

 private:
  static void hold(void* opened) {
    static_cast<std::shared_future<void>*>(opened)->wait_for(std::chrono::seconds(10));
  }
  cudaStream_t stream_;
  std::promise<void> open_;
  std::shared_future<void> opened_;
  bool is_open_ = false;
};

}  // namespace ember::testing

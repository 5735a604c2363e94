// The DDP trace recorder (distributed/diagnostics/trace.h) is written from the training thread and the
// communication thread at once (bucket completion spans run on the MPI worker), while a program
// may install or remove its listener: none of that may race.
#include "distributed/diagnostics/trace.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tensor/all.h"

namespace ember::distributed {
namespace {

TEST(Trace, ListenerSwappedWhileAnotherThreadTraces) {
  Trace& trace = Trace::get();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> heard{0};
  // Each listener owns a buffer it writes into: a listener freed while running would be a
  // use-after-free (ASan) or garbage in the count.
  auto make_listener = [&heard](int id) {
    auto buffer = std::make_shared<std::vector<int>>(64, id);
    return [buffer, id, &heard](const std::string& name, double, int) {
      for (int& v : *buffer) v = id + static_cast<int>(name.size());
      heard.fetch_add(1);
    };
  };
  std::thread communication([&] {
    while (!stop.load()) {
      if (trace.enabled()) trace.span("allreduce bucket 0", "ddp", Trace::now_us(), 1.0, 1);
    }
  });
  for (int i = 0; i < 20000; ++i) {
    if (i % 3 == 2) {
      trace.set_listener(nullptr);
    } else {
      trace.set_listener(make_listener(i));
    }
    trace.instant("autograd_hook w", "ddp");
  }
  stop.store(true);
  communication.join();
  trace.set_listener(nullptr);
  EXPECT_FALSE(trace.enabled());
  EXPECT_GT(heard.load(), 0);
}

// A listener may itself emit events (it is called outside the recorder's lock).
TEST(Trace, ListenerThatTracesDoesNotDeadlock) {
  Trace& trace = Trace::get();
  int depth = 0, calls = 0;
  trace.set_listener([&](const std::string&, double, int) {
    ++calls;
    if (depth++ == 0) trace.instant("nested", "ddp");
    --depth;
  });
  trace.instant("outer", "ddp");
  trace.set_listener(nullptr);
  EXPECT_EQ(calls, 2);
}

// EMBER_DDP_TRACE=dir: a missing directory is made; a path that cannot be written is an error
// naming it, at enable() rather than a silent nothing at exit.
TEST(Trace, EnableMakesTheDirectoryOrNamesThePathItCannotWrite) {
  try {
    Trace::get().enable("/dev/null/traces/ember_trace_rank0.json", 0);
    FAIL() << "a trace under /dev/null was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'/dev/null/traces'"), std::string::npos) << e.what();
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") / "new" / "nested";
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "ember_trace_rank0.json").string();
  Trace::get().enable(path, 0);
  Trace::get().instant("hello", "test", 0);
  Trace::get().flush();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"name\":\"hello\""), std::string::npos) << text.str();
}

// Note [Backward node observer]: with a listener (or a trace file) every backward node arrives as a
// span on the training lane, in the order the engine ran them: the loss's first, leaves last.
TEST(Trace, BackwardNodesArriveAsSpans) {
  std::vector<std::string> heard;
  Trace::get().set_listener([&heard](const std::string& name, double, int lane) {
    if (lane == 0) heard.push_back(name.substr(0, name.find(" (")));
  });
  Tensor w = ones({3}).requires_grad_(true);
  sum(mul(w, full({3}, 2.0))).backward();
  Trace::get().set_listener(nullptr);
  EXPECT_EQ(heard, (std::vector<std::string>{"SumBackward", "MulBackward", "AccumulateGrad"}));
}

}  // namespace
}  // namespace ember::distributed

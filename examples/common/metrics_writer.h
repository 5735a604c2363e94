// --metrics=FILE for the trainers: one row of per-step training metrics, written as it happens and
// flushed, so a run that is killed keeps every step it finished. The format follows the
// extension: FILE.csv (a header line, then one line per step) or FILE.jsonl (one JSON object per
// line). scripts/plot_metrics.py draws either.
//
// Columns / keys, in this order:
//   step         global step, counted from 1 across epochs (and across a --resume)
//   epoch        1-based
//   loss         this step's training loss (not smoothed)
//   lr           the learning rate this step used
//   img_per_s    images of the whole job (the global batch under DDP) / this step's wall time;
//                tokens_per_s instead for a language model (MetricsWriter's throughput_column)
//   ms_per_step  this step's wall time: data loading, forward, backward, optimizer
//   overlap          DDP: 1 - exposed_comm_ms / comm_wall_ms, the share of gradient communication
//                    hidden behind backward (Note [Communication time] in distributed/ddp_reports/logging.h)
//   comm_wall_ms     DDP: wall-clock time some bucket was being reduced (never more than the step)
//   exposed_comm_ms  DDP: how long the step waited for buckets after the last gradient was ready
//   bytes_sent       DDP: payload this rank handed to collectives during the step
// One process writes the DDP columns as 0 rather than leaving them out, so one reader reads every
// file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ember::examples {

enum class MetricsFormat { kCsv, kJsonl };

// The format of `path` from its extension; throws, naming the path, for anything but .csv/.jsonl.
MetricsFormat metrics_format_of(const std::string& path);

struct StepMetrics {
  int64_t step = 0;
  int64_t epoch = 0;
  double loss = 0;
  double lr = 0;
  double img_per_s = 0;  // or tokens per second: the writer's throughput column
  double ms_per_step = 0;
  double overlap = 0;
  double comm_wall_ms = 0;
  double exposed_comm_ms = 0;
  int64_t bytes_sent = 0;
};

class MetricsWriter {
 public:
  // Creates `path` (or truncates it); with `append` (a resumed run) adds to what is there, writing
  // the CSV header only into an empty file. Throws naming the path when its directory does not
  // exist or the file cannot be opened. `throughput_column` names the throughput's column (key):
  // "img_per_s" for the image trainers, "tokens_per_s" for the GPT trainer.
  MetricsWriter(const std::string& path, bool append, std::string throughput_column = "img_per_s");
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // One row, flushed to the file before returning. Throws naming the path if the write fails.
  void write(const StepMetrics& m);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  MetricsFormat format_;
  std::string throughput_column_;
  std::FILE* file_ = nullptr;
};

}  // namespace ember::examples

#include "examples/common/metrics_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include <ember/tensor.h>

namespace ember::examples {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// JSON has no nan or inf: a diverged loss is written as null (CSV writes nan, as printf does).
std::string json_number(double v, const char* format) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

MetricsFormat metrics_format_of(const std::string& path) {
  if (ends_with(path, ".csv")) return MetricsFormat::kCsv;
  if (ends_with(path, ".jsonl")) return MetricsFormat::kJsonl;
  EMBER_THROW("'", path, "' must end in .csv or .jsonl: the format follows the extension");
}

MetricsWriter::MetricsWriter(const std::string& path, bool append, std::string throughput_column)
    : path_(path), format_(metrics_format_of(path)), throughput_column_(std::move(throughput_column)) {
  // A missing directory is the likely mistake; say which one rather than fopen's bare ENOENT.
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  EMBER_CHECK(dir.empty() || std::filesystem::is_directory(dir, ec), "metrics: cannot write '", path,
              "': directory '", dir.string(), "' does not exist");
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  EMBER_CHECK(file_ != nullptr, "metrics: cannot open '", path, "': ", std::strerror(errno));
  std::fseek(file_, 0, SEEK_END);  // appending: is the file empty, so the CSV needs its header?
  if (format_ == MetricsFormat::kCsv && std::ftell(file_) == 0) {
    std::fprintf(file_, "step,epoch,loss,lr,%s,ms_per_step,overlap,comm_wall_ms,exposed_comm_ms,bytes_sent\n",
                 throughput_column_.c_str());
    std::fflush(file_);
  }
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const StepMetrics& m) {
  int n = 0;
  if (format_ == MetricsFormat::kCsv) {
    n = std::fprintf(file_, "%lld,%lld,%.6g,%.6g,%.1f,%.3f,%.4f,%.3f,%.3f,%lld\n", (long long)m.step, (long long)m.epoch,
                     m.loss, m.lr, m.img_per_s, m.ms_per_step, m.overlap, m.comm_wall_ms, m.exposed_comm_ms,
                     (long long)m.bytes_sent);
  } else {
    n = std::fprintf(file_,
                     "{\"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"lr\": %s, \"%s\": %s, "
                     "\"ms_per_step\": %s, \"overlap\": %s, \"comm_wall_ms\": %s, \"exposed_comm_ms\": %s, "
                     "\"bytes_sent\": %lld}\n",
                     (long long)m.step, (long long)m.epoch, json_number(m.loss, "%.6g").c_str(),
                     json_number(m.lr, "%.6g").c_str(), throughput_column_.c_str(), json_number(m.img_per_s, "%.1f").c_str(),
                     json_number(m.ms_per_step, "%.3f").c_str(), json_number(m.overlap, "%.4f").c_str(),
                     json_number(m.comm_wall_ms, "%.3f").c_str(), json_number(m.exposed_comm_ms, "%.3f").c_str(),
                     (long long)m.bytes_sent);
  }
  EMBER_CHECK(n > 0 && std::fflush(file_) == 0, "metrics: cannot write to '", path_, "': ", std::strerror(errno));
}

}  // namespace ember::examples

// examples/common/metrics_writer: the two formats, a row per write() already on disk (a killed run
// keeps it), appending on resume without a second header, and the refusals that name the path.
#include "examples/common/metrics_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/common/error_matchers.h"

namespace ember::examples {
namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

StepMetrics row(int64_t step) {
  StepMetrics m;
  m.step = step;
  m.epoch = 1;
  m.loss = 2.5;
  m.lr = 0.1;
  m.img_per_s = 1234.5;
  m.ms_per_step = 51.25;
  m.overlap = 0.75;
  m.comm_wall_ms = 8;
  m.exposed_comm_ms = 2;
  m.bytes_sent = 1 << 20;
  return m;
}

TEST(MetricsWriter, FormatFollowsTheExtension) {
  EXPECT_EQ(metrics_format_of("a/b.csv"), MetricsFormat::kCsv);
  EXPECT_EQ(metrics_format_of("m.jsonl"), MetricsFormat::kJsonl);
  EXPECT_EMBER_ERROR(metrics_format_of("m.json"), "'m.json'", ".csv or .jsonl");
  EXPECT_EMBER_ERROR(metrics_format_of(".csv"), "'.csv'");
}

TEST(MetricsWriter, CsvHeaderThenOneLinePerStepOnDiskAtOnce) {
  const std::string path = temp_path("m.csv");
  MetricsWriter w(path, false);
  w.write(row(1));
  // Still open: the row is in the file already, as a run killed now would leave it.
  EXPECT_EQ(read_all(path),
            "step,epoch,loss,lr,img_per_s,ms_per_step,overlap,comm_wall_ms,exposed_comm_ms,bytes_sent\n"
            "1,1,2.5,0.1,1234.5,51.250,0.7500,8.000,2.000,1048576\n");
  w.write(row(2));
  EXPECT_NE(read_all(path).find("\n2,1,2.5,"), std::string::npos);
}

TEST(MetricsWriter, JsonLinesWithNullForADivergedLoss) {
  const std::string path = temp_path("m.jsonl");
  {
    MetricsWriter w(path, false);
    StepMetrics m = row(3);
    m.loss = std::nan("");
    w.write(m);
  }
  EXPECT_EQ(read_all(path),
            "{\"step\": 3, \"epoch\": 1, \"loss\": null, \"lr\": 0.1, \"img_per_s\": 1234.5, "
            "\"ms_per_step\": 51.250, \"overlap\": 0.7500, \"comm_wall_ms\": 8.000, \"exposed_comm_ms\": 2.000, "
            "\"bytes_sent\": 1048576}\n");
}

TEST(MetricsWriter, ALanguageModelNamesItsThroughputTokensPerSecond) {
  const std::string csv = temp_path("gpt.csv"), jsonl = temp_path("gpt.jsonl");
  { MetricsWriter(csv, false, "tokens_per_s").write(row(1)); }
  { MetricsWriter(jsonl, false, "tokens_per_s").write(row(1)); }
  EXPECT_EQ(read_all(csv).find("step,epoch,loss,lr,tokens_per_s,ms_per_step,"), 0u);
  EXPECT_NE(read_all(jsonl).find("\"lr\": 0.1, \"tokens_per_s\": 1234.5, "), std::string::npos);
  EXPECT_EQ(read_all(jsonl).find("img_per_s"), std::string::npos);
}

TEST(MetricsWriter, ResumeAppendsWithoutASecondHeaderAndAFreshRunTruncates) {
  const std::string path = temp_path("resume.csv");
  { MetricsWriter(path, false).write(row(1)); }
  { MetricsWriter(path, true).write(row(2)); }
  const std::string both = read_all(path);
  EXPECT_EQ(both.find("step,"), 0u);
  EXPECT_EQ(both.find("\nstep,"), std::string::npos);
  EXPECT_NE(both.find("\n2,1,"), std::string::npos);
  { MetricsWriter(path, false).write(row(7)); }
  EXPECT_EQ(read_all(path).find("\n1,1,"), std::string::npos);
  // Appending to a file that does not exist yet starts it with its header.
  const std::string fresh = temp_path("fresh.csv");
  { MetricsWriter(fresh, true).write(row(1)); }
  EXPECT_EQ(read_all(fresh).find("step,"), 0u);
}

TEST(MetricsWriter, MissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = temp_path("no/such/dir/m.csv");
  EXPECT_EMBER_ERROR(MetricsWriter(path, false), "cannot write '" + path + "'", "does not exist");
  EXPECT_EMBER_ERROR(MetricsWriter(temp_path("m.txt"), false), "must end in .csv or .jsonl");
}

}  // namespace
}  // namespace ember::examples

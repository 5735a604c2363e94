#include "data/text_corpus.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "tensor/error.h"
#include "tensor/factories.h"
#include "tensor/generator.h"

namespace ember::data {
namespace {

constexpr const char* kBible = "/usr/bin/bible";
constexpr const char* kBibleRange = "Gen1:1-Rev22:21";

std::string printable(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}

Tensor ids_tensor(const CharVocabulary& vocab, const std::string& text, size_t begin, size_t end) {
  std::vector<int64_t> ids = vocab.encode(text.substr(begin, end - begin));
  const auto n = static_cast<int64_t>(ids.size());
  return from_vector<int64_t>(ids, {n});
}

}  // namespace

CharVocabulary::CharVocabulary(const std::string& text) : id_of_(256, -1) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  for (int c = 0; c < 256; ++c) {
    if (!seen[c]) continue;
    id_of_[c] = static_cast<int16_t>(chars_.size());
    chars_.push_back(static_cast<char>(c));
  }
}

std::vector<int64_t> CharVocabulary::encode(const std::string& text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int16_t id = id_of_[static_cast<unsigned char>(text[i])];
    EMBER_CHECK(id >= 0, "CharVocabulary::encode: character ", printable(static_cast<unsigned char>(text[i])),
                " at offset ", i, " is not in the vocabulary of ", size(), " characters");
    ids[i] = id;
  }
  return ids;
}

std::string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    EMBER_CHECK(ids[i] >= 0 && ids[i] < size(), "CharVocabulary::decode: id ", ids[i], " at position ", i,
                " is outside the vocabulary [0, ", size(), ")");
    out[i] = chars_[static_cast<size_t>(ids[i])];
  }
  return out;
}

TextCorpus::TextCorpus(std::string text, std::string source, const TextCorpusOptions& options)
    : source_(std::move(source)), text_(std::move(text)), vocab_(text_) {
  EMBER_CHECK(options.train_fraction > 0 && options.train_fraction < 1, "TextCorpus: train_fraction must be in (0, 1), got ",
              options.train_fraction);
  EMBER_CHECK(!text_.empty(), "TextCorpus: ", source_, " is empty: a corpus needs text to learn from");
  const auto split = static_cast<size_t>(options.train_fraction * static_cast<double>(text_.size()));
  EMBER_CHECK(split >= 2 && text_.size() - split >= 2, "TextCorpus: ", source_, " holds ", text_.size(),
              " characters, too few to split ", options.train_fraction, " / ", 1 - options.train_fraction,
              " with at least 2 characters on each side");
  train_ = ids_tensor(vocab_, text_, 0, split);
  val_ = ids_tensor(vocab_, text_, split, text_.size());
}

TextCorpus TextCorpus::from_text(std::string text, const std::string& source, const TextCorpusOptions& options) {
  return TextCorpus(std::move(text), source, options);
}

TextCorpus TextCorpus::from_file(const std::string& path, const TextCorpusOptions& options) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "TextCorpus: cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  EMBER_CHECK(!in.bad(), "TextCorpus: reading '", path, "' failed");
  return TextCorpus(text.str(), "'" + path + "'", options);
}

TextCorpus TextCorpus::king_james_bible(const TextCorpusOptions& options) {
  std::ifstream probe(kBible);
  EMBER_CHECK(probe.good(), "TextCorpus: the King James Bible comes from Debian's bible-kjv, and ", kBible,
              " is not there: apt-get install bible-kjv bible-kjv-text (scripts/bootstrap.sh does)");
  const std::string command = std::string(kBible) + " " + kBibleRange + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  EMBER_CHECK(pipe != nullptr, "TextCorpus: cannot run '", command, "': ", std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  const int status = ::pclose(pipe);
  EMBER_CHECK(status == 0, "TextCorpus: '", command, "' exited with status ", status, ": ",
              text.substr(0, 200));
  return TextCorpus(std::move(text), std::string("the King James Bible (") + kBible + " " + kBibleRange + ")",
                    options);
}

WindowSampler::WindowSampler(Tensor tokens, WindowSamplerOptions options)
    : tokens_(std::move(tokens)), options_(options) {
  EMBER_CHECK(tokens_.defined() && tokens_.dim() == 1 && tokens_.dtype() == kInt64, "WindowSampler: tokens must be ",
              "a 1-D int64 tensor, got ", tokens_.defined() ? tokens_.describe() : std::string("nothing"));
  EMBER_CHECK(options_.block_size >= 1 && options_.batch_per_rank >= 1, "WindowSampler: block_size (",
              options_.block_size, ") and batch_per_rank (", options_.batch_per_rank, ") must be positive");
  EMBER_CHECK(options_.num_replicas >= 1 && options_.rank >= 0 && options_.rank < options_.num_replicas,
              "WindowSampler: rank ", options_.rank, " is not one of ", options_.num_replicas, " replicas");
  EMBER_CHECK(tokens_.numel() > options_.block_size, "WindowSampler: ", tokens_.numel(),
              " tokens cannot hold a window of block_size ", options_.block_size, " plus the next token");
  tokens_ = tokens_.contiguous();
}

WindowBatch WindowSampler::batch(int64_t step) const {
  const int64_t B = options_.batch_per_rank, T = options_.block_size;
  // Every rank draws the whole global batch's starts and keeps its own run of them.
  Generator g(options_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step + 1)));
  const auto windows = static_cast<uint64_t>(tokens_.numel() - T);
  std::vector<int64_t> starts(static_cast<size_t>(options_.num_replicas * B));
  for (auto& s : starts) s = static_cast<int64_t>(g.next_below(windows));
  const int64_t* tok = tokens_.data_ptr<int64_t>();
  std::vector<int64_t> x(static_cast<size_t>(B * T)), y(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = starts[static_cast<size_t>(options_.rank * B + b)];
    for (int64_t t = 0; t < T; ++t) {
      x[static_cast<size_t>(b * T + t)] = tok[start + t];
      y[static_cast<size_t>(b * T + t)] = tok[start + t + 1];
    }
  }
  return {from_vector<int64_t>(x, {B, T}), from_vector<int64_t>(y, {B, T})};
}

}  // namespace ember::data

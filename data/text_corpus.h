// A character-level text corpus for language models (nanoGPT's shakespeare_char, in C++): the
// text's distinct bytes, sorted, are the vocabulary; the first train_fraction of the text is the
// training split and the rest validation; a batch is random windows of block_size + 1 characters
// (WindowSampler), drawn so that the ranks of a DDP job together draw one global batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ember::data {

// The distinct bytes of a text, sorted: id i is chars()[i].
class CharVocabulary {
 public:
  explicit CharVocabulary(const std::string& text);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& chars() const { return chars_; }
  // Throws naming the first character that is not in the vocabulary, and where it is.
  std::vector<int64_t> encode(const std::string& text) const;
  // Throws naming an id outside [0, size()).
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::string chars_;
  std::vector<int16_t> id_of_;  // byte -> id, -1 where absent
};

struct TextCorpusOptions {
  double train_fraction = 0.9;  // the first 90 % trains, the rest validates (nanoGPT's split)
};

class TextCorpus {
 public:
  // Reads a text file. Refuses a missing, unreadable or empty file, and one too short to leave
  // both splits at least 2 characters, naming the file and its size.
  static TextCorpus from_file(const std::string& path, const TextCorpusOptions& options = {});
  // The King James Bible as Debian's bible-kjv prints it (`bible Gen1:1-Rev22:21`, from
  // bible-kjv-text's data; scripts/bootstrap.sh installs both). Refuses with the apt command
  // when the program is missing.
  static TextCorpus king_james_bible(const TextCorpusOptions& options = {});
  static TextCorpus from_text(std::string text, const std::string& source, const TextCorpusOptions& options = {});

  const std::string& source() const { return source_; }
  const std::string& text() const { return text_; }
  const CharVocabulary& vocab() const { return vocab_; }
  const Tensor& train() const { return train_; }  // int64 [train characters]
  const Tensor& val() const { return val_; }      // int64 [validation characters]

 private:
  TextCorpus(std::string text, std::string source, const TextCorpusOptions& options);
  std::string source_;
  std::string text_;
  CharVocabulary vocab_;
  Tensor train_, val_;
};

struct WindowSamplerOptions {
  int64_t block_size = 0;      // characters of context (T)
  int64_t batch_per_rank = 0;  // windows a rank draws per step (B)
  int64_t num_replicas = 1;    // ranks of the job
  int64_t rank = 0;
  uint64_t seed = 0;
};

// x and y of a step: int64 [B, T], y[b, t] = the character after x[b, t].
struct WindowBatch {
  Tensor x, y;
};

// Random windows of a token stream (nanoGPT's get_batch) as a distributed sampler: the starts of
// step s's num_replicas * batch_per_rank windows come from a Generator seeded with (seed, s), the
// same on every rank, and rank r takes the r-th run of batch_per_rank of them. So the ranks'
// batches together are the global batch one process draws with num_replicas = 1, and a step's
// batch depends on nothing but (seed, step): resuming at step s draws what the first run drew.
class WindowSampler {
 public:
  WindowSampler(Tensor tokens, WindowSamplerOptions options);
  WindowBatch batch(int64_t step) const;
  const WindowSamplerOptions& options() const { return options_; }

 private:
  Tensor tokens_;
  WindowSamplerOptions options_;
};

}  // namespace ember::data

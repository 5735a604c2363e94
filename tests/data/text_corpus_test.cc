// data/text_corpus: the vocabulary, the split, the refusals of a missing, empty or too short
// corpus, the King James Bible from Debian's bible-kjv, and the window sampler's contract: y is x
// shifted by one, and the ranks' batches together are the global batch one process draws.
#include "data/text_corpus.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tensor/all.h"
#include "tests/common/error_matchers.h"

namespace ember::data {
namespace {

std::vector<int64_t> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string temp_file(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(CharVocabularyTest, IsTheSortedDistinctCharactersAndRoundTrips) {
  const CharVocabulary v("hello, world");
  EXPECT_EQ(v.chars(), " ,dehlorw");
  EXPECT_EQ(v.encode("low"), (std::vector<int64_t>{5, 6, 8}));
  EXPECT_EQ(v.decode(v.encode("hello, world")), "hello, world");
  EXPECT_EMBER_ERROR(v.encode("held!"), "character '!' at offset 4 is not in the vocabulary of 9 characters");
  EXPECT_EMBER_ERROR(v.decode({1, 9}), "id 9 at position 1 is outside the vocabulary [0, 9)");
}

TEST(TextCorpusTest, SplitsTheFirstNinetyPercentForTraining) {
  const TextCorpus c = TextCorpus::from_text("abcdefghijklmnopqrst", "twenty letters");
  EXPECT_EQ(c.vocab().size(), 20);
  EXPECT_EQ(c.train().numel(), 18);
  EXPECT_EQ(c.val().numel(), 2);
  EXPECT_EQ(c.vocab().decode(values(c.val())), "st");
  const TextCorpus half = TextCorpus::from_text("abcdefghij", "ten", {0.5});
  EXPECT_EQ(half.vocab().decode(values(half.train())), "abcde");
}

TEST(TextCorpusTest, RefusesMissingEmptyAndTooShortCorpora) {
  EXPECT_EMBER_ERROR(TextCorpus::from_file(::testing::TempDir() + "/no_such_corpus.txt"),
                     "cannot open '", "no_such_corpus.txt': No such file or directory");
  EXPECT_EMBER_ERROR(TextCorpus::from_file(temp_file("empty.txt", "")), "empty.txt' is empty");
  EXPECT_EMBER_ERROR(TextCorpus::from_text("abcdefghi", "nine"),
                     "nine holds 9 characters, too few to split 0.9 / 0.1 with at least 2 characters on each side");
  EXPECT_EMBER_ERROR(TextCorpus::from_text("abcdefghij", "ten", {1.0}), "train_fraction must be in (0, 1), got 1");
  const TextCorpus ok = TextCorpus::from_file(temp_file("small.txt", "to be or not to be, that is the question"));
  EXPECT_EQ(ok.text().size(), 40u);
}

TEST(TextCorpusTest, TheKingJamesBibleFromBibleKjv) {
  const TextCorpus c = TextCorpus::king_james_bible();
  EXPECT_EQ(c.text().rfind("\nGenesis 1\n", 0), 0u) << c.text().substr(0, 40);
  EXPECT_NE(c.text().find("In the beginning God created the heaven and the earth."), std::string::npos);
  EXPECT_NE(c.text().find("The grace of our Lord Jesus Christ be with you all. Amen."), std::string::npos);
  EXPECT_GT(c.text().size(), 4000000u);
  EXPECT_LT(c.vocab().size(), 100);  // plain ASCII text
  EXPECT_EQ(c.train().numel() + c.val().numel(), static_cast<int64_t>(c.text().size()));
}

TEST(WindowSamplerTest, TargetsAreTheNextCharacters) {
  const Tensor tokens = arange(0, 100, 1, kInt64);
  const WindowBatch b = WindowSampler(tokens, {8, 4, 1, 0, 3}).batch(0);
  ASSERT_EQ(b.x.sizes(), (Shape{4, 8}));
  const std::vector<int64_t> x = values(b.x), y = values(b.y);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] + 1);
  for (size_t row = 0; row < 4; ++row) {
    EXPECT_EQ(x[row * 8 + 7], x[row * 8] + 7);  // a window is contiguous
    EXPECT_LE(y[row * 8 + 7], 99);              // and ends inside the text
  }
}

TEST(WindowSamplerTest, RanksTogetherDrawTheGlobalBatchOfOneProcess) {
  const Tensor tokens = arange(0, 1000, 1, kInt64);
  for (int64_t ranks : {2, 3}) {
    const WindowBatch global = WindowSampler(tokens, {16, 2 * ranks, 1, 0, 5}).batch(7);
    std::vector<int64_t> joined;
    for (int64_t r = 0; r < ranks; ++r) {
      const std::vector<int64_t> mine = values(WindowSampler(tokens, {16, 2, ranks, r, 5}).batch(7).x);
      joined.insert(joined.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(joined, values(global.x)) << ranks << " ranks";
  }
  const WindowSampler s(tokens, {16, 4, 1, 0, 5});
  EXPECT_EQ(values(s.batch(3).x), values(s.batch(3).x));  // a step's batch depends on (seed, step) only
  EXPECT_NE(values(s.batch(3).x), values(s.batch(4).x));
  EXPECT_NE(values(s.batch(3).x), values(WindowSampler(tokens, {16, 4, 1, 0, 6}).batch(3).x));
}

TEST(WindowSamplerTest, RefusesWhatCannotBeSampled) {
  EXPECT_EMBER_ERROR(WindowSampler(arange(0, 8, 1, kInt64), {8, 1}), "8 tokens cannot hold a window of block_size 8");
  EXPECT_EMBER_ERROR(WindowSampler(arange(0, 80, 1, kInt64), {8, 1, 2, 2}), "rank 2 is not one of 2 replicas");
  EXPECT_EMBER_ERROR(WindowSampler(arange(0, 80, 1, kFloat32), {8, 1}), "tokens must be a 1-D int64 tensor");
  EXPECT_EMBER_ERROR(WindowSampler(arange(0, 80, 1, kInt64), {0, 1}), "block_size (0) and batch_per_rank (1)");
}

}  // namespace
}  // namespace ember::data

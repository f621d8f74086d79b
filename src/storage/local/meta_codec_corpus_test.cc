// Runs the fuzz body over the checked-in seed corpus and over deterministic mutations of it, so
// every CI run exercises the decoders the way the libFuzzer target does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "storage/local/meta_codec_fuzz_body.hpp"

namespace objdirect::storage::local {
namespace {

std::vector<std::string> load_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(OBJDIRECT_META_CORPUS_DIR)) {
    std::ifstream in(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

void run(const std::string& s) {
  fuzz_meta_codec_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

TEST(MetaCodecCorpus, SeedsDecode) {
  const auto seeds = load_corpus();
  ASSERT_GE(seeds.size(), 6u);
  for (const std::string& s : seeds) {
    const bool any = decode_object(s).ok() || decode_bucket(s).ok() || decode_upload(s).ok() ||
                     decode_part(s).ok() || decode_versions(s).ok();
    EXPECT_TRUE(any) << "seed of " << s.size() << " bytes decodes as no record kind";
    run(s);
  }
}

TEST(MetaCodecCorpus, MutatedSeedsNeverCrash) {
  const auto seeds = load_corpus();
  std::mt19937_64 rng(12345);
  int decoded = 0;
  for (const std::string& seed : seeds) {
    for (int round = 0; round < 3000; ++round) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const std::size_t pos = s.empty() ? 0 : rng() % s.size();
        switch (rng() % 5) {
          case 0:  // flip a bit
            if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
            break;
          case 1:  // truncate
            s.resize(pos);
            break;
          case 2:  // insert a byte
            s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<char>(rng()));
            break;
          case 3:  // set a byte to an extreme
            if (!s.empty()) s[pos] = (rng() & 1) ? '\xff' : '\0';
            break;
          default:  // erase a byte
            if (!s.empty()) s.erase(pos, 1);
            break;
        }
      }
      run(s);
      decoded += decode_object(s).ok() || decode_upload(s).ok() || decode_part(s).ok() ||
                 decode_bucket(s).ok();
    }
  }
  // Some mutations (inside string bytes) keep records valid; the body checked their round trip.
  EXPECT_GT(decoded, 0);
}

}  // namespace
}  // namespace objdirect::storage::local

// The fabric advertisement codec (fabric_advert.hpp): format -> parse round trips, each
// malformed shape with its error, every limit at and past its bound, and the fuzz body over the
// checked-in seeds (fabric_advert_corpus/) and mutations of them.
#include "token/fabric_advert.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "token/fabric_advert_fuzz.hpp"

namespace objdirect::token {
namespace {

using Names = std::vector<std::string>;

bool fuzz(const std::string& s) {
  return fabric_advert_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

// The error message of a refused value, or "" when it was accepted.
std::string refusal(std::string_view value) {
  auto r = parse_fabric_advert(value);
  if (r.ok()) return "";
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  return r.status().message();
}

TEST(FabricAdvert, FormatThenParseGivesBackTheNames) {
  for (const Names& names :
       {Names{}, Names{"ucx"}, Names{"libfabric:shm", "libfabric:tcp", "ucx"},
        Names{"libfabric:verbs", "libfabric:efa", "libfabric:tcp", "ucx", "libfabric:shm"},
        Names{"ucx:rc_x+dc_x", "vendor/fabric-2.1", "A_b"}}) {
    const std::string text = format_fabric_advert(names);
    auto back = parse_fabric_advert(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().to_string();
    EXPECT_EQ(*back, names) << text;
    EXPECT_TRUE(fuzz(text));
  }
  EXPECT_EQ(format_fabric_advert(Names{"libfabric:shm", "libfabric:tcp", "ucx"}),
            "libfabric:shm,libfabric:tcp,ucx");
}

TEST(FabricAdvert, BlanksAndEmptyItemsAreTolerated) {
  auto r = parse_fabric_advert(" libfabric:tcp ,\tucx,, ,libfabric:verbs ,");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, (Names{"libfabric:tcp", "ucx", "libfabric:verbs"}));
  EXPECT_EQ(format_fabric_advert(*r), "libfabric:tcp,ucx,libfabric:verbs");
  auto empty = parse_fabric_advert("  ,  ");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(FabricAdvert, MalformedValuesAreRefusedWithTheirReason) {
  // A control character (header injection through a proxy, a broken server): named by its code,
  // never echoed.
  std::string m = refusal("libfabric:tcp\r\nx-evil: 1");
  EXPECT_NE(m.find("byte 0x0d at offset 13"), std::string::npos) << m;
  EXPECT_EQ(m.find('\r'), std::string::npos);
  m = refusal(std::string("ucx,\0shm", 8));
  EXPECT_NE(m.find("byte 0x00 at offset 4"), std::string::npos) << m;
  m = refusal("libfabric:tcp;ofi_rxm");
  EXPECT_NE(m.find("byte 0x3b"), std::string::npos) << m;
  m = refusal("libfabric:t\xc3\xa9p");  // non-ASCII
  EXPECT_NE(m.find("byte 0xc3"), std::string::npos) << m;
  m = refusal("ucx, lib fabric:tcp");
  EXPECT_NE(m.find("blank inside"), std::string::npos) << m;
  m = refusal("ucx,libfabric:shm, ucx");
  EXPECT_NE(m.find("'ucx' named twice"), std::string::npos) << m;
  for (const std::string& bad : {std::string("a=b"), std::string("\"ucx\""), std::string("x;y")}) {
    EXPECT_NE(refusal(bad), "") << bad;
  }
  EXPECT_FALSE(valid_fabric_name(""));
  EXPECT_FALSE(valid_fabric_name("a b"));
  EXPECT_FALSE(valid_fabric_name("a,b"));
  EXPECT_TRUE(valid_fabric_name("libfabric:verbs"));
}

TEST(FabricAdvert, LimitsAtAndPastTheirBound) {
  // fabric_name_bytes_max
  const std::string longest(limits::fabric_name_bytes_max, 'n');
  EXPECT_TRUE(valid_fabric_name(longest));
  EXPECT_EQ(refusal(longest), "");
  EXPECT_FALSE(valid_fabric_name(longest + "n"));
  std::string too_long = "ucx,";
  too_long.append(longest).append("n");
  EXPECT_NE(refusal(too_long).find("fabric name of 65 bytes at offset 4, at most 64"),
            std::string::npos)
      << refusal(too_long);
  // fabric_advert_names_max
  Names many;
  for (std::size_t i = 0; i < limits::fabric_advert_names_max; ++i) {
    std::string name = "f";  // (appending: GCC 12's -Wrestrict misfires on "f" + to_string())
    name.append(std::to_string(i));
    many.push_back(name);
  }
  auto at = parse_fabric_advert(format_fabric_advert(many));
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  EXPECT_EQ(*at, many);
  many.push_back("one-more");
  EXPECT_NE(refusal(format_fabric_advert(many)).find("more than 32 fabric names"),
            std::string::npos);
  // fabric_advert_bytes_max: blanks count too.
  std::string padded = "ucx";
  padded.append(limits::fabric_advert_bytes_max - 3, ' ');
  EXPECT_EQ(refusal(padded), "");
  EXPECT_NE(refusal(padded + " ").find("value of 1025 bytes, at most 1024"), std::string::npos);
}

TEST(FabricAdvert, HostId) {
  auto id = parse_host_id("0123456789abcdef");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "0123456789abcdef");
  auto blanks = parse_host_id(" \t9f86d081884c7d65 ");
  ASSERT_TRUE(blanks.ok());
  EXPECT_EQ(*blanks, "9f86d081884c7d65");
  auto upper = parse_host_id("0123456789ABCDEF");
  ASSERT_FALSE(upper.ok());
  EXPECT_EQ(upper.code(), Errc::invalid_argument);
  EXPECT_NE(upper.status().message().find("byte 0x41 at offset 10"), std::string::npos)
      << upper.status().message();
  for (const std::string& bad :
       {std::string(""), std::string("0123456789abcde"), std::string("0123456789abcdef0"),
        std::string("0123456789abcdeg"), std::string("01234567 89abcdef"),
        std::string("0123456789abcde\n")}) {
    auto r = parse_host_id(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().message().starts_with("x-amz-rdma-host-id: ")) << bad;
  }
}

std::vector<std::string> load_corpus() {
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(OBJDIRECT_FABRIC_ADVERT_CORPUS_DIR)) {
    std::ifstream in(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return seeds;
}

TEST(FabricAdvertFuzz, BodyHoldsOnSeedsAndTheirMutations) {
  const auto seeds = load_corpus();
  ASSERT_GE(seeds.size(), 8u);
  std::mt19937_64 rng(21);
  static const char raw[] = "abcdefABCDEF0123456789:_-.+/ ,\t\r\n;=\"\x00\xff";
  const std::string alphabet(raw, sizeof(raw) - 1);  // the NUL included
  int lists = 0, host_ids = 0;
  for (const std::string& seed : seeds) {
    EXPECT_TRUE(fuzz(seed)) << seed;
    for (int round = 0; round < 2000; ++round) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const std::size_t pos = s.empty() ? 0 : rng() % s.size();
        const char ch = alphabet[rng() % alphabet.size()];
        switch (rng() % 3) {
          case 0:
            if (!s.empty()) s[pos] = ch;
            break;
          case 1:
            s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), ch);
            break;
          default:
            if (!s.empty()) s.erase(pos, 1);
        }
      }
      ASSERT_TRUE(fuzz(s)) << "mutation of '" << seed << "'";
      lists += parse_fabric_advert(s).ok();
      host_ids += parse_host_id(s).ok();
    }
  }
  // The mutations reach both sides of both parsers.
  EXPECT_GT(lists, 1000);
  EXPECT_LT(lists, static_cast<int>(seeds.size()) * 2000);
  EXPECT_GT(host_ids, 10);
}

}  // namespace
}  // namespace objdirect::token

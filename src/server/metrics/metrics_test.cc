// Registry: sampled series keep the type they were registered with, and the registration rules
// (once per name, counters named *_total, gauges not) are assertions.
#include "server/metrics/metrics.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

namespace objdirect::metrics {
namespace {

TEST(MetricsRegistry, SampledSeriesKeepTheirTypeAndValueAtRender) {
  Registry r;
  std::atomic<int> n{3};
  r.add_counter("objdirect_test_things_total", "Things.", [&n] { return n.load(); });
  r.add_gauge("objdirect_test_level", "A level.", [] { return 0.5; });
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP objdirect_test_things_total Things.\n"
                      "# TYPE objdirect_test_things_total counter\n"
                      "objdirect_test_things_total 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE objdirect_test_level gauge\nobjdirect_test_level 0.5\n"),
            std::string::npos)
      << text;
  n = 7;  // sampled at each render, not at registration
  EXPECT_NE(r.render().find("objdirect_test_things_total 7\n"), std::string::npos);
  // The registry's own series are declared even before anything was recorded.
  EXPECT_NE(text.find("# TYPE objdirect_requests_total counter\n"), std::string::npos);
}

TEST(MetricsRegistryDeathTest, RegistrationRulesAreAssertions) {
  auto zero = [] { return 0.0; };
  EXPECT_DEATH(
      {
        Registry r;
        r.add_counter("objdirect_twice_total", "a", zero);
        r.add_counter("objdirect_twice_total", "b", zero);
      },
      "registered once");
  EXPECT_DEATH(
      {
        Registry r;
        r.add_gauge("objdirect_twice", "a", zero);
        r.add_counter("objdirect_twice_total", "b", zero);
        r.add_gauge("objdirect_twice", "c", zero);
      },
      "registered once");
  EXPECT_DEATH(
      {
        Registry r;
        r.add_counter("objdirect_no_suffix", "a", zero);
      },
      "ends in _total");
  EXPECT_DEATH(
      {
        Registry r;
        r.add_gauge("objdirect_level_total", "a", zero);
      },
      "does not end in _total");
  EXPECT_DEATH(
      {
        Registry r;
        r.add_counter("objdirect_requests_total", "a", zero);
      },
      "own series");
  EXPECT_DEATH(
      {
        Registry r;
        r.add_gauge("other_level", "a", zero);
      },
      "objdirect_");
}

}  // namespace
}  // namespace objdirect::metrics

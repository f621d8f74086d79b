// metrics::Sink: where a component registers the series it exports at GET /metrics.
//
// Each component that has counters (the HTTP server, the RDMA engine, the stores, the cache, the
// lifecycle worker) registers its own series through this narrow interface, so that the
// composition root (tools/objdirect-server) wires no metric by hand and the layers below server/
// (storage/) need not know the Prometheus registry (server/metrics). Every series is listed in
// docs/metrics.md, which the integration test test_metrics.py checks against a real scrape.
//
// Names: objdirect_<component>_<what>[_<unit>]; a counter's name ends in _total and a gauge's
// never does (the registry asserts both). Each name is registered once per process.
//
// Lifetime: a value function is called at every render of /metrics, from any thread, until the
// sink is destroyed. The component whose state it reads must outlive every render: in
// objdirect-server the registry is read only by the S3 service, which owns (directly or through
// the store and the engine) every component that registered a series.
#pragma once

#include <functional>
#include <string>

namespace objdirect::metrics {

class Sink {
 public:
  // Returns the value at render time; must be cheap and thread-safe.
  using ValueFn = std::function<double()>;

  virtual ~Sink() = default;
  // A monotonic total since the component started (Prometheus `counter`); name ends in _total.
  virtual void add_counter(const std::string& name, const std::string& help, ValueFn fn) = 0;
  // A value that goes up and down (Prometheus `gauge`); name does not end in _total.
  virtual void add_gauge(const std::string& name, const std::string& help, ValueFn fn) = 0;
};

}  // namespace objdirect::metrics

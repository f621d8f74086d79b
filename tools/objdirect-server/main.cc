// objdirect-server: an S3 server over HTTP with an RDMA data plane, in front of a local
// directory, a Ceph cluster or another S3 service. The composition root (docs/architecture.md):
// the flags fill a ServerConfig, open_store() opens the backend, and each component registers
// its own /metrics series (docs/metrics.md).
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "server/http/http_server.hpp"
#include "server/metrics/metrics.hpp"
#include "server/rdma/rdma_engine.hpp"
#include "server/s3/s3_service.hpp"
#include "server/server_config.hpp"
#include "storage/open_store.hpp"

int main(int argc, char** argv) {
  using namespace objdirect;
  // A client that closes mid-response must cost one connection, not the server: sendfile(2) and
  // write(2) to a closed socket raise SIGPIPE, whose default action kills the process.
  std::signal(SIGPIPE, SIG_IGN);
  auto parsed = server::parse_server_config(argc, argv);
  std::cout << parsed.out << std::flush;
  std::cerr << parsed.err;
  if (!parsed.config) return parsed.exit_code;
  server::ServerConfig& cfg = *parsed.config;

  auto registry = std::make_shared<metrics::Registry>();
  auto store = storage::open_store(cfg.store, registry.get());
  if (!store.ok()) {
    std::cerr << "objdirect-server: " << store.status().message() << "\n";
    return store.code() == Errc::invalid_argument ? 2 : 1;
  }
  auto engine = rdma::RdmaEngine::create(cfg.rdma);
  if (!engine.ok()) {
    std::cerr << "objdirect-server: --fabric " << cfg.rdma.fabrics << ": "
              << engine.status().message() << "\n";
    return 1;
  }
  for (const auto& line : (*engine)->init_log())
    std::cerr << "objdirect-server: rdma " << line << "\n";
  (*engine)->register_metrics(*registry);
  cfg.s3.metrics = registry;
  auto service = std::make_shared<s3::S3Service>(cfg.s3, *store);
  service->set_rdma(*engine);
  http::HttpServer server(cfg.http, service);
  server.register_metrics(*registry);
  if (auto st = server.start(); !st.ok()) {
    std::cerr << "objdirect-server: " << st.message() << "\n";
    return 1;
  }
  boost::asio::signal_set signals(server.io_context(), SIGINT, SIGTERM);
  // Waiters for RDMA admission hold I/O threads: refuse them first so that stop() joins at once.
  signals.async_wait([&server, eng = *engine](const boost::system::error_code&, int) {
    eng->shutdown();
    server.stop();
  });
  const auto& host = cfg.http.host;
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  std::printf("objdirect-server listening on %s://%s:%u\n",
              cfg.http.tls_cert_file.empty() ? "http" : "https", shown.c_str(), server.port());
  std::fflush(stdout);
  std::cerr << "objdirect-server: TCP congestion control " << server.tcp_congestion()
            << (cfg.http.tcp_congestion.empty() ? " (the kernel's default; --tcp-congestion)" : "")
            << "\n";
  server.run();
  return 0;
}

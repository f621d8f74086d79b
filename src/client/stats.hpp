// ClientCounters: the counters behind Client::stats(), fed by HttpClient::execute (requests,
// errors, retries, in-flight) and by the data calls in client.cc (bytes and declines by path).
//
// Thread safety: thread-safe; every method may be called from any thread at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "client/http_client.hpp"
#include "objdirect/client.hpp"

namespace objdirect::client {

class ClientCounters {
 public:
  // One finished HttpClient request (r: the response, or why none arrived).
  void on_response(const HttpRequest& req, const Result<HttpResponse>& r);
  // A request that is about to be sent again, and why (a ClientStats::retry_reasons key).
  void on_retry(std::string_view reason);
  // A CompleteMultipartUpload whose lost answer HEAD confirmed.
  void on_complete_confirmed();
  // A registration revoked after an RDMA request that did not succeed.
  void on_rdma_revocation();
  // A new memory registration with a fabric.
  void on_rdma_registration();
  // A transfer the server failed over `fabric`; a request that skipped `fabric` after one.
  void on_fabric_failure(const std::string& fabric);
  void on_fabric_skipped(const std::string& fabric);
  // A data call whose path auto's measurements chose (a ClientStats::auto_choices key).
  void on_auto_choice(std::string_view why);
  // A successful data call.
  void on_transfer(const TransferResult& res);

  // Counts a request in flight for its lifetime.
  class InFlight {
   public:
    explicit InFlight(ClientCounters& c) : c_(c) { c_.in_flight_.fetch_add(1); }
    ~InFlight() { c_.in_flight_.fetch_sub(1); }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    ClientCounters& c_;
  };

  ClientStats snapshot() const;

  // The S3 operation of a path-style request, e.g. ("PUT", "/b/k?partNumber=1&uploadId=u") ->
  // "UploadPart". copy: the request has x-amz-copy-source.
  static std::string_view op_name(std::string_view method, std::string_view target, bool copy);
  // The ClientStats::rdma_declines key for a TransferResult::reason.
  static std::string_view decline_class(std::string_view reason);

 private:
  mutable std::mutex mu_;
  ClientStats s_;
  std::atomic<std::uint64_t> in_flight_{0};
};

}  // namespace objdirect::client

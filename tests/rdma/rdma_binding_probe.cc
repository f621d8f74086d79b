// rdma_binding_probe: the victim, attacker and bystander processes of the endpoint-binding and
// single-use tests (rdma_binding_test.sh; docs/rdma_protocol.md, "Threat model"). Each mode is a
// separate process with its own credentials and its own fabric endpoint; they meet only through
// files in a shared directory, as leaked tokens and captured requests would.
//
//   victim   URL FABRIC AK SK DIR  binds, does a real RDMA PUT and GET (raw signed requests, saved
//                                  to DIR with their tokens), leaves a known pattern in its buffer
//                                  and waits for DIR/check; then reports whether any byte of its
//                                  buffer changed and checks that its own RDMA still works.
//   attack   URL FABRIC AK SK DIR  uses the victim's leaked PUT and GET tokens, tokens forged from
//                                  their fields (fresh nonce and expiry, with and without the
//                                  proof flag, and an expired one), its own bind attempt on the
//                                  victim's endpoint, and verbatim replays of the victim's
//                                  requests; every one must be refused and nothing stored.
//   second   URL FABRIC AK SK DIR  a second process of the victim's principal with its own
//                                  endpoint: binds and reads the victim's object over RDMA.
//   dcv1     URL AK SK             cuObject DC_V1 token: GET and Range GET answer 501 with the
//                                  body, PUT answers 501 and stores nothing.
//   ssec     URL FABRIC AK SK      SSE-C over RDMA (docs/sse-c.md; the server runs with
//                                  --sse-c-over-http): an RDMA PUT with a customer key, RDMA GET
//                                  and Range GET with it land the plaintext, an HTTP GET with it
//                                  matches, and an RDMA GET without the key or with another one
//                                  is refused and leaves the buffer untouched.
// Exit status 0 when every expectation held; each check prints one line (PASS/FAIL ...).
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "auth/sigv4.hpp"
#include "client/http_client.hpp"
#include "common/checksum.hpp"
#include "common/time.hpp"
#include "token/binding.hpp"
#include "token/token.hpp"
#include "transport/transport.hpp"

namespace fs = std::filesystem;
using namespace objdirect;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kBytes = 64 << 10;  // victim buffer; above shm's 4 KiB inline limit
int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

std::uint64_t now_s() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

void write_file(const fs::path& p, const std::string& data) {
  fs::path tmp = p;
  tmp += ".tmp";
  std::ofstream(tmp, std::ios::binary) << data;
  fs::rename(tmp, p);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_for(const fs::path& p, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(p)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

struct Server {
  client::Endpoint ep;
  std::unique_ptr<client::HttpClient> http;
  std::string ak, sk;

  Server(const std::string& url, std::string a, std::string s)
      : ak(std::move(a)), sk(std::move(s)) {
    auto e = client::parse_endpoint(url);
    if (!e.ok()) {
      std::fprintf(stderr, "bad endpoint %s\n", url.c_str());
      std::exit(2);
    }
    ep = *e;
    client::HttpOptions o;
    o.endpoint = ep;
    o.credentials = {ak, sk};
    o.region = "us-east-1";
    http = std::make_unique<client::HttpClient>(o);
  }

  client::HttpResponse request(const std::string& method, const std::string& target,
                               std::vector<std::pair<std::string, std::string>> headers = {},
                               std::span<const std::byte> body = {},
                               std::optional<std::span<std::byte>> sink = std::nullopt) {
    client::HttpRequest r;
    r.method = method;
    r.target = target;
    r.headers = std::move(headers);
    r.body = body;
    r.send_content_length = method == "PUT" || method == "POST";
    auto res = http->execute(r, sink);
    if (!res.ok()) {
      std::printf("request %s %s failed: %s\n", method.c_str(), target.c_str(),
                  res.status().to_string().c_str());
      return {};
    }
    return *res;
  }

  // A signed request as raw bytes (what a proxy or a debug log would capture).
  std::string raw_request(const std::string& method, const std::string& target,
                          const std::string& token) const {
    const auto now = std::chrono::system_clock::now();
    const std::string date = amz_date(now);
    const std::string payload =
        method == "PUT" ? std::string(sigv4::kUnsignedPayload) : std::string(sigv4::kEmptySha256);
    sigv4::RequestView v;
    v.method = method;
    v.target = target;
    v.headers = {{"host", ep.host_header},
                 {"x-amz-content-sha256", payload},
                 {"x-amz-date", date},
                 {"x-amz-rdma-token", token}};
    const std::string auth = sigv4::sign(v, {ak, sk}, "us-east-1", "s3", now);
    std::string req = method + " " + target + " HTTP/1.1\r\nhost: " + ep.host_header +
                      "\r\nx-amz-content-sha256: " + payload + "\r\nx-amz-date: " + date +
                      "\r\nx-amz-rdma-token: " + token + "\r\nauthorization: " + auth +
                      "\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    return req;
  }

  // Sends raw bytes on a new connection; returns the raw response.
  std::string send_raw(const std::string& bytes) const {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(ep.host.c_str(), ep.port.c_str(), &hints, &res) != 0 || !res) return {};
    int fd = ::socket(res->ai_family, SOCK_STREAM, 0);
    std::string out;
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
    }
    ::close(fd);
    freeaddrinfo(res);
    return out;
  }
};

std::string header(const client::HttpResponse& r, std::string_view name) {
  auto h = r.header(name);
  return h ? std::string(*h) : std::string();
}

std::string s3_code(const std::string& body) {
  auto a = body.find("<Code>");
  auto b = body.find("</Code>");
  if (a == std::string::npos || b == std::string::npos) return {};
  return body.substr(a + 6, b - a - 6);
}

int raw_status(const std::string& raw) {
  if (raw.size() < 12 || raw.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(raw.c_str() + 9);
}

// A fabric endpoint with one registered buffer and a binding mailbox, as the client library has.
struct Endpoint {
  std::unique_ptr<transport::Transport> tr;
  std::vector<std::byte> buf;
  std::shared_ptr<transport::MemoryRegion> mr;
  std::array<std::byte, limits::token_mailbox_bytes> mailbox{};
  std::shared_ptr<transport::MemoryRegion> mailbox_mr;
  std::shared_ptr<void> hot;
  bool proof_ready = false;

  // `s`: the server it will talk to. As the client library does (docs/client.md, "Choosing a
  // fabric"), the fabric serves the interface of the HTTP connection to the server, so that across
  // hosts no FI_TCP_IFACE / UCX_NET_DEVICES is needed.
  static std::unique_ptr<Endpoint> open(const std::string& fabric, std::size_t bytes, Server& s) {
    transport::Config cfg;
    cfg.fabric = fabric;
    if (auto local = s.http->local_address(); local.ok()) cfg.local_host = *local;
    auto t = transport::create_transport(cfg);
    if (!t.ok()) {
      std::printf("SKIP %s: %s\n", fabric.c_str(), t.status().to_string().c_str());
      std::exit(77);
    }
    auto e = std::make_unique<Endpoint>();
    e->tr = std::move(*t);
    e->hot = e->tr->keep_progress_hot(0, false);
    e->buf.assign(bytes, std::byte{0});
    auto mr = e->tr->register_memory(e->buf.data(), e->buf.size(), token::MemoryType::host);
    auto mb = e->tr->register_memory(e->mailbox.data(), e->mailbox.size(), token::MemoryType::host);
    if (!mr.ok() || !mb.ok()) std::exit(2);
    e->mr = *mr;
    e->mailbox_mr = *mb;
    return e;
  }

  token::Token make(std::size_t length) const {
    std::vector<token::Segment> segs;
    if (length > 0) segs.push_back(mr->remote_segment(0, length));
    auto t = transport::make_token(*tr, std::move(segs), token::MemoryType::host, now_s() + 60);
    t.mailbox = mailbox_mr->remote_segment(0, limits::token_mailbox_bytes);
    t.proof_ready = proof_ready;
    return t;
  }
  std::string token(std::size_t length) const { return token::encode(make(length)); }

  // The explicit bind call, as the client library does it on its first refusal.
  bool bind(Server& s) {
    auto r = s.request("POST", "/?rdma-bind", {{"x-amz-rdma-token", token(0)}});
    if (r.status == 204) return true;
    auto ch = token::decode_challenge(header(r, "x-amz-rdma-challenge"));
    if (r.status != 403 || !ch.ok()) {
      std::printf("bind: unexpected %d %s\n", r.status, r.body.c_str());
      return false;
    }
    const token::Proof p = token::bind_proof(s.sk, *ch, tr->local_address());
    std::memcpy(mailbox.data(), p.data(), p.size());
    mailbox_mr->synchronize();
    proof_ready = true;
    r = s.request("POST", "/?rdma-bind", {{"x-amz-rdma-token", token(0)}});
    return r.status == 204;
  }
};

std::string bytes_str(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

int victim(Server& s, const std::string& fabric, const fs::path& dir) {
  auto e = Endpoint::open(fabric, kBytes, s);
  const std::string bucket = "victim-" + std::to_string(getpid());
  check(s.request("PUT", "/" + bucket).status == 200, "victim creates its bucket");
  check(e->bind(s), "victim binds its endpoint (" + fabric + ")");
  // A real RDMA PUT of V, sent as raw signed bytes that are kept for the attacker.
  const auto v = pattern(kBytes, 1);
  std::copy(v.begin(), v.end(), e->buf.begin());
  e->mr->synchronize();
  const std::string put_token = e->token(kBytes);
  const std::string put_req = s.raw_request("PUT", "/" + bucket + "/secret", put_token);
  std::string raw = s.send_raw(put_req);
  check(raw_status(raw) == 200 && raw.find("x-amz-rdma-reply: 200") != std::string::npos,
        "victim's RDMA PUT succeeds: " + raw.substr(0, raw.find("\r\n")));
  // A real RDMA GET of it into the zeroed buffer.
  std::fill(e->buf.begin(), e->buf.end(), std::byte{0});
  e->mr->synchronize();
  const std::string get_token = e->token(kBytes);
  const std::string get_req = s.raw_request("GET", "/" + bucket + "/secret", get_token);
  raw = s.send_raw(get_req);
  e->mr->synchronize();
  check(raw_status(raw) == 200 && raw.find("x-amz-rdma-reply: 200") != std::string::npos &&
            std::equal(v.begin(), v.end(), e->buf.begin()),
        "victim's RDMA GET succeeds and lands V");
  // What is in the buffer from now on must stay exactly so.
  const auto f = pattern(kBytes, 2);
  std::copy(f.begin(), f.end(), e->buf.begin());
  e->mr->synchronize();
  const std::array<std::byte, limits::token_mailbox_bytes> mailbox_before = e->mailbox;
  write_file(dir / "put_token", put_token);
  write_file(dir / "get_token", get_token);
  write_file(dir / "put_request", put_req);
  write_file(dir / "get_request", get_req);
  write_file(dir / "victim_bytes", bytes_str(v) + bytes_str(f));
  write_file(dir / "victim_object", "/" + bucket + "/secret");
  write_file(dir / "ready", "1");
  if (!wait_for(dir / "check", 300s)) {
    check(false, "victim: nobody asked it to check");
    return 1;
  }
  e->mr->synchronize();
  e->mailbox_mr->synchronize();
  std::size_t first_diff = kBytes;
  for (std::size_t i = 0; i < kBytes; ++i) {
    if (e->buf[i] != f[i]) {
      first_diff = i;
      break;
    }
  }
  check(first_diff == kBytes, first_diff == kBytes
                                  ? "victim buffer byte-for-byte untouched"
                                  : "victim buffer MODIFIED at byte " + std::to_string(first_diff));
  check(e->mailbox == mailbox_before, "victim mailbox untouched");
  // The victim's own RDMA still works after the attacks (its binding is intact).
  std::fill(e->buf.begin(), e->buf.end(), std::byte{0});
  e->mr->synchronize();
  auto r = s.request("GET", "/" + bucket + "/secret", {{"x-amz-rdma-token", e->token(kBytes)}});
  e->mr->synchronize();
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "200" &&
            std::equal(v.begin(), v.end(), e->buf.begin()),
        "victim's RDMA GET still works after the attacks");
  write_file(dir / "victim_done", failures == 0 ? "ok" : "failed");
  return failures == 0 ? 0 : 1;
}

// Expects a refusal that moved nothing: an error status and no successful x-amz-rdma-reply.
void expect_refused(const client::HttpResponse& r, const std::string& what,
                    std::initializer_list<std::string_view> codes) {
  const std::string code = s3_code(r.body);
  bool code_ok = false;
  for (auto c : codes) code_ok |= code == c;
  const std::string reply = header(r, "x-amz-rdma-reply");
  check(r.status >= 400 && reply != "200" && reply != "206" && code_ok,
        what + " refused: " + std::to_string(r.status) + " " + code);
}

int attack(Server& s, const std::string& fabric, const fs::path& dir) {
  if (!wait_for(dir / "ready", 120s)) {
    check(false, "attacker: the victim never became ready");
    return 1;
  }
  const std::string put_token = read_file(dir / "put_token");
  const std::string get_token = read_file(dir / "get_token");
  const std::string victim_bytes = read_file(dir / "victim_bytes");
  const std::string bucket = "mallory-" + std::to_string(getpid());
  check(s.request("PUT", "/" + bucket).status == 200, "attacker creates its bucket");
  const auto mine = pattern(kBytes, 3);
  check(s.request("PUT", "/" + bucket + "/mine", {}, mine).status == 200,
        "attacker stores its own object");
  const std::vector<std::pair<std::string, std::string>> put_hdr = {
      {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}};
  auto put_with = [&](const std::string& tok, const std::string& key) {
    auto h = put_hdr;
    h.emplace_back("x-amz-rdma-token", tok);
    return s.request("PUT", "/" + bucket + "/" + key, h);
  };
  auto get_with = [&](const std::string& tok) {
    return s.request("GET", "/" + bucket + "/mine", {{"x-amz-rdma-token", tok}});
  };
  // 1, 2: the leaked tokens themselves (their nonces are spent).
  expect_refused(put_with(put_token, "stolen1"), "leaked PUT token",
                 {"RDMATokenReplayed", "RDMAEndpointNotBound"});
  expect_refused(get_with(get_token), "leaked GET token",
                 {"RDMATokenReplayed", "RDMAEndpointNotBound"});
  // 3: forged from the leaked fields: fresh nonce and expiry, with and without the proof flag.
  auto leaked = token::decode(get_token, now_s());
  if (!leaked.ok()) leaked = token::decode(put_token, now_s());
  check(leaked.ok(), "attacker decodes a leaked token");
  if (leaked.ok()) {
    std::mt19937_64 rng(std::random_device{}());
    for (bool proof : {false, true}) {
      token::Token f = *leaked;
      for (auto& b : f.nonce) b = static_cast<std::uint8_t>(rng());
      f.expires_unix_s = now_s() + 60;
      f.proof_ready = proof;
      const std::string tag = proof ? " (proof flag set)" : "";
      expect_refused(put_with(token::encode(f), "stolen2"), "forged PUT token" + tag,
                     {"RDMAEndpointNotBound"});
      for (auto& b : f.nonce) b = static_cast<std::uint8_t>(rng());
      expect_refused(get_with(token::encode(f)), "forged GET token" + tag,
                     {"RDMAEndpointNotBound"});
    }
    // The attacker runs the bind protocol on the victim's endpoint: it gets a challenge and can
    // compute its own proof, but cannot put it into the victim's mailbox.
    token::Token b = *leaked;
    b.segments.clear();
    b.total_length = 0;
    for (auto& x : b.nonce) x = static_cast<std::uint8_t>(rng());
    b.expires_unix_s = now_s() + 60;
    b.proof_ready = false;
    auto r = s.request("POST", "/?rdma-bind", {{"x-amz-rdma-token", token::encode(b)}});
    expect_refused(r, "bind of the victim's endpoint", {"RDMAEndpointNotBound"});
    check(!header(r, "x-amz-rdma-challenge").empty(), "the refusal carries a challenge");
    for (auto& x : b.nonce) x = static_cast<std::uint8_t>(rng());
    b.proof_ready = true;
    expect_refused(s.request("POST", "/?rdma-bind", {{"x-amz-rdma-token", token::encode(b)}}),
                   "bind of the victim's endpoint with the proof flag", {"RDMAEndpointNotBound"});
    // An expired forgery: refused as expired before anything else.
    token::Token old = *leaked;
    for (auto& x : old.nonce) x = static_cast<std::uint8_t>(rng());
    old.expires_unix_s = now_s() - 1;
    expect_refused(get_with(token::encode(old)), "expired forged token", {"InvalidRDMAToken"});
  }
  // 4: verbatim replays of the victim's own signed requests.
  for (const char* which : {"get_request", "put_request"}) {
    const std::string raw = s.send_raw(read_file(dir / which));
    const int st = raw_status(raw);
    check(st == 403 && raw.find("RDMATokenReplayed") != std::string::npos &&
              raw.find("x-amz-rdma-reply: 200") == std::string::npos,
          std::string("verbatim replay of the victim's ") + which +
              " refused: " + std::to_string(st));
  }
  // Nothing of the victim's reached the attacker: no stolen object exists.
  for (const char* key : {"stolen1", "stolen2"}) {
    std::vector<std::byte> back(kBytes * 2);
    auto r = s.request("GET", "/" + bucket + "/" + key, {}, {}, std::span(back));
    bool leaked_bytes = false;
    if (r.status == 200) {
      const std::string got = bytes_str(std::span(back).subspan(0, r.sink_bytes));
      leaked_bytes = !got.empty() && victim_bytes.find(got.substr(0, 64)) != std::string::npos;
    }
    check(r.status == 404 && !leaked_bytes,
          std::string("attacker object ") + key + " does not exist: " + std::to_string(r.status));
  }
  // The attacker's own endpoint, bound to its own key, works: the server refuses per endpoint.
  auto own = Endpoint::open(fabric, kBytes, s);
  check(own->bind(s), "attacker binds its own endpoint");
  auto r = get_with(own->token(kBytes));
  own->mr->synchronize();
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "200" &&
            std::equal(mine.begin(), mine.end(), own->buf.begin()),
        "attacker's RDMA GET into its own memory works");
  return failures == 0 ? 0 : 1;
}

int second(Server& s, const std::string& fabric, const fs::path& dir) {
  if (!wait_for(dir / "ready", 120s)) return 1;
  const std::string object = read_file(dir / "victim_object");
  const std::string v = read_file(dir / "victim_bytes").substr(0, kBytes);
  auto e = Endpoint::open(fabric, kBytes, s);
  // First request on a new endpoint: refused with a challenge (not yet bound)...
  auto r = s.request("GET", object, {{"x-amz-rdma-token", e->token(kBytes)}});
  check(r.status == 403 && s3_code(r.body) == "RDMAEndpointNotBound",
        "a new endpoint of the same principal is not bound yet");
  // ...then bound by its own proof, and served.
  check(e->bind(s), "a second process of the victim's principal binds its own endpoint");
  r = s.request("GET", object, {{"x-amz-rdma-token", e->token(kBytes)}});
  e->mr->synchronize();
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "200" && bytes_str(e->buf) == v,
        "the second process reads the victim's object over RDMA");
  return failures == 0 ? 0 : 1;
}

int dcv1(Server& s) {
  const std::string bucket = "dcv1-" + std::to_string(getpid());
  check(s.request("PUT", "/" + bucket).status == 200, "bucket");
  const auto data = pattern(10000, 4);
  check(s.request("PUT", "/" + bucket + "/o", {}, data).status == 200, "object over HTTP");
  // raddr:rsize:rkey:lid:dctn:has_gid:gid, 81 hexadecimal characters with separators.
  const std::string dc =
      "00007f0012340000:00010000:0000abcd:0001:00002a:1:"
      "fe800000000000000000000000000001";
  check(dc.size() == 81, "the DC_V1 descriptor has 81 characters");
  std::vector<std::byte> back(data.size());
  auto r = s.request("GET", "/" + bucket + "/o", {{"x-amz-rdma-token", dc}}, {}, std::span(back));
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "501" && back == data,
        "DC_V1 GET: 200, x-amz-rdma-reply 501, the body over HTTP");
  std::vector<std::byte> part(100);
  r = s.request("GET", "/" + bucket + "/o", {{"range", "bytes=100-199"}, {"x-amz-rdma-token", dc}},
                {}, std::span(part));
  check(r.status == 206 && header(r, "x-amz-rdma-reply") == "501" &&
            std::equal(part.begin(), part.end(), data.begin() + 100),
        "DC_V1 Range GET: 206, x-amz-rdma-reply 501, the range over HTTP");
  r = s.request("PUT", "/" + bucket + "/p",
                {{"x-amz-rdma-token", dc}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
  check(r.status == 501 && header(r, "x-amz-rdma-reply") == "501",
        "DC_V1 PUT: 501 with x-amz-rdma-reply 501: " + std::to_string(r.status));
  check(s.request("HEAD", "/" + bucket + "/p").status == 404, "DC_V1 PUT stored nothing");
  // UploadPart the same.
  r = s.request("POST", "/" + bucket + "/mp?uploads");
  auto a = r.body.find("<UploadId>");
  auto b = r.body.find("</UploadId>");
  check(a != std::string::npos && b != std::string::npos, "multipart upload created");
  if (a != std::string::npos && b != std::string::npos) {
    const std::string id = r.body.substr(a + 10, b - a - 10);
    r = s.request("PUT", "/" + bucket + "/mp?partNumber=1&uploadId=" + id,
                  {{"x-amz-rdma-token", dc}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}});
    check(r.status == 501 && header(r, "x-amz-rdma-reply") == "501",
          "DC_V1 UploadPart: 501: " + std::to_string(r.status));
    r = s.request("GET", "/" + bucket + "/mp?uploadId=" + id);
    check(r.status == 200 && r.body.find("<Part>") == std::string::npos,
          "DC_V1 UploadPart stored no part");
  }
  // A malformed token of ours is still 400.
  r = s.request("GET", "/" + bucket + "/o", {{"x-amz-rdma-token", "OD1.garbage!"}});
  check(r.status == 400 && s3_code(r.body) == "InvalidRDMAToken", "malformed OD1. token: 400");
  return failures == 0 ? 0 : 1;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> sse_c_headers(std::uint8_t seed,
                                                               std::string token = {}) {
  std::string key(32, '\0');
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<char>(seed + i);
  Md5 md5;
  md5.update(key.data(), key.size());
  std::vector<std::pair<std::string, std::string>> h = {
      {"x-amz-server-side-encryption-customer-algorithm", "AES256"},
      {"x-amz-server-side-encryption-customer-key", base64_encode(key)},
      {"x-amz-server-side-encryption-customer-key-MD5", base64_encode(md5.raw())}};
  if (!token.empty()) h.emplace_back("x-amz-rdma-token", std::move(token));
  return h;
}

int ssec(Server& s, const std::string& fabric) {
  auto e = Endpoint::open(fabric, kBytes, s);
  const std::string bucket = "ssec-" + std::to_string(getpid());
  const std::string obj = "/" + bucket + "/enc";
  check(s.request("PUT", "/" + bucket).status == 200, "bucket");
  check(e->bind(s), "binds its endpoint (" + fabric + ")");
  const auto v = pattern(kBytes, 5);
  std::copy(v.begin(), v.end(), e->buf.begin());
  e->mr->synchronize();
  auto r = s.request("PUT", obj, sse_c_headers(1, e->token(kBytes)));
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "200" &&
            header(r, "x-amz-server-side-encryption-customer-algorithm") == "AES256",
        "RDMA PUT with a customer key: " + std::to_string(r.status) + " " + r.body);
  // RDMA GET with the key: the plaintext lands.
  std::fill(e->buf.begin(), e->buf.end(), std::byte{0});
  e->mr->synchronize();
  r = s.request("GET", obj, sse_c_headers(1, e->token(kBytes)));
  e->mr->synchronize();
  check(r.status == 200 && header(r, "x-amz-rdma-reply") == "200" &&
            std::equal(v.begin(), v.end(), e->buf.begin()),
        "RDMA GET with the key lands the plaintext");
  // A Range GET from inside a 16-byte block.
  std::fill(e->buf.begin(), e->buf.end(), std::byte{0});
  e->mr->synchronize();
  auto h = sse_c_headers(1, e->token(1000));
  h.emplace_back("range", "bytes=4103-5102");
  r = s.request("GET", obj, h);
  e->mr->synchronize();
  check(r.status == 206 && header(r, "x-amz-rdma-reply") == "206" &&
            std::equal(v.begin() + 4103, v.begin() + 5103, e->buf.begin()),
        "RDMA Range GET with the key lands the plaintext slice");
  // Over HTTP with the key: the same bytes.
  std::vector<std::byte> back(kBytes);
  r = s.request("GET", obj, sse_c_headers(1), {}, std::span(back));
  check(r.status == 200 && back == v, "HTTP GET with the key matches");
  // Without the key and with another: refused, nothing written into the buffer.
  const auto f = pattern(kBytes, 6);
  std::copy(f.begin(), f.end(), e->buf.begin());
  e->mr->synchronize();
  r = s.request("GET", obj, {{"x-amz-rdma-token", e->token(kBytes)}});
  check(r.status == 400 && s3_code(r.body) == "InvalidRequest" &&
            header(r, "x-amz-rdma-reply").empty(),
        "RDMA GET without the key refused: " + std::to_string(r.status));
  r = s.request("GET", obj, sse_c_headers(2, e->token(kBytes)));
  check(
      r.status == 403 && s3_code(r.body) == "AccessDenied" && header(r, "x-amz-rdma-reply").empty(),
      "RDMA GET with another key refused: " + std::to_string(r.status));
  e->mr->synchronize();
  check(std::equal(f.begin(), f.end(), e->buf.begin()), "the refused GETs wrote nothing");
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "dcv1") {
    Server s(a[1], a[2], a[3]);
    return dcv1(s);
  }
  if (a.size() == 5 && a[0] == "ssec") {
    Server s(a[1], a[3], a[4]);
    return ssec(s, a[2]);
  }
  if (a.size() != 6) {
    std::fprintf(stderr,
                 "usage: rdma_binding_probe victim|attack|second URL FABRIC AK SK DIR\n"
                 "       rdma_binding_probe dcv1 URL AK SK\n");
    return 2;
  }
  Server s(a[1], a[3], a[4]);
  const fs::path dir = a[5];
  if (a[0] == "victim") return victim(s, a[2], dir);
  if (a[0] == "attack") return attack(s, a[2], dir);
  if (a[0] == "second") return second(s, a[2], dir);
  return 2;
}

#include "client/fabric_choice.hpp"

#include <algorithm>
#include <cstdio>

#include "token/fabric_advert.hpp"

namespace objdirect::client {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    auto comma = v.find(',');
    std::string_view item = trim(v.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

const FabricRow* find_row(std::span<const FabricRow> rows, std::string_view name) {
  for (const auto& r : rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string seconds(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

ServerFabrics parse_server_fabrics(std::optional<std::string_view> fabrics,
                                   std::optional<std::string_view> host_id) {
  ServerFabrics s;
  if (fabrics) {
    s.known = true;
    auto names = token::parse_fabric_advert(*fabrics);
    if (names.ok()) {
      s.offered = std::move(*names);
    } else {
      s.fabrics_error = names.status().message();
    }
  }
  if (host_id) {
    auto id = token::parse_host_id(*host_id);
    if (id.ok()) {
      s.host_id = std::move(*id);
    } else {
      s.host_id_error = id.status().message();
    }
  }
  return s;
}

std::vector<std::string> default_fabric_order(std::span<const FabricRow> rows) {
  std::vector<const FabricRow*> sorted;
  for (const auto& r : rows) sorted.push_back(&r);
  auto kind = [](const FabricRow* r) { return r->same_host_only ? 0 : r->nic ? 1 : 2; };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const FabricRow* a, const FabricRow* b) {
    if (kind(a) != kind(b)) return kind(a) < kind(b);
    return a->preference < b->preference;
  });
  std::vector<std::string> out;
  for (const auto* r : sorted) out.push_back(r->name);
  return out;
}

std::optional<std::vector<std::string>> parse_fabric_order(std::string_view text,
                                                           std::span<const FabricRow> rows,
                                                           std::string& error) {
  if (trim(text).empty()) return default_fabric_order(rows);
  auto names = split_list(text);
  if (names.size() > limits::client_fabric_order_entries_max) {
    error = "fabric order names " + std::to_string(names.size()) + " fabrics, at most " +
            std::to_string(limits::client_fabric_order_entries_max);
    return std::nullopt;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (find_row(rows, names[i]) == nullptr) {
      std::string known;
      for (const auto& r : rows) known += (known.empty() ? "" : ", ") + r.name;
      error = "fabric order: unknown fabric '" + names[i] + "' (known: " + known + ")";
      return std::nullopt;
    }
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), names[i]) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      error = "fabric order names '" + names[i] + "' twice";
      return std::nullopt;
    }
  }
  return names;
}

bool same_host(const ServerFabrics& server, const std::string& own_host_id,
               bool loopback_endpoint) {
  if (!server.host_id_error.empty()) return false;
  if (!server.host_id.empty() && !own_host_id.empty()) return server.host_id == own_host_id;
  return loopback_endpoint;
}

std::vector<std::string> auto_candidates(const ServerFabrics& server, bool same_host,
                                         std::span<const std::string> order,
                                         std::span<const FabricRow> rows) {
  std::vector<std::string> out;
  for (const auto& name : order) {
    const FabricRow* row = find_row(rows, name);
    if (row == nullptr) continue;
    if (server.known &&
        std::find(server.offered.begin(), server.offered.end(), name) == server.offered.end()) {
      continue;
    }
    if (row->same_host_only && !same_host) continue;
    out.push_back(name);
  }
  return out;
}

FabricFailures& FabricFailures::process() {
  static FabricFailures f;
  return f;
}

void FabricFailures::record(const std::string& server, const std::string& fabric,
                            std::string reason, std::chrono::milliseconds hold,
                            Clock::time_point now) {
  std::lock_guard lk(mu_);
  std::erase_if(entries_, [&](const auto& kv) { return kv.second.until <= now; });
  auto key = std::make_pair(server, fabric);
  if (!entries_.contains(key) && entries_.size() >= limits::client_fabric_failures_remembered_max) {
    auto first = std::min_element(
        entries_.begin(), entries_.end(),
        [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
    entries_.erase(first);
  }
  entries_[key] = Entry{now, now + hold, std::move(reason)};
}

void FabricFailures::clear(const std::string& server, const std::string& fabric) {
  std::lock_guard lk(mu_);
  entries_.erase(std::make_pair(server, fabric));
}

std::optional<std::string> FabricFailures::skipped(const std::string& server,
                                                   const std::string& fabric,
                                                   Clock::time_point now) const {
  std::lock_guard lk(mu_);
  auto it = entries_.find(std::make_pair(server, fabric));
  if (it == entries_.end() || it->second.until <= now) return std::nullopt;
  return fabric + " failed against this server " + seconds(now - it->second.failed_at) + " ago (" +
         it->second.reason + "); next try in " + seconds(it->second.until - now);
}

std::size_t FabricFailures::size() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

void FabricFailures::reset() {
  std::lock_guard lk(mu_);
  entries_.clear();
}

}  // namespace objdirect::client

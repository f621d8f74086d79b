// SpoolWriter: the gateway's BlobWriter. Appended bytes are spooled (memory up to
// spool_memory_bytes, then an unlinked temporary file in spool_dir) until commit sends them
// upstream as a PutObject or the parts of a multipart upload. Internal to storage/s3.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

// Spools appended bytes: memory up to spool_memory_bytes, then an unlinked temporary file.
class SpoolWriter final : public BlobWriter {
 public:
  explicit SpoolWriter(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~SpoolWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status append(std::span<const std::byte> data) override {
    if (!failed_.ok()) return failed_;
    if (size_ + data.size() > core_->opts.spool_bytes_max) {
      failed_ = Status(Errc::entity_too_large,
                       "the gateway spools at most " + std::to_string(core_->opts.spool_bytes_max) +
                           " bytes per object or part (--gateway-spool-bytes-max)");
      return failed_;
    }
    const char* p = reinterpret_cast<const char*>(data.data());
    if (fd_ < 0 && mem_.size() + data.size() <= core_->opts.spool_memory_bytes) {
      mem_.append(p, data.size());
      size_ += data.size();
      return Status::Ok();
    }
    if (fd_ < 0) {
      if (auto st = spill(); !st.ok()) return failed_ = st;
    }
    if (auto st = write_all(p, data.size()); !st.ok()) return failed_ = st;
    size_ += data.size();
    return Status::Ok();
  }
  std::uint64_t size() const override { return size_; }

  // The bytes [offset, offset+length) as a request body.
  Body body(std::uint64_t offset, std::uint64_t length) const {
    Body b;
    if (fd_ < 0) {
      b.mem = mem_.data() + offset;
    } else {
      b.fd = fd_;
    }
    b.offset = fd_ < 0 ? 0 : offset;
    b.length = length;
    return b;
  }
  // Reads [offset, offset+length) back (per-part checksums).
  Status read(std::uint64_t offset, std::uint64_t length,
              const std::function<void(const char*, std::size_t)>& fn) const {
    if (fd_ < 0) {
      fn(mem_.data() + offset, length);
      return Status::Ok();
    }
    std::vector<char> buf(1 << 20);
    while (length > 0) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(length, buf.size()));
      const ssize_t got = ::pread(fd_, buf.data(), n, static_cast<off_t>(offset));
      if (got <= 0) return Status(Errc::io_error, "reading the spool file failed");
      fn(buf.data(), static_cast<std::size_t>(got));
      offset += static_cast<std::uint64_t>(got);
      length -= static_cast<std::uint64_t>(got);
    }
    return Status::Ok();
  }
  const std::shared_ptr<Core>& core() const { return core_; }

 private:
  Status spill() {
    std::string dir = core_->opts.spool_dir;
    if (dir.empty()) {
      const char* t = std::getenv("TMPDIR");
      dir = t && *t ? t : "/tmp";
    }
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      std::string path = dir + "/objdirect-spool-XXXXXX";
      fd_ = ::mkostemp(path.data(), O_CLOEXEC);
      if (fd_ >= 0) ::unlink(path.c_str());
    }
    if (fd_ < 0) {
      return Status(errno == ENOSPC ? Errc::no_space : Errc::io_error,
                    "cannot create a spool file in " + dir + ": " + strerror(errno));
    }
    core_->ctr.spooled_to_file++;
    OBJDIRECT_RETURN_IF_ERROR(write_all(mem_.data(), mem_.size()));
    std::string().swap(mem_);
    return Status::Ok();
  }
  Status write_all(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status(errno == ENOSPC || errno == EDQUOT ? Errc::no_space : Errc::io_error,
                      std::string("writing the gateway spool file: ") + strerror(errno));
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return Status::Ok();
  }

  std::shared_ptr<Core> core_;
  std::string mem_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  Status failed_;
};

}  // namespace objdirect::storage::s3gw

// SSE-C in the S3 layer (docs/sse-c.md): the customer key from a request's headers, the checks
// AWS makes before any byte moves, and the encrypting writer / decrypting reader that every
// backend's bytes pass through (HTTP and RDMA bodies alike). Stores persist only the parameters.
#include <algorithm>
#include <memory>

#include "common/scratch_buffer.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

constexpr std::string_view kPrefix = "x-amz-server-side-encryption-customer-";
constexpr std::string_view kCopyPrefix = "x-amz-copy-source-server-side-encryption-customer-";

SseCHeaders headers_of(const Ctx& c, bool copy_source) {
  const std::string p(copy_source ? kCopyPrefix : kPrefix);
  return {c.header(p + "algorithm"), c.header(p + "key"), c.header(p + "key-MD5")};
}

// Reads [offset, offset+n) of an SSE-C object and decrypts it in place: a single-part object
// has one keystream (meta.sse.iv); a multipart object one per part (PartInfo::sse_iv), each
// counting from the part's first byte.
class DecryptingReader final : public storage::ObjectReader {
 public:
  DecryptingReader(std::unique_ptr<storage::ObjectReader> inner, const CustomerKey& key)
      : inner_(std::move(inner)), key_(key) {
    const storage::ObjectMeta& m = inner_->meta();
    if (m.parts.empty()) {
      ivs_.push_back(m.sse.iv);
      starts_.push_back(0);
    } else {
      std::uint64_t off = 0;
      for (const storage::PartInfo& p : m.parts) {
        ivs_.push_back(p.sse_iv);
        starts_.push_back(off);
        off += p.size;
      }
    }
  }

  const storage::ObjectMeta& meta() const override { return inner_->meta(); }

  Result<std::size_t> pread(std::span<std::byte> dst, std::uint64_t offset) override {
    auto n = inner_->pread(dst, offset);
    if (!n.ok()) return n;
    std::size_t done = 0;
    while (done < *n) {
      const std::uint64_t pos = offset + done;
      // The part holding `pos`: the last whose start is <= pos.
      const auto it = std::upper_bound(starts_.begin(), starts_.end(), pos);
      const auto part = static_cast<std::size_t>(it - starts_.begin()) - 1;
      const std::uint64_t end = part + 1 < starts_.size() ? starts_[part + 1] : ~std::uint64_t{0};
      const std::size_t len =
          static_cast<std::size_t>(std::min<std::uint64_t>(*n - done, end - pos));
      if (ivs_[part].size() != sse_c_iv_bytes) {
        return Status(Errc::corrupt,
                      "SSE-C object without the IV of its part " + std::to_string(part + 1));
      }
      if (!ctr_ || ctr_part_ != part) {
        ctr_ = std::make_unique<AesCtr>(key_.raw(), ivs_[part]);
        ctr_part_ = part;
      }
      ctr_->seek(pos - starts_[part]);
      ctr_->apply(dst.data() + done, dst.data() + done, len);
      done += len;
    }
    return n;
  }

  // No file regions: the bytes on disk are ciphertext, so sendfile and the RDMA engine's
  // mapped-file GET must not see them. Callers fall back to pread, which decrypts.
  Result<std::vector<storage::Extent>> extents(std::uint64_t, std::uint64_t) override {
    return std::vector<storage::Extent>();
  }

 private:
  std::unique_ptr<storage::ObjectReader> inner_;
  CustomerKey key_;
  std::vector<std::string> ivs_;
  std::vector<std::uint64_t> starts_;
  std::unique_ptr<AesCtr> ctr_;
  std::size_t ctr_part_ = 0;
};

}  // namespace

EncryptingWriter::EncryptingWriter(storage::BlobWriter& inner, const CustomerKey& key,
                                   std::string_view iv, std::size_t buf_bytes)
    : inner_(inner), ctr_(key.raw(), iv), buf_(std::max<std::size_t>(buf_bytes, 4096)) {
  ctr_.seek(0);
}

Status EncryptingWriter::append(std::span<const std::byte> data) {
  while (!data.empty()) {
    const std::size_t n = std::min(data.size(), buf_.size());
    ctr_.apply(data.data(), buf_.data(), n);
    OBJDIRECT_RETURN_IF_ERROR(inner_.append(std::span<const std::byte>(buf_.data(), n)));
    data = data.subspan(n);
  }
  return Status::Ok();
}

std::unique_ptr<storage::ObjectReader> decrypting_reader(
    std::unique_ptr<storage::ObjectReader> inner, const CustomerKey& key) {
  return std::make_unique<DecryptingReader>(std::move(inner), key);
}

storage::SseCustomer new_sse_params(const CustomerKey& key, bool with_iv) {
  storage::SseCustomer s;
  s.algorithm = std::string(sse_c_algorithm);
  s.key_md5 = key.key_md5();
  s.salt = random_bytes(sse_c_salt_bytes);
  s.key_hmac = key_verifier(s.salt, key);
  if (with_iv) s.iv = random_iv();
  return s;
}

void add_sse_c_headers(http::Fields& f, const storage::SseCustomer& sse) {
  if (!sse.enabled()) return;
  f.set("x-amz-server-side-encryption-customer-algorithm", sse.algorithm);
  f.set("x-amz-server-side-encryption-customer-key-MD5", sse.key_md5);
}

Status check_content_md5(const Ctx& c, std::string_view body) {
  if (auto md5 = c.header("content-md5")) {
    Md5 h;
    h.update(body.data(), body.size());
    if (base64_encode(h.raw()) != *md5) {
      return Status(Errc::bad_digest,
                    "The Content-MD5 you specified did not match what we received.");
    }
  }
  return Status::Ok();
}

Status check_sse_exclusive(const Ctx& c) {
  if (!headers_of(c, false).any()) return Status::Ok();
  if (c.header("x-amz-server-side-encryption") ||
      c.header("x-amz-server-side-encryption-aws-kms-key-id") ||
      c.header("x-amz-server-side-encryption-context")) {
    return Status(Errc::invalid_argument,
                  "Server Side Encryption with Customer provided key is incompatible with the "
                  "encryption method specified.");
  }
  return Status::Ok();
}

Result<std::optional<CustomerKey>> S3Service::Impl::request_customer_key(const Ctx& c,
                                                                         bool copy_source) {
  const SseCHeaders h = headers_of(c, copy_source);
  if (!h.any()) return std::optional<CustomerKey>();
  if (!copy_source) OBJDIRECT_RETURN_IF_ERROR(check_sse_exclusive(c));
  if (!opts.secure_transport && !opts.sse_c_over_http) {
    return Status(Errc::invalid_request,
                  "Requests specifying Server Side Encryption with Customer provided keys must be "
                  "made over a secure connection.");
  }
  if (!store->stores_sse_c() && !store->passes_sse_c()) {
    return Status(Errc::not_implemented,
                  "Server-side encryption with customer-provided keys is not implemented by this "
                  "server's storage backend");
  }
  auto key = CustomerKey::parse(h);
  if (!key.ok()) return key.status();
  return std::optional<CustomerKey>(std::move(*key));
}

Result<storage::SseCKeyHeaders> S3Service::Impl::passed_sse_c(const Ctx& c, bool copy_source) {
  auto key = request_customer_key(c, copy_source);
  if (!key.ok()) return key.status();
  if (!*key || !store->passes_sse_c()) return storage::SseCKeyHeaders();
  const SseCHeaders h = headers_of(c, copy_source);
  return storage::SseCKeyHeaders(h.algorithm.value_or(""), h.key.value_or(""),
                                 h.key_md5.value_or(""));
}

namespace {

// What a read or a part must present for an object (or upload) stored with `sse`: no key when it
// is not encrypted, else the key it was stored with.
Result<std::optional<CustomerKey>> check_presented(std::optional<CustomerKey> key,
                                                   const storage::SseCustomer& sse,
                                                   std::string_view missing_message,
                                                   Status mismatch) {
  if (!sse.enabled()) {
    if (key) {
      return Status(Errc::invalid_request,
                    "The encryption parameters are not applicable to this object.");
    }
    return key;
  }
  if (!key) return Status(Errc::invalid_request, std::string(missing_message));
  if (!key_matches(sse, *key)) return mismatch;
  return key;
}

}  // namespace

Result<std::optional<CustomerKey>> S3Service::Impl::key_for_read(const Ctx& c,
                                                                 const storage::ObjectMeta& m,
                                                                 bool copy_source) {
  auto key = request_customer_key(c, copy_source);
  if (!key.ok()) return key.status();
  if (store->passes_sse_c()) return std::optional<CustomerKey>();
  return check_presented(std::move(*key), m.sse,
                         "The object was stored using a form of Server Side Encryption. The "
                         "correct parameters must be provided to retrieve the object.",
                         Status(Errc::access_denied, "Access Denied"));
}

Result<std::optional<CustomerKey>> S3Service::Impl::key_for_part(const Ctx& c,
                                                                 const storage::UploadInfo& u) {
  auto key = request_customer_key(c, false);
  if (!key.ok()) return key.status();
  if (store->passes_sse_c()) return std::optional<CustomerKey>();
  return check_presented(
      std::move(*key), u.meta_template.sse,
      "The multipart upload initiate requested encryption. Subsequent part requests must include "
      "the appropriate encryption parameters.",
      Status(Errc::invalid_argument,
             "The provided encryption parameters did not match the ones used originally."));
}

}  // namespace objdirect::s3

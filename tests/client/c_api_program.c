/* Exercises the C API from C: create, put, head, get (whole and ranged), register, delete,
 * error reporting. The endpoint and keys come from the environment (AWS_ENDPOINT_URL, ...);
 * argv[1] is an existing bucket. Exit 0 on success; prints what failed otherwise. */
#include <objdirect/objdirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                                        \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "FAIL %s: code %d: %s\n", what, od_last_error(), od_last_error_message()); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(int argc, char** argv) {
  od_client* c = NULL;
  od_config cfg;
  od_result res;
  od_object_info info;
  od_memory* mem = NULL;
  const char* bucket;
  size_t n = 3 * 1024 * 1024 + 7, i;
  unsigned char* src;
  unsigned char* dst;

  if (argc < 2) return 2;
  bucket = argv[1];
  memset(&cfg, 0, sizeof cfg);
  cfg.part_size_bytes = 1024 * 1024; /* several ranged parts on the way back */
  CHECK(od_client_create(&cfg, &c) == OD_OK, "create");

  src = malloc(n);
  dst = malloc(n);
  for (i = 0; i < n; ++i) src[i] = (unsigned char)(i * 131 + 7);
  CHECK(od_put(c, bucket, "c/api object", src, n, &res) == OD_OK, "put");
  CHECK(res.bytes == n, "put bytes");

  CHECK(od_head(c, bucket, "c/api object", &info) == OD_OK, "head");
  CHECK(info.size == n && strlen(info.etag) > 0, "head size/etag");

  CHECK(od_register(c, dst, n, &mem) == OD_OK, "register");
  memset(dst, 0, n);
  CHECK(od_get(c, bucket, "c/api object", dst, n, 0, 0, &res) == OD_OK, "get");
  CHECK(res.bytes == n && memcmp(src, dst, n) == 0, "get bytes");
  CHECK(strcmp(res.etag, info.etag) == 0, "get etag");

  memset(dst, 0, n);
  CHECK(od_get(c, bucket, "c/api object", dst, 100, 1000, 100, &res) == OD_OK, "range get");
  CHECK(res.bytes == 100 && memcmp(src + 1000, dst, 100) == 0, "range bytes");
  od_deregister(mem);

  CHECK(od_get(c, bucket, "c/no such key", dst, n, 0, 0, NULL) == OD_ENOTFOUND, "missing key");
  CHECK(od_last_error() == OD_ENOTFOUND && strlen(od_last_error_message()) > 0, "last error");
  CHECK(od_get(c, bucket, "c/api object", dst, 10, 0, 0, NULL) == OD_EINVAL, "small buffer");

  {
    /* od_put_with_options: the Content-Type and metadata reach the server (read back through a
     * presigned HEAD by the test around this program: c/typed's headers), and bad options are
     * refused before any request. */
    od_metadata meta[2] = {{"Owner", "alice"}, {"tag", "a=b"}};
    od_put_options po;
    od_metadata bad_meta[1] = {{"two words", "v"}};
    char url[2048];
    size_t url_len = 0;
    memset(&po, 0, sizeof po);
    po.content_type = "text/x-c-api";
    po.metadata = meta;
    po.metadata_count = 2;
    CHECK(od_put_with_options(c, bucket, "c/typed", src, 10, &po, &res) == OD_OK, "put options");
    CHECK(res.bytes == 10, "put options bytes");
    CHECK(od_put_with_options(c, bucket, "c/plain", src, 10, NULL, &res) == OD_OK,
          "put NULL options");
    po.metadata = bad_meta;
    po.metadata_count = 1;
    CHECK(od_put_with_options(c, bucket, "c/bad", src, 10, &po, NULL) == OD_EINVAL, "bad meta");
    po.metadata = NULL;
    CHECK(od_put_with_options(c, bucket, "c/bad", src, 10, &po, NULL) == OD_EINVAL, "NULL meta");
    CHECK(od_head(c, bucket, "c/bad", &info) == OD_ENOTFOUND, "bad options sent nothing");

    /* od_presign: asks for the length first, then writes the URL; printed for the test to fetch. */
    CHECK(od_presign(c, "GET", bucket, "c/typed", 300, NULL, 0, &url_len) == OD_EINVAL,
          "presign size query");
    CHECK(url_len > 0 && url_len < sizeof url, "presign length");
    CHECK(od_presign(c, "GET", bucket, "c/typed", 300, url, url_len, NULL) == OD_EINVAL,
          "presign one byte short");
    CHECK(od_presign(c, "GET", bucket, "c/typed", 300, url, url_len + 1, NULL) == OD_OK, "presign");
    CHECK(strlen(url) == url_len && strncmp(url, "http", 4) == 0, "presign url");
    printf("presigned-get %s\n", url);
    CHECK(od_presign(c, "HEAD", bucket, "c/typed", 300, url, sizeof url, NULL) == OD_OK,
          "presign head");
    printf("presigned-head %s\n", url);
    CHECK(od_presign(c, "POST", bucket, "c/typed", 300, url, sizeof url, NULL) == OD_EINVAL,
          "presign POST");
    CHECK(od_presign(c, "GET", bucket, "c/typed", 0, url, sizeof url, NULL) == OD_EINVAL,
          "presign 0 s");
    CHECK(od_presign(c, "GET", bucket, "c/typed", 604801, url, sizeof url, NULL) == OD_EINVAL,
          "presign 604801 s");
  }

  CHECK(od_delete(c, bucket, "c/api object") == OD_OK, "delete");
  CHECK(od_head(c, bucket, "c/api object", &info) == OD_ENOTFOUND, "head after delete");
  {
    /* The counters saw exactly the data calls above: put n, get n, range get 100 bytes, and the
     * two 10-byte puts with options. */
    od_stats st;
    CHECK(od_client_stats(c, &st) == OD_OK, "stats");
    CHECK(st.bytes_rdma + st.bytes_http + st.bytes_http_fallback == 2 * (uint64_t)n + 120,
          "stats bytes");
    CHECK(st.transfers_rdma + st.transfers_http + st.transfers_http_fallback == 5,
          "stats transfers");
    CHECK(st.requests_4xx >= 2 && st.errors >= 2, "stats 404s (missing key, head after delete)");
    CHECK(st.requests_total == st.requests_2xx + st.requests_3xx + st.requests_4xx +
                                   st.requests_5xx + st.requests_failed,
          "stats classes add up");
    CHECK(st.requests_in_flight == 0, "stats in flight");
    CHECK(od_client_stats(NULL, &st) == OD_EINVAL, "stats NULL");
  }
  od_client_destroy(c);
  free(src);
  free(dst);
  printf("c api ok\n");
  return 0;
}

/* libobjdirect C API: the ObjDirect S3 client for C and for foreign-function bindings.
 *
 * A thin layer over objdirect::Client (include/objdirect/client.hpp), which documents the
 * transfer behaviour in full: objects larger than the part size move as parallel Range GETs
 * pinned with If-Match / as multipart uploads; each data call reports whether the bytes went
 * over RDMA, HTTP, or HTTP after the server declined RDMA.
 *
 * Errors: every function that can fail returns an int status: 0 (OD_OK) on success, otherwise
 * one of the OD_E* codes below, and records the code and a message for the calling thread,
 * readable with od_last_error() / od_last_error_message() until the thread's next failing call.
 *
 * Ownership: handles returned by od_*_create / od_register are owned by the caller and freed
 * with the matching destroy / deregister call. Strings passed in are copied; strings returned
 * inside result structs are fixed-size arrays owned by the struct.
 *
 * CUDA device memory: od_get, od_put and od_register accept CUDA device and managed pointers
 * (cudaMalloc, cudaMallocManaged) as well as host memory, with the behaviour of
 * objdirect::Client (client.hpp, docs/gpu.md): the bytes move through pinned staging buffers with
 * cudaMemcpy on the legacy default stream (or straight into device memory over GPUDirect RDMA
 * where the fabric supports it); the CPU never dereferences a device pointer, also when the server
 * declines RDMA. A call returns once the data is in (or out of) device memory.
 *
 * Thread safety: an od_client may be used from many threads at once; the last-error state is
 * per thread. A buffer must stay valid and untouched until the call using it returns.
 */
#ifndef OBJDIRECT_OBJDIRECT_H
#define OBJDIRECT_OBJDIRECT_H

#include <stddef.h>
#include <stdint.h>

/* OBJDIRECT_API marks what libobjdirect.so exports (the library hides everything else); the same
 * definition as in objdirect/export.hpp, repeated so that this header needs no other. */
#ifndef OBJDIRECT_API
#if defined(__cplusplus)
#define OBJDIRECT_API [[gnu::visibility("default")]]
#else
#define OBJDIRECT_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
enum {
  OD_OK = 0,
  OD_EINVAL = 1,       /* bad argument (also: buffer too small for the object) */
  OD_ENOTFOUND = 2,    /* no such bucket or key */
  OD_EACCESS = 3,      /* access denied, bad signature, unknown access key */
  OD_EUNREACHABLE = 4, /* the endpoint cannot be reached */
  OD_ETIMEDOUT = 5,    /* no progress within the I/O timeout */
  OD_ECONFLICT = 6,    /* bucket exists / not empty / object changed (precondition failed) */
  OD_ERANGE = 7,       /* range starts at or after the end of the object */
  OD_EIO = 8,          /* broken connection, malformed reply, RDMA failure, other errors */
};

/* Transfer paths (od_result.path). */
enum { OD_PATH_RDMA = 0, OD_PATH_HTTP = 1, OD_PATH_HTTP_FALLBACK = 2 };

/* Client settings. Zero / NULL fields take the defaults of objdirect::ClientConfig::load():
 * the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...) and ~/.aws files. */
typedef struct od_config {
  const char* endpoint; /* "http://host:port" */
  const char* region;   /* default "us-east-1" */
  const char* access_key;
  const char* secret_key;
  const char* session_token;
  const char* profile;      /* AWS profile to read defaults from */
  const char* fabric;       /* "auto" | "libfabric:tcp" | "libfabric:shm" | "ucx" | "none" */
  uint64_t part_size_bytes; /* default 8 MiB */
  uint32_t concurrency;     /* default 8 */
} od_config;

typedef struct od_result {
  uint64_t bytes;       /* bytes moved */
  uint64_t object_size; /* whole object size */
  int path;             /* OD_PATH_* */
  char etag[128];       /* unquoted, NUL-terminated (truncated if longer) */
  char fabric[32];      /* "libfabric:shm", ...; empty when RDMA was not attempted */
  char reason[256];     /* why RDMA was not used; empty for RDMA */
} od_result;

typedef struct od_object_info {
  uint64_t size;
  char etag[128];
  char last_modified[64];
} od_object_info;

typedef struct od_client od_client; /* opaque */
typedef struct od_memory od_memory; /* opaque registration */

/* Creates a client; *out is set on success. cfg may be NULL (all defaults).
 * Errors: OD_EINVAL (no endpoint, bad settings, unknown profile). */
OBJDIRECT_API int od_client_create(const od_config* cfg, od_client** out);
/* Destroys a client (NULL is ignored). Registrations made with it must be released first. */
OBJDIRECT_API void od_client_destroy(od_client* client);

/* Registers [ptr, ptr+len) for RDMA (see objdirect::Client::register_memory); *out is set.
 * ptr may be device memory (nothing is registered then unless the fabric supports GPUDirect).
 * Errors: OD_EINVAL, OD_EIO (the provider refused). */
OBJDIRECT_API int od_register(od_client* client, void* ptr, size_t len, od_memory** out);
/* Releases a registration (NULL is ignored). */
OBJDIRECT_API void od_deregister(od_memory* mem);

/* Reads bucket/key into buf[0..len) (host or CUDA device memory). length == 0 means the whole
 * object (which must fit);
 * otherwise `length` bytes from `offset`. result may be NULL.
 * Errors: OD_ENOTFOUND, OD_EACCESS, OD_EINVAL, OD_ERANGE, OD_ECONFLICT, OD_EUNREACHABLE,
 * OD_ETIMEDOUT, OD_EIO. */
OBJDIRECT_API int od_get(od_client* client, const char* bucket, const char* key, void* buf,
                         size_t len, uint64_t offset, uint64_t length, od_result* result);
/* Writes buf[0..len) (host or CUDA device memory) as bucket/key. result may be NULL. Errors as
 * od_get. */
OBJDIRECT_API int od_put(od_client* client, const char* bucket, const char* key, const void* buf,
                         size_t len, od_result* result);
/* One user metadata entry of an upload: x-amz-meta-NAME: VALUE (NAME sent lower-case). */
typedef struct od_metadata {
  const char* name;
  const char* value;
} od_metadata;

/* What an upload sets besides the bytes (objdirect::PutOptions, client.hpp, which documents the
 * checks: no control characters, names that are HTTP tokens, at most 2 KiB of names plus values).
 */
typedef struct od_put_options {
  const char* content_type;    /* Content-Type; NULL or "": the server's default */
  const od_metadata* metadata; /* metadata_count entries (NULL when metadata_count is 0) */
  size_t metadata_count;
} od_put_options;

/* od_put with a Content-Type and user metadata (options may be NULL: as od_put). Host memory
 * only when options set anything (CUDA device memory is OD_EINVAL then). Errors as od_put, and
 * OD_EINVAL for options the checks refuse (the message names the bad name or value). */
OBJDIRECT_API int od_put_with_options(od_client* client, const char* bucket, const char* key,
                                      const void* buf, size_t len, const od_put_options* options,
                                      od_result* result);

/* A presigned URL (SigV4 query authentication; objdirect::Client::presign) for `method` ("GET",
 * "HEAD", "PUT", "DELETE") on bucket/key, valid for expires_s seconds (1..604800), written
 * NUL-terminated into url[0..url_size). url_len (may be NULL) receives the URL's length without
 * the NUL, also when url_size is too small (as snprintf), so a caller may ask with url_size 0
 * first. Makes no request. Errors: OD_EINVAL (NULL argument, another method, empty bucket or
 * key, expires_s out of range, url_size not above the URL's length). */
OBJDIRECT_API int od_presign(od_client* client, const char* method, const char* bucket,
                             const char* key, uint64_t expires_s, char* url, size_t url_size,
                             size_t* url_len);

/* HeadObject. Errors: OD_ENOTFOUND, OD_EACCESS, OD_EUNREACHABLE, OD_ETIMEDOUT, OD_EIO. */
OBJDIRECT_API int od_head(od_client* client, const char* bucket, const char* key,
                          od_object_info* info);

/* SSE-C (objdirect::SseCustomerKey, client.hpp; docs/sse-c.md): sse_c_key points at the
 * OD_SSE_C_KEY_BYTES (32) bytes of an AES-256 key; the library sends it with the algorithm AES256
 * and the MD5 it computes, and wipes its own copies when the call returns (the caller's bytes
 * are the caller's). Host memory only. od_put_sse_c: od_put_with_options (options may be NULL)
 * with the object encrypted under the key (multipart uploads: every part and the Complete carry
 * it); od_get_sse_c and od_head_sse_c: od_get and od_head of an object written with the key.
 * Errors as the plain calls, and: OD_EINVAL (NULL key; the object needs a key or has none: the
 * server's 400 InvalidRequest), OD_EACCESS (another key: 403). */
#define OD_SSE_C_KEY_BYTES 32
OBJDIRECT_API int od_put_sse_c(od_client* client, const char* bucket, const char* key,
                               const void* buf, size_t len, const od_put_options* options,
                               const uint8_t* sse_c_key, od_result* result);
OBJDIRECT_API int od_get_sse_c(od_client* client, const char* bucket, const char* key, void* buf,
                               size_t len, uint64_t offset, uint64_t length,
                               const uint8_t* sse_c_key, od_result* result);
OBJDIRECT_API int od_head_sse_c(od_client* client, const char* bucket, const char* key,
                                const uint8_t* sse_c_key, od_object_info* info);
/* DeleteObject (deleting a missing key succeeds). */
OBJDIRECT_API int od_delete(od_client* client, const char* bucket, const char* key);
/* CreateBucket / DeleteBucket. */
OBJDIRECT_API int od_create_bucket(od_client* client, const char* bucket);
OBJDIRECT_API int od_delete_bucket(od_client* client, const char* bucket);

/* The client's counters (a flat view of objdirect::ClientStats; see client.hpp). */
typedef struct od_stats {
  uint64_t requests_total; /* HTTP requests sent, every operation */
  uint64_t requests_2xx, requests_3xx, requests_4xx, requests_5xx;
  uint64_t requests_failed; /* no response: connect error, timeout, broken connection */
  uint64_t bytes_rdma, bytes_http, bytes_http_fallback; /* payload bytes of data calls, by path */
  uint64_t transfers_rdma, transfers_http, transfers_http_fallback; /* data calls, by path */
  uint64_t rdma_declines; /* data calls that proposed RDMA and fell back to HTTP */
  uint64_t errors;        /* failed requests (error responses and no response) */
  uint64_t retries;       /* requests sent again */
  uint64_t requests_in_flight;
} od_stats;

/* Fills *out with the client's counters. Errors: OD_EINVAL (NULL argument). */
OBJDIRECT_API int od_client_stats(od_client* client, od_stats* out);

/* The calling thread's last error: its OD_E* code (OD_OK if none) and message ("" if none).
 * The message pointer stays valid until the thread's next od_* call. */
OBJDIRECT_API int od_last_error(void);
OBJDIRECT_API const char* od_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* OBJDIRECT_OBJDIRECT_H */

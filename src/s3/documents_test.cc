#include "s3/documents.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
namespace {

// Text that exercises the escaping: markup characters, quotes, whitespace kept exactly, a
// control character, CR, non-ASCII and U+FFFE.
const std::string kTricky = " a&b <c> \"d\" 'e'\t\r\n\x01 \xc3\xa9\xe2\x82\xac \xef\xbf\xbe ";

TEST(S3Documents, ListBucketsRoundTrip) {
  ListBucketsResult r;
  r.owner = {"owner-id", kTricky};
  r.buckets = {{"alpha", "2026-01-02T03:04:05.678Z"}, {"beta.b", "2026-12-31T23:59:59.000Z"}};
  r.continuation_token = "tok/+=";
  r.prefix = "al";
  auto back = decode_list_buckets(encode_list_buckets(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, r);
  r.continuation_token.clear();
  r.prefix.reset();
  r.buckets.clear();
  back = decode_list_buckets(encode_list_buckets(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
}

ListObjectsResult sample_list(ListKind kind) {
  ListObjectsResult r;
  r.kind = kind;
  r.name = "bucket";
  r.prefix = kTricky;
  r.max_keys = 1000;
  r.delimiter = "/";
  r.is_truncated = true;
  ObjectEntry o;
  o.key = kTricky;
  o.last_modified = "2026-01-02T03:04:05.678Z";
  o.etag = "d41d8cd98f00b204e9800998ecf8427e-3";
  o.checksum_algorithms = {"CRC32C", "SHA256"};
  o.size = (5ull << 40);
  o.storage_class = "STANDARD";
  o.owner = Owner{"id", "name"};
  r.objects.push_back(o);
  o.key = "second";
  o.owner.reset();
  o.checksum_algorithms.clear();
  o.size = 0;
  r.objects.push_back(o);
  r.common_prefixes = {"p/", kTricky};
  switch (kind) {
    case ListKind::v2:
      r.continuation_token = "";
      r.start_after = "s";
      r.key_count = 4;
      r.next_continuation_token = "bmV4dA";
      r.encoding_type = "url";
      break;
    case ListKind::v1:
      r.marker = "m";
      r.next_marker = "second";
      break;
    case ListKind::versions:
      r.key_marker = "k";
      r.next_key_marker = "second";
      r.next_version_id_marker = "null";
      for (auto& e : r.objects) {
        e.version_id = "null";
        e.is_latest = true;
      }
      {
        // A delete marker between versions keeps its place.
        ObjectEntry marker;
        marker.key = "a-marker";
        marker.version_id = "0123456789abcdef0123456789abcdef";
        marker.is_latest = false;
        marker.delete_marker = true;
        marker.last_modified = "2026-01-02T03:04:05.000Z";
        marker.owner = Owner{"o", "o"};
        r.objects.insert(r.objects.begin() + 1, marker);
      }
      break;
  }
  return r;
}

TEST(S3Documents, ListObjectsRoundTripEveryKind) {
  for (ListKind kind : {ListKind::v1, ListKind::v2, ListKind::versions}) {
    const ListObjectsResult r = sample_list(kind);
    const std::string xml = encode_list_objects(r);
    auto back = decode_list_objects(xml);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, r) << xml;
  }
  // An empty v1 page stays v1; an empty v2 page (KeyCount 0) stays v2.
  ListObjectsResult v1;
  v1.kind = ListKind::v1;
  auto back = decode_list_objects(encode_list_objects(v1));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, ListKind::v1);
  ListObjectsResult v2;
  back = decode_list_objects(encode_list_objects(v2));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, ListKind::v2);
  EXPECT_FALSE(back->continuation_token.has_value());
}

TEST(S3Documents, ListObjectsDecodesAwsFormattedReply) {
  // The shape of the ListObjectsV2 example in the AWS API reference: indented, with whitespace
  // between elements, a quoted ETag written as &quot; and a namespace.
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
      "  <Name>bucket</Name>\n  <Prefix/>\n  <KeyCount>205</KeyCount>\n"
      "  <MaxKeys>1000</MaxKeys>\n  <IsTruncated>false</IsTruncated>\n"
      "  <Contents>\n    <Key>my-image.jpg</Key>\n"
      "    <LastModified>2009-10-12T17:50:30.000Z</LastModified>\n"
      "    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>\n"
      "    <Size>434234</Size>\n    <StorageClass>STANDARD</StorageClass>\n"
      "  </Contents>\n</ListBucketResult>\n";
  auto r = decode_list_objects(xml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kind, ListKind::v2);
  EXPECT_EQ(r->key_count, 205u);
  ASSERT_EQ(r->objects.size(), 1u);
  EXPECT_EQ(r->objects[0].key, "my-image.jpg");
  EXPECT_EQ(r->objects[0].etag, "fba9dede5f27731c9771645a39863328");
  EXPECT_EQ(r->objects[0].size, 434234u);
  EXPECT_FALSE(r->objects[0].owner.has_value());
}

TEST(S3Documents, MultipartDocumentsRoundTrip) {
  InitiateMultipartResult init{"b", kTricky, "upload/id+="};
  auto i = decode_initiate_multipart(encode_initiate_multipart(init));
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(*i, init);
  EXPECT_EQ(decode_initiate_multipart(encode_initiate_multipart_unchecked({"b", "k", ""}))
                .status()
                .code(),
            Errc::malformed_xml);

  std::vector<CompletePart> parts = {{1, "e1", {{"CRC32C", "AAAAAA=="}}}, {10'000, "e2", {}}};
  auto p = parse_complete_multipart(encode_complete_multipart(parts));
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].part_number, 1u);
  EXPECT_EQ((*p)[0].etag, "e1");
  EXPECT_EQ((*p)[0].checksums, parts[0].checksums);
  EXPECT_EQ((*p)[1].part_number, 10'000u);

  CompleteMultipartResult done{"/b/k", "b", kTricky, "abc-2", {{"CRC32C", "x=="}}, "COMPOSITE"};
  auto d = decode_complete_result(encode_complete_result(done));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, done);
  // A failure reported inside a 200 reply.
  auto failed =
      decode_complete_result(encode_error({"InvalidPart", "part 2 is gone", "/b/k", "r"}));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Errc::invalid_part);
  EXPECT_EQ(failed.status().message(), "part 2 is gone");

  ListPartsResult lp;
  lp.bucket = "b";
  lp.key = kTricky;
  lp.upload_id = "u";
  lp.initiator = {"i", "i"};
  lp.owner = {"o", kTricky};
  lp.storage_class = "STANDARD";
  lp.part_number_marker = 3;
  lp.next_part_number_marker = 5;
  lp.max_parts = 2;
  lp.is_truncated = true;
  lp.checksum_algorithm = "CRC32";
  lp.parts = {{4, "2026-01-01T00:00:00.000Z", "e4", 5ull << 20, {{"CRC32", "q=="}}},
              {5, "2026-01-01T00:00:01.000Z", "e5", 1, {}}};
  auto l = decode_list_parts(encode_list_parts(lp));
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, lp);

  ListUploadsResult lu;
  lu.bucket = "b";
  lu.key_marker = "km";
  lu.upload_id_marker = "um";
  lu.next_key_marker = kTricky;
  lu.next_upload_id_marker = "nu";
  lu.prefix = "p";
  lu.delimiter = "/";
  lu.max_uploads = 1000;
  lu.encoding_type = "url";
  lu.is_truncated = true;
  lu.uploads = {
      {kTricky, "u1", {"a", "a"}, {"a", "a"}, "STANDARD", "2026-01-01T00:00:00.000Z", "SHA256"},
      {"k2", "u2", {"b", "b"}, {"b", "b"}, "STANDARD", "2026-01-01T00:00:00.000Z", ""}};
  lu.common_prefixes = {"x/"};
  auto u = decode_list_uploads(encode_list_uploads(lu));
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(*u, lu);
}

TEST(S3Documents, DeleteAndCopyRoundTrip) {
  DeleteRequest req{true, {{kTricky, ""}, {"k", "v1"}, {"0", ""}}};
  auto q = parse_delete_objects(encode_delete_objects(req));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(q->quiet);
  ASSERT_EQ(q->objects.size(), 3u);
  EXPECT_EQ(q->objects[0].key, kTricky);
  EXPECT_EQ(q->objects[1].version_id, "v1");

  DeleteResult res{{{"gone", ""}, {kTricky, "v"}, {"m", "", true, "0123"}, {"r", "0123", true, ""}},
                   {{"k", "AccessDenied", "Access Denied"}}};
  auto r = decode_delete_result(encode_delete_result(res));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, res);

  for (bool part : {false, true}) {
    CopyResult c{part, "2026-01-02T03:04:05.000Z", "etag", {{"SHA1", "s=="}}};
    auto back = decode_copy_result(encode_copy_result(c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, c);
  }
  EXPECT_EQ(decode_copy_result("<CopyObjectResult/>").status().code(), Errc::malformed_xml);
}

TEST(S3Documents, VersioningRoundTripAndRefusals) {
  for (const VersioningConfiguration& v :
       {VersioningConfiguration{}, VersioningConfiguration{"Enabled", ""},
        VersioningConfiguration{"Suspended", "Disabled"}, VersioningConfiguration{"", "Enabled"}}) {
    const std::string xml = encode_versioning(v);
    auto back = decode_versioning(xml);
    ASSERT_TRUE(back.ok()) << back.status().message() << xml;
    EXPECT_EQ(*back, v);
  }
  // What the AWS CLI sends, spaces and all.
  auto cli = decode_versioning(
      "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Status> Enabled </Status></VersioningConfiguration>");
  ASSERT_TRUE(cli.ok()) << cli.status().message();
  EXPECT_EQ(cli->status, "Enabled");
  for (const char* bad :
       {"", "<VersioningConfiguration><Status>enabled</Status></VersioningConfiguration>",
        "<VersioningConfiguration><Status>Enabled</Status><Status>Enabled</Status>"
        "</VersioningConfiguration>",
        "<VersioningConfiguration><MfaDelete>On</MfaDelete></VersioningConfiguration>",
        "<Versioning><Status>Enabled</Status></Versioning>"}) {
    EXPECT_EQ(decode_versioning(bad).status().code(), Errc::malformed_xml) << bad;
  }
}

TEST(S3Documents, ErrorRoundTripKeepsDetailsInOrder) {
  ErrorDocument e{"InvalidPartNumber",
                  "The requested partnumber is not satisfiable",
                  "/b/k",
                  "req-1",
                  {{"PartNumberRequested", "3"}, {"ActualPartCount", "2"}}};
  const std::string xml = encode_error(e);
  auto back = decode_error(xml);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, e);
  EXPECT_LT(xml.find("PartNumberRequested"), xml.find("ActualPartCount"));
  // error_xml and encode_error write the same bytes.
  EXPECT_EQ(encode_error({"NoSuchKey", "", "/b/k", "r", {}}),
            error_xml("NoSuchKey", "", "/b/k", "r"));
}

TEST(S3Documents, DecodersRefuseWhatIsNotTheirDocument) {
  const std::vector<std::string> bad = {
      "",
      "not xml",
      "<Wrong/>",
      "<!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult/>",
      "<ListBucketResult><MaxKeys>-1</MaxKeys></ListBucketResult>",
      "<ListBucketResult><MaxKeys>99999999999999999999999</MaxKeys></ListBucketResult>",
      "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
      "<ListBucketResult><Name>a</Name><Name>b</Name></ListBucketResult>",
      "<ListBucketResult><Contents><Key><b/></Key></Contents></ListBucketResult>",
      "<ListBucketResult>&undefined;</ListBucketResult>",
  };
  for (const std::string& b : bad) {
    auto r = decode_list_objects(b);
    ASSERT_FALSE(r.ok()) << b;
    EXPECT_EQ(r.status().code(), Errc::malformed_xml) << b;
  }
  EXPECT_FALSE(decode_list_buckets("<ListBucketResult/>").ok());
  EXPECT_FALSE(decode_list_parts("<ListPartsResult><PartNumberMarker>4294967296</PartNumberMarker>"
                                 "</ListPartsResult>")
                   .ok());
  // Over the reply limit.
  std::string big = "<Error><Message>";
  big.append(limits::xml_reply_bytes_max, 'x');
  big += "</Message></Error>";
  EXPECT_EQ(decode_error(big).status().code(), Errc::malformed_xml);
}

// The writer's contract is checked in every build (OBJDIRECT_ASSERT), Release included.
TEST(S3XmlWriterDeathTest, ContractViolationsAbortInEveryBuild) {
  EXPECT_DEATH(
      {
        XmlWriter w;
        w.close();
      },
      "XmlWriter::close\\(\\) without an open element");
  EXPECT_DEATH(
      {
        XmlWriter w;
        w.element("not a name", "x");
      },
      "plain XML names");
}

// The checked encoders (every build): a broken precondition of each document family aborts
// before anything is sent, and the valid documents are the unchecked encoders' bytes.
TEST(S3DocumentsDeathTest, CheckedEncodersAssertTheirPreconditions) {
  ListBucketsResult buckets{{"o", "o"}, {{"", "2026-01-01T00:00:00.000Z"}}, "", std::nullopt};
  EXPECT_DEATH((void)encode_list_buckets(buckets), "every listed bucket has a name");

  ListObjectsResult v2 = sample_list(ListKind::v2);
  v2.key_count = 3;
  EXPECT_DEATH((void)encode_list_objects(v2), "KeyCount counts its keys and common prefixes");
  ListObjectsResult v1 = sample_list(ListKind::v1);
  v1.objects[1].delete_marker = true;
  EXPECT_DEATH((void)encode_list_objects(v1), "only ListObjectVersions lists delete markers");
  // A v1 page with a v2 field reads back as v2: not the document that was meant.
  v1 = sample_list(ListKind::v1);
  v1.next_continuation_token = "t";
  EXPECT_DEATH((void)encode_list_objects(v1), "decodes back to itself");

  EXPECT_DEATH((void)encode_initiate_multipart({"b", "k", ""}), "names its upload");
  EXPECT_DEATH((void)encode_complete_result({"/b/k", "b", "k", "", {}, ""}),
               "carries the object's ETag");
  EXPECT_DEATH((void)encode_complete_result({"/b/k", "b", "k", "e", {{"Type", "x"}}, ""}),
               "plain element names");
  ListPartsResult parts;
  parts.upload_id = "u";
  parts.parts = {{2, "t", "e2", 1, {}}, {2, "t", "e2", 1, {}}};
  EXPECT_DEATH((void)encode_list_parts(parts), "ascending order");
  parts.parts = {{limits::parts_max + 1, "t", "e", 1, {}}};
  EXPECT_DEATH((void)encode_list_parts(parts), "ascending order");
  ListUploadsResult uploads;
  uploads.uploads = {{"k", "", {}, {}, "STANDARD", "t", ""}};
  EXPECT_DEATH((void)encode_list_uploads(uploads), "a key and an upload id");

  EXPECT_DEATH((void)encode_delete_result({{}, {{"k", "", "m"}}}), "carries its code");
  EXPECT_DEATH((void)encode_copy_result({false, "t", "", {}}), "carries the copy's ETag");
  EXPECT_DEATH((void)encode_copy_result({false, "t", "e", {{"Algorithm", "x"}}}),
               "plain element names");

  EXPECT_DEATH((void)encode_versioning({"Paused", ""}), "Enabled or Suspended");
  EXPECT_DEATH((void)encode_versioning({"Enabled", "Yes"}), "Enabled or Disabled");

  EXPECT_DEATH((void)encode_error({"", "m", "/", "r", {}}), "carries its code");
  EXPECT_DEATH((void)encode_error({"InvalidPart", "m", "/", "r", {{"Resource", "x"}}}),
               "further plain elements");

  // Valid documents: the same bytes as without the checks.
  for (ListKind kind : {ListKind::v1, ListKind::v2, ListKind::versions}) {
    EXPECT_EQ(encode_list_objects(sample_list(kind)),
              encode_list_objects_unchecked(sample_list(kind)));
  }
  const ErrorDocument err{"InvalidPartNumber", "", "/b/k", "r", {{"ActualPartCount", "2"}}};
  EXPECT_EQ(encode_error(err), encode_error_unchecked(err));
}

// What a request can put into a reply (a key, a prefix, a marker, a path) never trips the round
// trip: invalid UTF-8 and NUL become U+FFFD, controls and U+FFFE/U+FFFF character references,
// whitespace stays as sent. A page of 1000 such keys is checked, and the check's cost printed.
TEST(S3Documents, CheckedEncodersAcceptHostileRequestText) {
  const std::vector<std::string> hostile = {
      std::string("a\0b", 3), "\xff\xfe", "\xc3",  " ",    "\t\r\n", "\xef\xbf\xbf",
      "\xed\xa0\x80",         "]]>",      "&amp;", "\x7f", kTricky};
  ListObjectsResult r = sample_list(ListKind::v2);
  r.objects.clear();
  r.common_prefixes.clear();
  for (std::size_t i = 0; i < 1000; ++i) {
    ObjectEntry o;
    o.key = hostile[i % hostile.size()] + std::string(900, 'k') + std::to_string(i);
    o.last_modified = "2026-01-02T03:04:05.678Z";
    o.etag = "d41d8cd98f00b204e9800998ecf8427e";
    o.size = i;
    o.storage_class = "STANDARD";
    r.objects.push_back(std::move(o));
  }
  r.key_count = r.objects.size();
  for (const auto& h : hostile) {
    r.prefix = h;
    r.delimiter = h;
    r.start_after = h;
    EXPECT_FALSE(encode_list_objects(r).empty());
    EXPECT_FALSE(encode_error({"NoSuchKey", h, "/b/" + h, "r", {}}).empty());
    EXPECT_FALSE(encode_list_uploads({"b", h, h, h, h, h, h, 1, "", false, {}, {h}}).empty());
  }
  // The cost of the check on a full page, of long keys and of short ones (printed for
  // docs/s3-documents.md): one decode and one comparison.
  for (std::size_t key_bytes : {900u, 40u}) {
    for (std::size_t i = 0; i < r.objects.size(); ++i) {
      r.objects[i].key = "dataset/shard-" + std::string(key_bytes - 30, 'k') + std::to_string(i);
    }
    r.prefix = "dataset/";
    r.delimiter.clear();
    r.start_after.clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) (void)encode_list_objects_unchecked(r);
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) (void)encode_list_objects(r);
    const auto t2 = std::chrono::steady_clock::now();
    const double plain = std::chrono::duration<double, std::milli>(t1 - t0).count() / 20;
    const double checked = std::chrono::duration<double, std::milli>(t2 - t1).count() / 20;
    std::printf(
        "ListObjectsV2 page of 1000 keys of %zu bytes (%zu bytes): encode %.3f ms, "
        "checked %.3f ms\n",
        r.objects[0].key.size(), encode_list_objects_unchecked(r).size(), plain, checked);
  }
}

}  // namespace

bool documents_fuzz_one(const std::uint8_t* data, std::size_t size);  // documents_fuzz.cc

namespace {

TEST(S3DocumentsFuzz, ReplayInvariants) {
  std::vector<std::string> seeds = {
      encode_list_objects(sample_list(ListKind::v1)),
      encode_list_objects(sample_list(ListKind::v2)),
      encode_list_objects(sample_list(ListKind::versions)),
      encode_list_buckets({{"o", "o"}, {{"b", "d"}}, "t", "p"}),
      encode_initiate_multipart({"b", "k", "u"}),
      encode_complete_result({"/b/k", "b", "k", "e", {{"CRC32", "a=="}}, "COMPOSITE"}),
      encode_delete_result({{{"k", ""}}, {{"k2", "AccessDenied", "no"}}}),
      encode_copy_result({true, "t", "e", {}}),
      encode_error({"InvalidPartNumber", "m", "/r", "id", {{"ActualPartCount", "1"}}}),
      encode_complete_multipart({{1, "e", {{"CRC32C", "x"}}}}),
      encode_delete_objects({false, {{"a", ""}}}),
      encode_versioning({"Suspended", "Disabled"}),
      encode_delete_result({{{"k", "v", true, "m"}}, {}}),
  };
  const std::string alphabet =
      "<>/&;#x\"' =![]-?\r\n\t\x01\xc3\xa9\xff"
      "0123456789";
  std::mt19937_64 rng(17);
  int checked = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(documents_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()))
        << seed;
    for (int m = 0; m < 150; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(documents_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(seeds.size()) * 150);
}

}  // namespace
}  // namespace objdirect::s3

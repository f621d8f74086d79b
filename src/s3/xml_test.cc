#include "s3/xml.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <pugixml.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/limits.hpp"
#include "s3/mutate_test_util.hpp"

namespace objdirect::s3 {
namespace {

constexpr const char* kNs = "http://s3.amazonaws.com/doc/2006-03-01/";

std::string delete_body(const std::vector<std::string>& escaped_keys, std::string extra = "") {
  std::string b = "<Delete>" + extra;
  for (const auto& k : escaped_keys) b += "<Object><Key>" + k + "</Key></Object>";
  return b + "</Delete>";
}

// The first (only) key of a one-object Delete body, failing the test on an error.
std::string one_key(const std::string& escaped) {
  auto r = parse_delete_objects(delete_body({escaped}));
  EXPECT_TRUE(r.ok()) << escaped << ": " << r.status().to_string();
  if (!r.ok() || r->objects.size() != 1) return "<error>";
  return r->objects[0].key;
}

// Wall time of f(), in milliseconds of an uninstrumented build: ASan/TSan Debug builds run the
// parser 5-20x slower (S3XmlHostile.DeepNestingIsLinear took 3 s under ASan on a loaded 2-core VM),
// so their time is scaled down instead of dropping the linearity bounds.
template <class F>
double elapsed_ms(F&& f) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)  // clang
#define OBJDIRECT_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    defined(OBJDIRECT_TEST_SANITIZED)
  constexpr double kSanitizerSlowdown = 10.0;
#else
  constexpr double kSanitizerSlowdown = 1.0;
#endif
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         kSanitizerSlowdown;
}

// ---- CompleteMultipartUpload --------------------------------------------------------------------

TEST(S3CompleteMultipart, ParsesPartsWithNamespace) {
  const std::string body = std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n") +
                           "<CompleteMultipartUpload xmlns=\"" + kNs + "\">\n" +
                           "  <Part>\n    <ETag>\"a54357aff0632cce46d942af68356b38\"</ETag>\n"
                           "    <PartNumber>1</PartNumber>\n  </Part>\n"
                           "  <Part><PartNumber> 2 </PartNumber><ETag>&quot;0c78aef83f66abc1fa1e"
                           "8477f296d394&quot;</ETag>"
                           "<ChecksumCRC32C>sOO8/Q==</ChecksumCRC32C><ChecksumSHA256> abc= "
                           "</ChecksumSHA256></Part>\n"
                           "</CompleteMultipartUpload>";
  auto r = parse_complete_multipart(body);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].part_number, 1u);
  EXPECT_EQ((*r)[0].etag, "a54357aff0632cce46d942af68356b38");
  EXPECT_TRUE((*r)[0].checksums.empty());
  EXPECT_EQ((*r)[1].part_number, 2u);
  EXPECT_EQ((*r)[1].etag, "0c78aef83f66abc1fa1e8477f296d394");
  ASSERT_EQ((*r)[1].checksums.size(), 2u);
  EXPECT_EQ((*r)[1].checksums[0], (std::pair<std::string, std::string>("CRC32C", "sOO8/Q==")));
  EXPECT_EQ((*r)[1].checksums[1], (std::pair<std::string, std::string>("SHA256", "abc=")));
}

TEST(S3CompleteMultipart, NamespaceAgnostic) {
  for (const std::string& body :
       {std::string("<CompleteMultipartUpload><Part><PartNumber>3</PartNumber><ETag>e</ETag>"
                    "</Part></CompleteMultipartUpload>"),
        std::string("<s3:CompleteMultipartUpload xmlns:s3=\"") + kNs +
            "\"><s3:Part><s3:PartNumber>3</s3:PartNumber><s3:ETag>e</s3:ETag></s3:Part>"
            "</s3:CompleteMultipartUpload>",
        std::string("<CompleteMultipartUpload xmlns=\"urn:other\"><Part><PartNumber>3</PartNumber>"
                    "<ETag>\"e\"</ETag><Unknown>x</Unknown></Part><Other/>"
                    "</CompleteMultipartUpload>")}) {
    auto r = parse_complete_multipart(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().to_string();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].part_number, 3u);
    EXPECT_EQ((*r)[0].etag, "e");
  }
}

TEST(S3CompleteMultipart, KeepsDocumentOrderAndDuplicates) {
  auto r = parse_complete_multipart(
      "<CompleteMultipartUpload><Part><PartNumber>5</PartNumber><ETag>a</ETag></Part>"
      "<Part><PartNumber>2</PartNumber><ETag>b</ETag></Part>"
      "<Part><PartNumber>2</PartNumber><ETag>c</ETag></Part></CompleteMultipartUpload>");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].part_number, 5u);
  EXPECT_EQ((*r)[1].part_number, 2u);
  EXPECT_EQ((*r)[2].etag, "c");
}

TEST(S3CompleteMultipart, PartNumberBounds) {
  auto with = [](const std::string& n) {
    return parse_complete_multipart("<CompleteMultipartUpload><Part><PartNumber>" + n +
                                    "</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>");
  };
  EXPECT_TRUE(with("1").ok());
  EXPECT_TRUE(with("10000").ok());
  EXPECT_TRUE(with("007").ok());
  EXPECT_EQ((*with("007"))[0].part_number, 7u);
  for (const char* bad : {"0", "10001", "-1", "+1", "1.0", "1e3", "abc", "", " ",
                          "99999999999999999999999", "0x10", "1 2"}) {
    const auto r = with(bad);
    EXPECT_EQ(r.code(), Errc::malformed_xml) << bad;
    EXPECT_NE(r.status().message().find("PartNumber"), std::string::npos) << bad;
  }
}

TEST(S3CompleteMultipart, Rejections) {
  for (const char* body : {
           "",
           "   \n",
           "not xml",
           "<CompleteMultipartUpload>",
           "<CompleteMultipartUpload></CompleteMultipartUpload>",
           "<CompleteMultipartUpload/>",
           "<Delete><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part></Delete>",
           "<CompleteMultipartUpload><Part><ETag>e</ETag></Part></CompleteMultipartUpload>",
           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
           "</CompleteMultipartUpload>",
           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber>"
           "<ETag>e</ETag></Part></CompleteMultipartUpload>",
           "<CompleteMultipartUpload><Part><PartNumber><x>1</x></PartNumber><ETag>e</ETag></Part>"
           "</CompleteMultipartUpload>",
           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>e</ETag>"
           "<ChecksumCRC32><b/></ChecksumCRC32></Part></CompleteMultipartUpload>",
           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part>"
           "</CompleteMultipartUpload><CompleteMultipartUpload/>",
           "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>e</ETag></Part>"
           "</CompleteMultipartUpload>trailing",
       }) {
    const auto r = parse_complete_multipart(body);
    EXPECT_EQ(r.code(), Errc::malformed_xml) << body;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(S3CompleteMultipart, AtMostPartsMax) {
  std::string body = "<CompleteMultipartUpload>";
  for (std::uint32_t i = 1; i <= limits::parts_max; ++i) {
    body += "<Part><PartNumber>" + std::to_string(i) + "</PartNumber><ETag>e</ETag></Part>";
  }
  const std::string ok_body = body + "</CompleteMultipartUpload>";
  auto r = parse_complete_multipart(ok_body);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->size(), limits::parts_max);
  EXPECT_EQ(r->back().part_number, limits::parts_max);
  const std::string too_many =
      body + "<Part><PartNumber>1</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>";
  EXPECT_EQ(parse_complete_multipart(too_many).code(), Errc::malformed_xml);
}

// ---- DeleteObjects ------------------------------------------------------------------------------

TEST(S3DeleteObjects, Basic) {
  auto r = parse_delete_objects(std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?>") +
                                "<Delete xmlns=\"" + kNs +
                                "\"><Quiet>true</Quiet><Object><Key>a/b.txt</Key></Object>"
                                "<Object><Key>c</Key><VersionId>v1</VersionId></Object></Delete>");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->quiet);
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "a/b.txt");
  EXPECT_EQ(r->objects[0].version_id, "");
  EXPECT_EQ(r->objects[1].key, "c");
  EXPECT_EQ(r->objects[1].version_id, "v1");
}

TEST(S3DeleteObjects, Quiet) {
  auto q = [](const std::string& extra) { return parse_delete_objects(delete_body({"k"}, extra)); };
  EXPECT_FALSE(q("")->quiet);
  EXPECT_FALSE(q("<Quiet>false</Quiet>")->quiet);
  EXPECT_TRUE(q("<Quiet>True</Quiet>")->quiet);
  EXPECT_TRUE(q("<Quiet> TRUE\n</Quiet>")->quiet);
  EXPECT_EQ(q("<Quiet>yes</Quiet>").code(), Errc::malformed_xml);
  EXPECT_EQ(q("<Quiet>1</Quiet>").code(), Errc::malformed_xml);
  EXPECT_EQ(q("<Quiet>true</Quiet><Quiet>true</Quiet>").code(), Errc::malformed_xml);
}

// A fake S3 server turned numeric-looking keys into numbers; ours must keep every key verbatim.
TEST(S3DeleteObjects, KeysStayExactStrings) {
  EXPECT_EQ(one_key("0"), "0");
  EXPECT_EQ(one_key("7"), "7");
  EXPECT_EQ(one_key("1e3"), "1e3");
  EXPECT_EQ(one_key("-0.0"), "-0.0");
  EXPECT_EQ(one_key("true"), "true");
  EXPECT_EQ(one_key("null"), "null");
  EXPECT_EQ(one_key("007"), "007");
  EXPECT_EQ(one_key(" "), " ");
  EXPECT_EQ(one_key("  lead and trail  "), "  lead and trail  ");
  EXPECT_EQ(one_key("\t"), "\t");
  EXPECT_EQ(one_key("a\nb"), "a\nb");
  EXPECT_EQ(one_key("a&#xD;b"), "a\rb");
  EXPECT_EQ(one_key("a&#13;b"), "a\rb");
  EXPECT_EQ(one_key("&amp;"), "&");
  EXPECT_EQ(one_key("a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;"), "a & b <c> \"d\" 'e'");
  EXPECT_EQ(one_key("&#x1;"), "\x01");
  EXPECT_EQ(one_key("&#233;t&#xE9;"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(one_key("\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80"),
            "\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80");
  EXPECT_EQ(one_key("<![CDATA[<raw> & stuff]]>"), "<raw> & stuff");
  EXPECT_EQ(one_key("a<![CDATA[&]]>b"), "a&b");
  EXPECT_EQ(one_key("  <![CDATA[x]]>  "), "  x  ");
  EXPECT_EQ(one_key("\n  <![CDATA[]]>"), "\n  ");
  EXPECT_EQ(one_key("a<!-- comment -->b"), "ab");
  EXPECT_EQ(one_key("%2F+%20"), "%2F+%20");
}

TEST(S3DeleteObjects, EmptyKeyIsKeptForThePerKeyError) {
  auto r =
      parse_delete_objects("<Delete><Object><Key></Key></Object><Object><Key/></Object></Delete>");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].key, "");
  EXPECT_EQ(r->objects[1].key, "");
}

TEST(S3DeleteObjects, Rejections) {
  for (const std::string& body : {
           std::string(""),
           std::string("<Delete></Delete>"),
           std::string("<Delete><Quiet>true</Quiet></Delete>"),
           std::string("<Delete><Object><VersionId>v</VersionId></Object></Delete>"),
           std::string("<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a<b/></Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a</Key><VersionId>1</VersionId>"
                       "<VersionId>2</VersionId></Object></Delete>"),
           std::string("<Remove><Object><Key>a</Key></Object></Remove>"),
           std::string("<Delete><Object><Key>a</Key></Object>"),
           std::string("<Delete><Object><Key>a</Key></Object></Delete2>"),
           std::string("<Delete><Object><Key>a & b</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a &lol; b</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>&#0;</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>&#xZZ;</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>&#x110000000;</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a\0b</Key></Object></Delete>", 46),
           std::string("<Delete><Object><Key>a</Key></Object></Delete>\0junk", 51),
           std::string("<Delete><Object><Key><![CDATA[a]]</Key></Object></Delete>"),
           std::string("junk<Delete><Object><Key>a</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a</Key></Object></Delete>&amp;"),
           std::string("<Delete><Object><Key>a</Key></Object></Delete><!-- c -->x"),
           std::string("<![CDATA[x]]><Delete><Object><Key>a</Key></Object></Delete>"),
           std::string("<Delete a=\"&lol;\"><Object><Key>a</Key></Object></Delete>"),
           std::string("<Delete><Object><Key>a</Key></Object></Delete></Delete>"),
           std::string("<Delete><Object><Key>a</Key></Object"),
       }) {
    const auto r = parse_delete_objects(body);
    EXPECT_EQ(r.code(), Errc::malformed_xml) << testing::PrintToString(body);
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(S3DeleteObjects, AtMostDeleteKeysMax) {
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < limits::delete_keys_max; ++i) keys.push_back(std::to_string(i));
  auto r = parse_delete_objects(delete_body(keys));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->objects.size(), 1000u);
  EXPECT_EQ(r->objects[999].key, "999");
  keys.push_back("1000");
  const auto too_many = parse_delete_objects(delete_body(keys));
  EXPECT_EQ(too_many.code(), Errc::malformed_xml);
  EXPECT_NE(too_many.status().message().find("at most 1000"), std::string::npos)
      << too_many.status().message();
}

TEST(S3XmlHostile, DoctypeAndBillionLaughsRejectedFast) {
  std::string laughs =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n"
      "<!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n";
  for (int i = 2; i <= 9; ++i) {
    laughs += "<!ENTITY lol" + std::to_string(i) + " \"";
    for (int k = 0; k < 10; ++k) laughs += "&lol" + std::to_string(i - 1) + ";";
    laughs += "\">\n";
  }
  laughs += "]>\n<Delete><Object><Key>&lol9;</Key></Object></Delete>";
  Status st;
  const double ms = elapsed_ms([&] { st = parse_delete_objects(laughs).status(); });
  EXPECT_EQ(st.code(), Errc::malformed_xml);
  EXPECT_NE(st.message().find("DOCTYPE"), std::string::npos) << st.message();
  EXPECT_LT(ms, 1000.0);
  // A harmless DOCTYPE is refused too, and external entities never get near a file.
  EXPECT_EQ(parse_delete_objects("<!DOCTYPE Delete><Delete><Object><Key>a</Key></Object></Delete>")
                .code(),
            Errc::malformed_xml);
  EXPECT_EQ(parse_delete_objects("<!DOCTYPE d [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
                                 "<Delete><Object><Key>&x;</Key></Object></Delete>")
                .code(),
            Errc::malformed_xml);
}

TEST(S3XmlHostile, DeepNestingIsLinear) {
  // ~2 MB of nesting, just under the body limit.
  const std::size_t depth = (limits::xml_body_bytes_max - 64) / 7;
  std::string body = "<Delete>";
  body.reserve(limits::xml_body_bytes_max);
  for (std::size_t i = 0; i < depth; ++i) body += "<a>";
  for (std::size_t i = 0; i < depth; ++i) body += "</a>";
  body += "</Delete>";
  ASSERT_LE(body.size(), limits::xml_body_bytes_max);
  Status st;
  const double ms = elapsed_ms([&] { st = parse_delete_objects(body).status(); });
  EXPECT_EQ(st.code(), Errc::malformed_xml);  // well-formed but lists no <Object>
  EXPECT_LT(ms, 2000.0);
  // The same inside a Key is not a leaf: rejected, not flattened.
  EXPECT_EQ(
      parse_delete_objects("<Delete><Object><Key><a><a>x</a></a></Key></Object></Delete>").code(),
      Errc::malformed_xml);
}

TEST(S3XmlHostile, BodySizeLimit) {
  std::string body = "<Delete><Object><Key>k</Key></Object>";
  body += std::string(limits::xml_body_bytes_max, ' ');
  body += "</Delete>";
  Status st;
  const double ms = elapsed_ms([&] { st = parse_delete_objects(body).status(); });
  EXPECT_EQ(st.code(), Errc::malformed_xml);
  EXPECT_NE(st.message().find("larger than"), std::string::npos) << st.message();
  EXPECT_LT(ms, 1000.0);
  EXPECT_EQ(parse_complete_multipart(body).code(), Errc::malformed_xml);
  EXPECT_EQ(parse_create_bucket(std::string(limits::xml_body_bytes_max + 1, ' ')).code(),
            Errc::malformed_xml);
}

TEST(S3XmlHostile, QuotedAttributesMayHoldMarkup) {
  auto r = parse_delete_objects(
      "<Delete a=\"x>y\" b='&amp;/>'><!-- <Delete> & --><?pi & ?><Object><Key>k</Key></Object>"
      "</Delete>\n<!-- trailing comment -->\n");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->objects[0].key, "k");
}

TEST(S3XmlHostile, Utf8BomAndDeclarationAccepted) {
  auto r = parse_delete_objects(
      "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Object><Key>k</Key>"
      "</Object></Delete>");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->objects[0].key, "k");
}

// ---- CreateBucket -------------------------------------------------------------------------------

TEST(S3CreateBucket, Body) {
  EXPECT_EQ(*parse_create_bucket(""), "");
  EXPECT_EQ(*parse_create_bucket(" \r\n\t"), "");
  EXPECT_EQ(*parse_create_bucket(std::string("<CreateBucketConfiguration xmlns=\"") + kNs +
                                 "\"><LocationConstraint>us-west-2</LocationConstraint>"
                                 "</CreateBucketConfiguration>"),
            "us-west-2");
  EXPECT_EQ(*parse_create_bucket("<CreateBucketConfiguration><LocationConstraint> eu-west-1\n"
                                 "</LocationConstraint></CreateBucketConfiguration>"),
            "eu-west-1");
  EXPECT_EQ(*parse_create_bucket("<CreateBucketConfiguration/>"), "");
  EXPECT_EQ(*parse_create_bucket("<CreateBucketConfiguration><Bucket><Type>Directory</Type>"
                                 "</Bucket></CreateBucketConfiguration>"),
            "");
  for (const char* bad : {"<Config><LocationConstraint>x</LocationConstraint></Config>", "garbage",
                          "<CreateBucketConfiguration>",
                          "<CreateBucketConfiguration><LocationConstraint>a"
                          "</LocationConstraint><LocationConstraint>b</LocationConstraint>"
                          "</CreateBucketConfiguration>"}) {
    EXPECT_EQ(parse_create_bucket(bad).code(), Errc::malformed_xml) << bad;
  }
}

// ---- Writing ------------------------------------------------------------------------------------

TEST(S3XmlEscape, Characters) {
  EXPECT_EQ(xml_escape("plain"), "plain");
  EXPECT_EQ(xml_escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e'f");
  EXPECT_EQ(xml_escape("]]>"), "]]&gt;");
  EXPECT_EQ(xml_escape("\t\n\r"), "&#x9;&#xA;&#xD;");
  EXPECT_EQ(xml_escape(std::string("\x01\x1f\0", 3)), "&#x1;&#x1F;\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\x7f"), "\x7f");
  EXPECT_EQ(xml_escape("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(xml_escape("\xef\xbf\xbe\xef\xbf\xbf"), "&#xFFFE;&#xFFFF;");
  EXPECT_EQ(xml_escape("a\xff"
                       "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(xml_escape("\xc3"), "\xef\xbf\xbd");
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(S3XmlWriter, Structure) {
  XmlWriter w;
  w.open("ListBucketResult", kNs);
  w.element("Name", "b&b");
  w.element("MaxKeys", std::uint64_t{1000});
  w.element("IsTruncated", "false");
  w.open("Contents");
  w.element("Key", "k");
  w.element("Size", std::uint64_t{18446744073709551615ull});
  w.close();
  w.open_with_attributes("Grantee", {{"xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance"},
                                     {"xsi:type", "Canonical\"User"}});
  w.close();
  w.close();
  EXPECT_EQ(w.finish(),
            std::string("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"") +
                kNs +
                "\"><Name>b&amp;b</Name><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
                "<Contents><Key>k</Key><Size>18446744073709551615</Size></Contents>"
                "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                "xsi:type=\"Canonical&quot;User\"></Grantee></ListBucketResult>");
}

TEST(S3XmlWriter, FinishClosesAndResets) {
  XmlWriter w;
  w.open("A");
  w.open("B");
  w.element("C", "");
  EXPECT_EQ(w.finish(), "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<A><B><C></C></B></A>");
  w.element("D", "x");
  EXPECT_EQ(w.finish(), "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<D>x</D>");
}

// Everything the writer emits (except the bytes it must replace) comes back exactly through
// pugixml and through our own Delete parser.
TEST(S3XmlWriter, RoundTripThroughParsers) {
  std::vector<std::string> keys = {"0",
                                   "1e3",
                                   " ",
                                   "  x  ",
                                   "a&b",
                                   "<tag>",
                                   "\"q\" 'a'",
                                   "]]>",
                                   "tab\there",
                                   "cr\rlf\n",
                                   "\r\n",
                                   "\xc3\xa9\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80",
                                   "&amp;",
                                   "&#x41;",
                                   "%2F"};
  std::string all_bytes;
  for (int c = 1; c < 0x80; ++c) all_bytes += static_cast<char>(c);
  keys.push_back(all_bytes);
  keys.push_back(std::string(1024, 'k'));

  XmlWriter w;
  w.open("Delete", kNs);
  w.element("Quiet", "true");
  for (const auto& k : keys) {
    w.open("Object");
    w.element("Key", k);
    w.close();
  }
  w.close();
  const std::string doc = w.finish();

  auto r = parse_delete_objects(doc);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->quiet);
  ASSERT_EQ(r->objects.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(r->objects[i].key, keys[i]) << i;
  }

  pugi::xml_document pd;
  ASSERT_TRUE(
      pd.load_buffer(doc.data(), doc.size(), pugi::parse_default | pugi::parse_ws_pcdata_single));
  std::size_t i = 0;
  for (pugi::xml_node o : pd.child("Delete").children("Object")) {
    ASSERT_LT(i, keys.size());
    EXPECT_EQ(std::string(o.child("Key").text().get()), keys[i]) << i;
    ++i;
  }
  EXPECT_EQ(i, keys.size());
}

TEST(S3XmlWriter, AttributeRoundTrip) {
  const std::string value = "a\"b'c<d>&e\tf\ng\rh";
  XmlWriter w;
  w.open_with_attributes("X", {{"v", value}});
  const std::string doc = w.finish();
  pugi::xml_document pd;
  ASSERT_TRUE(pd.load_string(doc.c_str()));
  EXPECT_EQ(std::string(pd.child("X").attribute("v").value()), value);
}

TEST(S3ErrorXml, Format) {
  EXPECT_EQ(error_xml("NoSuchKey", "The specified key does not exist.", "/b/k<1>", "req-1"),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
            "<Message>The specified key does not exist.</Message>"
            "<Resource>/b/k&lt;1&gt;</Resource><RequestId>req-1</RequestId></Error>");
}

TEST(S3ErrorXml, MessageIsNeverEmpty) {
  pugi::xml_document pd;
  const std::string doc = error_xml("InternalError", "", "", "");
  ASSERT_TRUE(pd.load_string(doc.c_str()));
  EXPECT_EQ(std::string(pd.child("Error").child_value("Message")), "InternalError");
  const std::string doc2 = error_xml("", "", "", "");
  ASSERT_TRUE(pd.load_string(doc2.c_str()));
  EXPECT_FALSE(std::string(pd.child("Error").child_value("Message")).empty());
}

}  // namespace
}  // namespace objdirect::s3

namespace objdirect::s3 {
bool xml_fuzz_one(const std::uint8_t* data, std::size_t size);  // xml_fuzz.cc
namespace {

TEST(S3XmlFuzz, ReplayInvariants) {
  const std::vector<std::string> seeds = {
      "<Delete><Quiet>true</Quiet><Object><Key>a &amp; b</Key><VersionId>v</VersionId></Object>"
      "<Object><Key> </Key></Object></Delete>",
      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Part>"
      "<PartNumber>1</PartNumber><ETag>\"e\"</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>"
      "</CompleteMultipartUpload>",
      "<CreateBucketConfiguration><LocationConstraint>us-west-2</LocationConstraint>"
      "</CreateBucketConfiguration>",
      "<Delete><Object><Key><![CDATA[x<y]]>&#xD;&#x1;\xc3\xa9</Key></Object></Delete>",
      "plain text key \t\r\n \xe2\x82\xac"};
  const std::string alphabet = "<>/&;#x\"' =![]CDATA-?\r\n\t\x01\xc3\xa9\xff";
  std::mt19937_64 rng(42);
  int checked = 0;
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(xml_fuzz_one(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size()));
    for (int m = 0; m < 400; ++m) {
      std::string s = testing_util::mutate(seed, alphabet, rng);
      ASSERT_TRUE(xml_fuzz_one(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()))
          << testing::PrintToString(s);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * 400);
}

TEST(S3ErrorXml, ParseReadsBackWhatErrorXmlWrites) {
  const auto e = parse_error_xml(error_xml("NoSuchKey", "gone <now>", "/b/k", "req-7"));
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "gone <now>");
  EXPECT_EQ(e.request_id, "req-7");
  const auto none = parse_error_xml("not xml");
  EXPECT_TRUE(none.code.empty() && none.message.empty() && none.request_id.empty());
  EXPECT_TRUE(parse_error_xml("").code.empty());
}

}  // namespace
}  // namespace objdirect::s3

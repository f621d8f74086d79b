// ClientConfig::load against a temporary HOME and a controlled environment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/retry.hpp"
#include "objdirect/client.hpp"

namespace objdirect {
namespace {

namespace fs = std::filesystem;

const char* kVars[] = {"AWS_ENDPOINT_URL",   "AWS_ENDPOINT_URL_S3",
                       "AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY",
                       "AWS_SESSION_TOKEN",  "AWS_REGION",
                       "AWS_DEFAULT_REGION", "AWS_PROFILE",
                       "AWS_CONFIG_FILE",    "AWS_SHARED_CREDENTIALS_FILE",
                       "OBJDIRECT_FABRIC",   "AWS_MAX_ATTEMPTS",
                       "AWS_RETRY_MODE",     "OBJDIRECT_RDMA_LEARN"};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) unsetenv(v);
    home_ = fs::temp_directory_path() / ("od-config-test-" + std::to_string(getpid()));
    fs::remove_all(home_);
    fs::create_directories(home_ / ".aws");
    setenv("HOME", home_.c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    fs::remove_all(home_);
  }
  void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

  fs::path home_;
};

TEST_F(ConfigTest, NothingSetGivesDefaults) {
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->profile, "default");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_TRUE(c->endpoint.empty());
  EXPECT_TRUE(c->access_key.empty());
  EXPECT_EQ(c->fabric, "auto");
  EXPECT_EQ(c->part_size_bytes, 8u << 20);
  EXPECT_EQ(c->concurrency, 8u);
}

TEST_F(ConfigTest, EnvironmentOnly) {
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
  setenv("AWS_ACCESS_KEY_ID", "AK", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
  setenv("AWS_SESSION_TOKEN", "TOK", 1);
  setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
  setenv("OBJDIRECT_FABRIC", "none", 1);
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(c->access_key, "AK");
  EXPECT_EQ(c->secret_key, "SK");
  EXPECT_EQ(c->session_token, "TOK");
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->fabric, "none");
  setenv("AWS_REGION", "ap-south-1", 1);  // AWS_REGION beats AWS_DEFAULT_REGION
  EXPECT_EQ(ClientConfig::load()->region, "ap-south-1");
}

TEST_F(ConfigTest, RdmaLearnFromTheEnvironment) {
  EXPECT_TRUE(ClientConfig::load()->rdma_learn);
  setenv("OBJDIRECT_RDMA_LEARN", "0", 1);
  EXPECT_FALSE(ClientConfig::load()->rdma_learn);
  setenv("OBJDIRECT_RDMA_LEARN", "1", 1);
  EXPECT_TRUE(ClientConfig::load()->rdma_learn);
  setenv("OBJDIRECT_RDMA_LEARN", "yes", 1);
  auto c = ClientConfig::load();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "OBJDIRECT_RDMA_LEARN must be 0 or 1, got 'yes'");
}

TEST_F(ConfigTest, DefaultProfileFromFiles) {
  write(home_ / ".aws/credentials",
        "# comment\n[default]\naws_access_key_id = FILEAK\naws_secret_access_key=FILESK\n");
  write(home_ / ".aws/config",
        "[default]\nregion = us-west-2\nendpoint_url = http://10.0.0.1:9000\ns3 =\n  "
        "addressing_style = path\n");
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->access_key, "FILEAK");
  EXPECT_EQ(c->secret_key, "FILESK");
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(c->endpoint, "http://10.0.0.1:9000");
}

// awscli's nested "s3 =" block: its addressing_style is read (the default profile and a named
// one); other keys of the block, and indented lines without a block, are not top-level keys.
TEST_F(ConfigTest, NestedS3AddressingStyleIsRead) {
  write(home_ / ".aws/config",
        "[default]\nregion = us-west-2\n  stray = 1\ns3 =\n    addressing_style = virtual\n"
        "    # a comment in the block\n    multipart_threshold = 64MB\n"
        "endpoint_url = http://10.0.0.1:9000\n"
        "[profile p]\ns3 =\n  addressing_style = path\n[profile q]\nregion = r\n");
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->addressing_style, "virtual");
  EXPECT_EQ(c->endpoint, "http://10.0.0.1:9000");  // the block ended at the unindented line
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(ClientConfig::load("p")->addressing_style, "path");
  EXPECT_EQ(ClientConfig::load("q")->addressing_style, "path");  // the default
  // A bad value is refused by Client::create, naming it.
  write(home_ / ".aws/config", "[default]\ns3 =\n  addressing_style = sideways\n");
  auto bad = ClientConfig::load();
  ASSERT_TRUE(bad.ok());
  bad->endpoint = "http://127.0.0.1:9";
  auto cl = Client::create(*bad);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("sideways"), std::string::npos);
}

// The other keys awscli's s3 commands read from the block: max_concurrent_requests,
// multipart_threshold and multipart_chunksize with awscli's 1024-based suffixes.
TEST_F(ConfigTest, NestedS3TransferSettingsAreRead) {
  write(home_ / ".aws/config",
        "[default]\ns3 =\n  max_concurrent_requests = 20\n  multipart_threshold = 64MB\n"
        "  multipart_chunksize = 16MiB\n  max_bandwidth = 50MB/s\n"
        "  use_accelerate_endpoint = false\n"
        "[profile kb]\ns3 =\n  multipart_threshold = 512kb\n  multipart_chunksize = 10485760\n"
        "[profile big]\ns3 =\n  multipart_chunksize = 1 GB\n  multipart_threshold = 2TiB\n");
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->concurrency, 20u);
  EXPECT_EQ(c->multipart_threshold_bytes, 64ull << 20);
  EXPECT_EQ(c->part_size_bytes, 16ull << 20);
  auto kb = ClientConfig::load("kb");
  ASSERT_TRUE(kb.ok()) << kb.status().to_string();
  EXPECT_EQ(kb->multipart_threshold_bytes, 512ull << 10);
  EXPECT_EQ(kb->part_size_bytes, 10485760u);
  EXPECT_EQ(kb->concurrency, 8u);  // the default
  auto big = ClientConfig::load("big");
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(big->part_size_bytes, 1ull << 30);
  EXPECT_EQ(big->multipart_threshold_bytes, 2ull << 40);
}

// Values awscli refuses are refused, naming the file, the profile, the key and the value;
// use_accelerate_endpoint = true is refused (there is no accelerate endpoint to go to).
TEST_F(ConfigTest, NestedS3BadValuesAreRefused) {
  for (const char* line :
       {"max_concurrent_requests = 0", "max_concurrent_requests = ten", "multipart_threshold = 8XB",
        "multipart_threshold = 1.5MB", "multipart_chunksize = MB", "multipart_chunksize = -8MB",
        "multipart_chunksize = 0", "use_accelerate_endpoint = true",
        "use_accelerate_endpoint = maybe"}) {
    write(home_ / ".aws/config", std::string("[default]\ns3 =\n  ") + line + "\n");
    auto c = ClientConfig::load();
    ASSERT_FALSE(c.ok()) << line;
    EXPECT_EQ(c.code(), Errc::invalid_argument) << line;
    const std::string key(line, std::string_view(line).find(' '));
    EXPECT_NE(c.status().message().find("s3." + key), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("[default]"), std::string::npos) << c.status().message();
  }
  write(home_ / ".aws/config", "[default]\ns3 =\n  use_accelerate_endpoint = true\n");
  EXPECT_NE(ClientConfig::load().status().message().find("Transfer Acceleration"),
            std::string::npos);
}

TEST_F(ConfigTest, NamedProfileUsesProfileSectionInConfig) {
  write(home_ / ".aws/credentials",
        "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
        "[work]\naws_access_key_id = W\naws_secret_access_key = WS\n");
  write(home_ / ".aws/config", "[default]\nregion = r-default\n[profile work]\nregion = r-work\n");
  auto c = ClientConfig::load("work");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->profile, "work");
  EXPECT_EQ(c->access_key, "W");
  EXPECT_EQ(c->region, "r-work");
  setenv("AWS_PROFILE", "work", 1);
  EXPECT_EQ(ClientConfig::load()->access_key, "W");
}

TEST_F(ConfigTest, EnvironmentKeysBeatDefaultProfileButNotExplicitOne) {
  write(home_ / ".aws/credentials",
        "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
        "[work]\naws_access_key_id = W\naws_secret_access_key = WS\n");
  setenv("AWS_ACCESS_KEY_ID", "E", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "ES", 1);
  EXPECT_EQ(ClientConfig::load()->access_key, "E");
  EXPECT_EQ(ClientConfig::load("work")->access_key, "W");
}

TEST_F(ConfigTest, KeysInConfigFileAndFileOverrides) {
  fs::path conf = home_ / "other-config";
  write(conf,
        "[profile p]\naws_access_key_id = CK\naws_secret_access_key = CS\n"
        "aws_session_token = CT\n");
  setenv("AWS_CONFIG_FILE", conf.c_str(), 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", (home_ / "missing").c_str(), 1);
  auto c = ClientConfig::load("p");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->access_key, "CK");
  EXPECT_EQ(c->session_token, "CT");
}

TEST_F(ConfigTest, UnknownProfileAndMalformedFileAreErrors) {
  write(home_ / ".aws/credentials", "[default]\naws_access_key_id = D\n");
  EXPECT_EQ(ClientConfig::load("nope").code(), Errc::invalid_argument);
  write(home_ / ".aws/config", "[default\nregion = x\n");
  auto c = ClientConfig::load();
  EXPECT_EQ(c.code(), Errc::invalid_argument);
  EXPECT_NE(c.status().message().find(":1:"), std::string::npos) << c.status().message();
}

TEST_F(ConfigTest, RetriesDefaultToBoto3Standard) {
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->max_attempts, 3u);
  EXPECT_EQ(c->retry_mode, "standard");
}

TEST_F(ConfigTest, RetriesFromProfileThenEnvironment) {
  write(home_ / ".aws" / "config",
        "[default]\nmax_attempts = 6\nretry_mode = adaptive\n[profile p]\nmax_attempts = 2\n");
  auto c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->max_attempts, 6u);
  EXPECT_EQ(c->retry_mode, "adaptive");
  auto p = ClientConfig::load("p");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->max_attempts, 2u);
  EXPECT_EQ(p->retry_mode, "standard");
  setenv("AWS_MAX_ATTEMPTS", "9", 1);
  setenv("AWS_RETRY_MODE", "standard", 1);
  c = ClientConfig::load();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->max_attempts, 9u);
  EXPECT_EQ(c->retry_mode, "standard");
}

TEST_F(ConfigTest, BadRetrySettingsNameTheirSource) {
  setenv("AWS_MAX_ATTEMPTS", "0", 1);
  auto c = ClientConfig::load();
  ASSERT_EQ(c.code(), Errc::invalid_argument);
  EXPECT_NE(c.status().message().find("AWS_MAX_ATTEMPTS"), std::string::npos);
  unsetenv("AWS_MAX_ATTEMPTS");
  setenv("AWS_RETRY_MODE", "fast", 1);
  c = ClientConfig::load();
  ASSERT_EQ(c.code(), Errc::invalid_argument);
  EXPECT_NE(c.status().message().find("AWS_RETRY_MODE"), std::string::npos);
  unsetenv("AWS_RETRY_MODE");
  write(home_ / ".aws" / "config", "[default]\nmax_attempts = 21\n");
  c = ClientConfig::load();
  ASSERT_EQ(c.code(), Errc::invalid_argument);
  EXPECT_NE(c.status().message().find("config"), std::string::npos);
}

TEST_F(ConfigTest, CreateValidatesRetrySettings) {
  ClientConfig c;
  c.endpoint = "http://127.0.0.1:1";
  c.max_attempts = limits::retry_attempts_max + 1;
  EXPECT_EQ(Client::create(c).code(), Errc::invalid_argument);
  c.max_attempts = 3;
  c.retry_mode = "sometimes";
  EXPECT_EQ(Client::create(c).code(), Errc::invalid_argument);
  c.retry_mode = "adaptive";
  c.retry_max_backoff_ms = limits::retry_backoff_ms_max + 1;
  EXPECT_EQ(Client::create(c).code(), Errc::invalid_argument);
  c.retry_max_backoff_ms = 1000;
  EXPECT_TRUE(Client::create(c).ok());
}

}  // namespace
}  // namespace objdirect

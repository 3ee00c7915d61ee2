// CURVE key files: czmq's certificate format, secret files kept private, malformed files refused
// by name, and a cluster's key directories giving each role its own secret only.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/wire/curve.h"

namespace pstrain {
namespace wire {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/curve_keys_" + name;
  fs::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(CurveKeysTest, CertificatesAreCzmqsFormatAndReadBack) {
  const std::string dir = FreshDir("format");
  fs::create_directories(dir);
  Result<CurveKeyPair> keys = NewCurveKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->public_key.size(), 40u);
  ASSERT_TRUE(WriteCurveCertificates(dir + "/a.key", keys.value()).ok());
  // As czmq's zcert_save writes them: a `curve` section, quoted Z85 values, four-space indent.
  const std::string secret_text = ReadFile(dir + "/a.key_secret");
  EXPECT_NE(secret_text.find("\ncurve\n    public-key = \"" + keys->public_key +
                             "\"\n"
                             "    secret-key = \"" +
                             keys->secret_key + "\"\n"),
            std::string::npos)
      << secret_text;
  EXPECT_EQ(ReadFile(dir + "/a.key").find("secret-key"), std::string::npos);
  EXPECT_EQ(ModeOf(dir + "/a.key_secret"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/a.key"), 0644u);

  Result<CurveKeyPair> secret = ReadSecretCertificate(dir + "/a.key_secret");
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->public_key, keys->public_key);
  EXPECT_EQ(secret->secret_key, keys->secret_key);
  Result<CurveKeyPair> pub = ReadPublicCertificate(dir + "/a.key");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->public_key, keys->public_key);
  EXPECT_TRUE(pub->secret_key.empty());
}

TEST(CurveKeysTest, SecretFileThatOthersMayReadIsRefusedNamingTheFile) {
  const std::string dir = FreshDir("mode");
  fs::create_directories(dir);
  ASSERT_TRUE(WriteCurveCertificates(dir + "/a.key", NewCurveKeyPair().value()).ok());
  chmod((dir + "/a.key_secret").c_str(), 0640);
  Result<CurveKeyPair> secret = ReadSecretCertificate(dir + "/a.key_secret");
  ASSERT_FALSE(secret.ok());
  EXPECT_EQ(secret.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(secret.status().message().find(dir + "/a.key_secret holds a secret key but group or "
                                                 "others may read it (mode 0640)"),
            std::string::npos)
      << secret.status().message();
}

TEST(CurveKeysTest, MalformedCertificatesAreRefusedNamingTheFileAndLine) {
  const std::string dir = FreshDir("malformed");
  fs::create_directories(dir);
  const CurveKeyPair keys = NewCurveKeyPair().value();
  const CurveKeyPair other = NewCurveKeyPair().value();
  const std::vector<std::pair<std::string, std::string>> cases{
      {"curve\n    public-key = \"tooshort\"\n",
       ":2: public-key is not a CURVE key (expected 40 "
       "Z85 characters, got 8)"},
      {"curve\n    public-key: \"" + keys.public_key + "\"\n", ":2: expected `    public-key = "},
      {"metadata\n    public-key = \"" + keys.public_key + "\"\n",
       ": no public-key in a `curve` section"},
      {"curve\n    public-key = \"" + keys.public_key + "\"\n",
       ": no secret-key in its `curve` section"},
      {"curve\n    public-key = \"" + other.public_key + "\"\n    secret-key = \"" +
           keys.secret_key + "\"\n",
       ": its public-key does not belong to its secret-key"},
      {"", ": no public-key in a `curve` section"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir + "/bad" + std::to_string(i) + ".key_secret";
    WriteFile(path, cases[i].first, 0600);
    Result<CurveKeyPair> read = ReadSecretCertificate(path);
    ASSERT_FALSE(read.ok()) << i;
    EXPECT_EQ(read.status().message().find(path + cases[i].second), 0u)
        << i << ": " << read.status().message();
  }
  Result<CurveKeyPair> missing = ReadPublicCertificate(dir + "/none.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir + "/none.key"), std::string::npos);
}

TEST(ClusterKeysTest, EachRoleDirectoryHoldsItsOwnSecretAndEveryPublicKey) {
  const std::string dir = FreshDir("cluster");
  ASSERT_TRUE(WriteClusterKeys(dir, 2, 2, 1).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
  const std::set<std::string> roles{"ps-0", "ps-1", "worker-0", "worker-1", "evaluator-0"};
  std::set<std::string> public_keys;
  for (const std::string& role : roles) {
    const std::string role_dir = dir + "/" + role;
    EXPECT_EQ(ModeOf(role_dir), 0700u) << role_dir;
    std::set<std::string> files;
    for (const auto& entry : fs::directory_iterator(role_dir)) {
      files.insert(entry.path().filename().string());
    }
    std::set<std::string> expected{role + ".key_secret"};
    for (const std::string& r : roles) expected.insert(r + ".key");
    EXPECT_EQ(files, expected) << role_dir;
    public_keys.insert(ReadPublicCertificate(role_dir + "/" + role + ".key")->public_key);
  }
  EXPECT_EQ(public_keys.size(), roles.size()) << "every role has its own key pair";

  Result<ClusterKeys> ps1 = LoadClusterKeys(dir + "/ps-1", "ps", 1);
  ASSERT_TRUE(ps1.ok()) << ps1.status().ToString();
  ASSERT_EQ(ps1->ps_keys.size(), 2u);
  EXPECT_EQ(ps1->ps_keys[1], ps1->own.public_key);
  std::set<std::string> clients;
  for (const auto& [key, name] : ps1->client_keys) clients.insert(name);
  EXPECT_EQ(clients, (std::set<std::string>{"worker-0", "worker-1", "evaluator-0"}));
  // A server also lets in the other servers (they replicate to one another), each by its name.
  std::map<std::string, std::string> let_in = ps1->ForServer().client_keys;
  EXPECT_EQ(let_in.size(), 5u);
  EXPECT_EQ(let_in[ps1->ps_keys[0]], "ps-0");
  EXPECT_EQ(let_in[ps1->ps_keys[1]], "ps-1");

  Result<ClusterKeys> worker = LoadClusterKeys(dir + "/worker-1", "worker", 1);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  Result<Security> to_ps0 = worker->ForClientOf(0);
  ASSERT_TRUE(to_ps0.ok());
  EXPECT_EQ(to_ps0->server_key, ps1->ps_keys[0]);
  EXPECT_EQ(to_ps0->own.public_key, worker->own.public_key);
  Result<Security> to_ps2 = worker->ForClientOf(2);
  ASSERT_FALSE(to_ps2.ok());
  EXPECT_NE(to_ps2.status().message().find(dir + "/worker-1/ps-2.key"), std::string::npos)
      << to_ps2.status().message();
  EXPECT_FALSE(ClusterKeys{}.ForClientOf(5)->curve()) << "no keys: plaintext";

  Status again = WriteClusterKeys(dir, 1, 1, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find(dir + " exists and is not empty"), std::string::npos);
}

TEST(ClusterKeysTest, ABadKeyDirectoryIsRefusedNamingTheFile) {
  const std::string dir = FreshDir("bad_cluster");
  ASSERT_TRUE(WriteClusterKeys(dir, 2, 1, 0).ok());
  // Another role's directory: this role's secret is not there.
  Result<ClusterKeys> wrong = LoadClusterKeys(dir + "/worker-0", "ps", 0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(dir + "/worker-0/ps-0.key_secret"), std::string::npos)
      << wrong.status().message();
  // A missing public key of a server.
  fs::remove(dir + "/worker-0/ps-0.key");
  Result<ClusterKeys> gap = LoadClusterKeys(dir + "/worker-0", "worker", 0);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("missing " + dir + "/worker-0/ps-0.key"), std::string::npos)
      << gap.status().message();
  // A corrupted public key.
  WriteFile(dir + "/ps-1/worker-0.key", "curve\n    public-key = \"x\"\n", 0644);
  Result<ClusterKeys> corrupt = LoadClusterKeys(dir + "/ps-1", "ps", 1);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find(dir + "/ps-1/worker-0.key:2:"), std::string::npos)
      << corrupt.status().message();
  // A server's own public key replaced: clients would not trust it.
  fs::copy_file(dir + "/ps-0/ps-1.key", dir + "/ps-0/ps-0.key",
                fs::copy_options::overwrite_existing);
  Result<ClusterKeys> mismatch = LoadClusterKeys(dir + "/ps-0", "ps", 0);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find(dir + "/ps-0/ps-0.key does not match"),
            std::string::npos)
      << mismatch.status().message();
  Result<ClusterKeys> nowhere = LoadClusterKeys(dir + "/nope", "worker", 0);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_NE(nowhere.status().message().find(dir + "/nope/worker-0.key_secret"), std::string::npos);
}

}  // namespace
}  // namespace wire
}  // namespace pstrain

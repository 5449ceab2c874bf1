// Where the rendezvous token comes from: private token files, and the per-Slurm-step token
// derived from the user's secret.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "agent/link/job_token.hpp"
#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "support/temp_dir.hpp"

namespace test_token_file {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;

TEST_CASE("rdzv token: a token file gives its first line, trimmed", "[token]") {
  TempDir dir;
  const std::string path = dir.write("t", "  s3cret \t\nsecond line\n");
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  CHECK(read_token_file(path, "--rdzv-token-file") == "s3cret");
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  CHECK_THROWS_WITH(read_token_file(path, "--rdzv-token-file"),
                    Contains("mode 0640); run chmod 600"));
  const std::string long_file = dir.write("long", std::string(kMaxTokenBytes + 1, 'x'));
  REQUIRE(::chmod(long_file.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_token_file(long_file, "--rdzv-token-file"),
                    Contains("longer than 4096 bytes"));
}

TEST_CASE("rdzv token: the secret is found through XDG_CONFIG_HOME, else HOME", "[token]") {
  CHECK(user_secret_path({{"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}}) == "/x/npu_run/rdzv_secret");
  CHECK(user_secret_path({{"HOME", "/h"}}) == "/h/.config/npu_run/rdzv_secret");
  CHECK_FALSE(user_secret_path({}).has_value());
}

TEST_CASE("rdzv token: agents starting together derive one token per job step", "[token]") {
  TempDir dir;
  const std::string secret = dir.file("config/npu_run/rdzv_secret");
  // Eight "nodes" racing to create the secret all end up with the same one.
  std::vector<std::string> tokens(8);
  std::vector<std::thread> nodes;
  for (size_t i = 0; i < tokens.size(); ++i)
    nodes.emplace_back([&, i] { tokens[i] = derive_job_token(secret, "77.0"); });
  for (auto& t : nodes) t.join();
  CHECK(std::set<std::string>(tokens.begin(), tokens.end()).size() == 1);
  CHECK(tokens[0].size() == 64);
  CHECK(derive_job_token(secret, "77.1") != tokens[0]);
  CHECK(derive_job_token(secret, "78.0") != tokens[0]);
  struct stat st {};
  REQUIRE(::stat(secret.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Another user's secret (here: one others may read) is refused, not used.
  REQUIRE(::chmod(secret.c_str(), 0644) == 0);
  CHECK_THROWS_AS(derive_job_token(secret, "77.0"), UsageError);
}

}  // namespace test_token_file

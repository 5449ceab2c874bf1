// docs/ERRORS.md is the list of user mistakes with npu_run's exact answer to each; this test runs
// every row of its table, so the document cannot drift from what the binary says.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "support/harness.hpp"
#include "support/silent_listener.hpp"
#include "support/temp_dir.hpp"

namespace test_error_table {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

struct Row {
  std::string mistake;
  EnvOverrides env;
  std::vector<std::string> args;
  int exit_code = 0;
  std::string message;
};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" `");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" `");
  return text.substr(first, last - first + 1);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    for (auto pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos))
      text.replace(pos, key.size(), value);
  }
  return text;
}

std::vector<Row> read_table(const std::map<std::string, std::string>& values) {
  std::ifstream in(source_dir() + "/docs/ERRORS.md");
  REQUIRE(in);
  std::vector<Row> rows;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("error-table:begin") != std::string::npos) inside = true;
    if (line.find("error-table:end") != std::string::npos) break;
    if (!inside || line.rfind("| ", 0) != 0 || line.rfind("| Mistake", 0) == 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream split(line.substr(1));
    while (std::getline(split, cell, '|')) cells.push_back(trim(substitute(cell, values)));
    REQUIRE(cells.size() >= 5);
    Row row{cells[0], {}, words(cells[2]), std::stoi(cells[3]), cells[4]};
    for (const std::string& assignment : words(cells[1])) {
      const auto eq = assignment.find('=');
      REQUIRE(eq != std::string::npos);
      row.env[assignment.substr(0, eq)] = assignment.substr(eq + 1);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

TEST_CASE("error table: every mistake in docs/ERRORS.md gets its message and exit code",
          "[integration][errors]") {
  TempDir dir;
  REQUIRE(::chmod(dir.write("open_token", "secret\n").c_str(), 0644) == 0);
  dir.write("bad_table.json", "{\"version\": \"1.0\", \"server_list\": [");
  dir.write("table.json",
            read_file(source_dir() + "/tests/data/rank_table/hccl_2p_01_127.0.0.1_v1.2.json"));
  dir.write("dev/davinci0", "");
  dir.write("dev/davinci1", "");
  SilentListener busy;
  const std::map<std::string, std::string> values = {{"{dir}", dir.path()},
                                                     {"{free_port}", std::to_string(unused_port())},
                                                     {"{busy_port}", std::to_string(busy.port())}};
  const std::vector<Row> rows = read_table(values);
  CHECK(rows.size() >= 25);
  for (const Row& row : rows) {
    const Finished f = run_npu_run(row.args, row.env, 30s, dir.path());
    INFO("mistake: " << row.mistake << "\nstderr:\n" << f.err);
    CHECK(f.exit_code == row.exit_code);
    CHECK_THAT(f.err, Contains(row.message));
  }
}

}  // namespace test_error_table

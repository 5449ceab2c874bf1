// The protocol's bytes, pinned: every input of the message fuzzer's corpus (1,500 frames from
// every message type, found by coverage) is decoded in both directions, and what decodes is
// encoded again. tests/data/wire/golden.txt holds, per corpus file, what became of it: which
// message it decoded as and a digest of its encoding, or the refusal's code. A change to how a
// message is written or read (issue 62's messages declared once) that changes a byte, or accepts
// or refuses another frame, fails here and names the frame.
//
// After a deliberate change of the wire (with a protocol version to go with it), write the file
// anew: NPU_RUN_WRITE_GOLDEN=1 build/tests/unit_tests "wire golden*".
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "rendezvous/protocol/protocol.hpp"
#include "support/build_paths.hpp"

namespace test_wire_golden {

using namespace npu_run::rdzv;
namespace fs = std::filesystem;

namespace {

// FNV-1a: the same digest on every machine and compiler (std::hash promises neither).
std::string digest(const std::string& text) {
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return fmt::format("{:016x}", h);
}

template <typename Message, typename Decode>
std::string fate(const std::string& text, Decode decode, const char* (*name)(const Message&)) {
  const auto decoded = decode(text);
  if (const auto* e = std::get_if<ProtocolError>(&decoded)) return "refused:" + e->code;
  const Message& m = std::get<Message>(decoded);
  return std::string(name(m)) + ":" + digest(encode(m));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path corpus() {
  return fs::path(npu_run::testing::build_paths::kSourceDir) / "fuzz" / "corpus" / "fuzz_messages";
}

// corpus file -> "client=<fate> server=<fate>", for every file of the corpus.
std::map<std::string, std::string> fates_now() {
  std::map<std::string, std::string> fates;
  for (const auto& entry : fs::directory_iterator(corpus())) {
    const std::string text = read_file(entry.path());
    fates[entry.path().filename().string()] =
        "client=" + fate<ClientMessage>(text, decode_client_message, message_name) +
        " server=" + fate<ServerMessage>(text, decode_server_message, message_name);
  }
  return fates;
}

fs::path golden_path() {
  return fs::path(npu_run::testing::build_paths::kTestData) / "wire" / "golden.txt";
}

}  // namespace

TEST_CASE("wire golden: every corpus frame decodes and encodes as it did", "[protocol]") {
  const auto now = fates_now();
  REQUIRE(now.size() > 1000);
  if (std::getenv("NPU_RUN_WRITE_GOLDEN") != nullptr) {
    fs::create_directories(golden_path().parent_path());
    std::ofstream out(golden_path());
    for (const auto& [file, what] : now) out << file << ' ' << what << '\n';
    WARN("wrote " << golden_path());
    return;
  }
  std::map<std::string, std::string> pinned;
  std::ifstream in(golden_path());
  REQUIRE(in.good());
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    if (space != std::string::npos) pinned[line.substr(0, space)] = line.substr(space + 1);
  }
  int changed = 0;
  for (const auto& [file, what] : now) {
    const auto it = pinned.find(file);
    if (it == pinned.end()) continue;  // a frame added to the corpus since: pinned when written
    if (it->second != what && ++changed <= 5) {
      UNSCOPED_INFO("fuzz/corpus/fuzz_messages/"
                    << file << ": was '" << it->second << "', now '" << what
                    << "'\n  frame: " << read_file(corpus() / file).substr(0, 300));
    }
  }
  CHECK(changed == 0);
  CHECK(pinned.size() >= now.size() * 9 / 10);  // the golden file covers the corpus
}

}  // namespace test_wire_golden

#include "remote/self_binary.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "basics/text.hpp"

namespace npu_run {

namespace {

std::string sha256_hex(const std::string& data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not compute a SHA-256");
  return to_hex(digest.data(), size);
}

}  // namespace

std::string self_path() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find npu_run's own executable: " + ec.message());
  return path.string();
}

SelfBinary read_self_binary() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) {
    throw std::runtime_error(fmt::format("--ship-binary: cannot read npu_run's own executable: {}",
                                         std::strerror(errno)));
  }
  auto bytes = std::make_shared<std::string>(std::istreambuf_iterator<char>(in),
                                             std::istreambuf_iterator<char>());
  SelfBinary self;
  self.shipped = ShippedBinary{sha256_hex(*bytes), bytes->size()};
  self.bytes = std::move(bytes);
  return self;
}

}  // namespace npu_run

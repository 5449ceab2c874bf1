// End to end: real PyTorch DDP over gloo, initialised through env:// from npu_run's contract.
#include <catch2/catch.hpp>

#include "support/harness.hpp"

namespace test_pytorch_ddp {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

TEST_CASE("pytorch: 4 DDP workers train and agree on the weights", "[integration][e2e][pytorch]") {
  const Finished f = run_npu_run(
      {"--nproc-per-node", "4", source_dir() + "/examples/train_ddp.py", "--steps", "20"}, {},
      180s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("ranks agree: True"));
  CHECK(count_occurrences(f.out, "weights checksum") == 4);
}

TEST_CASE("pytorch: a failing rank is the root cause, with its exception from the error file",
          "[integration][e2e][pytorch]") {
  const Finished f = run_npu_run(
      {"--nproc-per-node", "2", "--term-timeout", "10", source_dir() + "/examples/train_ddp.py",
       "--steps", "50", "--fail-rank", "1", "--fail-step", "3"},
      {}, 180s);
  INFO(f.err);
  CHECK(f.exit_code == 1);
  const auto table = f.err.find("root cause first");
  REQUIRE(table != std::string::npos);
  CHECK_THAT(f.err.substr(table),
             Contains("error: RuntimeError: rank 1 fails at step 3 as asked by --fail-rank"));
  // And where it was raised, from the traceback @record wrote, as torchrun shows it.
  CHECK_THAT(f.err.substr(table), Contains("traceback (from ") && Contains("/error.json):") &&
                                      Contains("train_ddp.py\", line ") &&
                                      Contains("raise RuntimeError("));
}

}  // namespace test_pytorch_ddp

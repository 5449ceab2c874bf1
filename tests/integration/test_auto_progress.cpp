// Automatic progress beats (--auto-progress, issue 46) with real torch: scripts that never beat
// are found hung after their last optimizer step, a user's own sitecustomize still runs (and may
// import torch before the hooks look), a script's own beats replace the automatic ones, and
// --auto-progress off sends none. Tagged
// [pytorch]: the suite runs them again with torch 2.6, whose optimizers have the global step hook
// (1.13's do not: there each optimizer class's step is wrapped).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_auto_progress {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Trains a tiny model for `steps` optimizer steps (two optimizers, as a GAN has: each counts its
// own steps), never beating unless `own_beat` is the text of a beat of its own before each step
// (the automatic beats come last); then rank 0 exits 0 and rank 1 sleeps as if stuck in its data
// loader.
std::string training_script(TempDir& dir, int steps, const std::string& own_beat = "") {
  std::string beat;
  if (!own_beat.empty()) {
    beat = "    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(" + own_beat +
           ".encode(), os.environ['NPU_RUN_PROGRESS'])\n";
  }
  return dir.write("train.py",
                   "import os, socket, sys, time\n"
                   "import torch\n"
                   "model = torch.nn.Linear(4, 1)\n"
                   "sgd = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                   "adam = torch.optim.Adam(model.parameters())\n"
                   "for step in range(" +
                       std::to_string(steps) + "):\n" + beat +
                       "    for optimizer in (sgd, adam):\n"
                       "        optimizer.zero_grad()\n"
                       "        model(torch.ones(2, 4)).sum().backward()\n"
                       "        optimizer.step()\n"
                       "if os.environ['LOCAL_RANK'] == '1':\n"
                       "    time.sleep(3600)\n"
                       "sys.stdout.flush()\n"
                       "os._exit(0)\n");
}

}  // namespace

TEST_CASE("auto progress: a script that never beats is found hung after its last optimizer step",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  // A sitecustomize of the user's own, which npu_run's must not hide; it imports torch's
  // optimizers and torch.distributed before npu_run's hooks look (as a patch of
  // torch.distributed there does), and the beats must come all the same.
  const std::string user_site = dir.path() + "/site";
  dir.write("site/sitecustomize.py",
            "import os\nopen(os.path.join('" + dir.path() +
                "', 'user_site.' + os.environ['LOCAL_RANK']), 'w').close()\n"
                "import torch.distributed, torch.optim\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "3", training_script(dir, 4)},
                  {{"PYTHONPATH", user_site}});
  const Finished f = p.wait(120s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1) hung: no progress for 3 s after 'step 4'"));
  CHECK(std::filesystem::exists(dir.file("user_site.0")));
  CHECK(std::filesystem::exists(dir.file("user_site.1")));
  require_no_strays(p);
}

TEST_CASE("auto progress: a script's own beats replace the automatic ones",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "3",
                   training_script(dir, 3, "f'epoch 0 batch {step}'")});
  const Finished f = p.wait(120s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err,
             Contains("local rank 1 (rank 1) hung: no progress for 3 s after 'epoch 0 batch 2'"));
  require_no_strays(p);
}

TEST_CASE("auto progress: off, a script that never beats sends nothing",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  // Never beaten, rank 1 cannot be hung by --hang-timeout; --exit-timeout finds it once rank 0
  // exited 0, and says it never beat.
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "3", "--exit-timeout", "3",
                   "--auto-progress", "off", training_script(dir, 3)});
  const Finished f = p.wait(120s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1) hung: still running 3 s after"));
  CHECK_THAT(f.err, Contains("last beat: none"));
  CHECK_FALSE(f.err.find("after 'step") != std::string::npos);
  require_no_strays(p);
}

}  // namespace test_auto_progress

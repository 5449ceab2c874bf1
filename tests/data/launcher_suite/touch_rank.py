"""A worker for the re-enacted PyTorch launcher tests: shows the torchrun contract it received,
then leaves a file named after its global rank in --touch_file_dir, or fails with --fail."""
import argparse
import os
import pathlib

CONTRACT = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
            "WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
            "OMP_NUM_THREADS", "TEST_SENTINEL_PARENT", "TORCHELASTIC_ERROR_FILE"]

parser = argparse.ArgumentParser()
parser.add_argument("--fail", action="store_true")
parser.add_argument("--touch_file_dir")
args = parser.parse_args()
for name in CONTRACT:
    print(f"{name} = {os.environ[name]}")  # a missing one raises KeyError: the test fails
if args.fail:
    raise RuntimeError("raising exception since --fail flag was set")
pathlib.Path(args.touch_file_dir, os.environ["RANK"]).touch()

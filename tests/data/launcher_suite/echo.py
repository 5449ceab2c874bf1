"""The elastic multiprocessing tests' echo worker: MSG on stdout and stderr, or --exitcode N,
or --segfault."""
import argparse
import ctypes
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--exitcode", type=int, default=0)
parser.add_argument("--segfault", action="store_true")
parser.add_argument("msg")
args = parser.parse_args()
rank = int(os.environ["RANK"])
if args.segfault:
    ctypes.string_at(0)
if args.exitcode:
    print(f"exit {args.exitcode} from {rank}", file=sys.stderr)
    sys.exit(args.exitcode)
print(f"{args.msg} stdout from {rank}")
print(f"{args.msg} stderr from {rank}", file=sys.stderr)

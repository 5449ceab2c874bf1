#!/usr/bin/env python3
"""clang-tidy over the project's sources, re-run only for a file whose input changed.

A file's result depends on what the compiler sees (its preprocessed text, comments kept, since
NOLINT lives in comments), the flags it is compiled with, the .clang-tidy files that apply and
clang-tidy's version. Their hash keys a cache of clean results: a file whose key was clean
before is clean now, and is not checked again. Findings are never cached, so a file with one is
checked (and reported) every time until it is fixed.

Paths of the checkout are replaced by a placeholder before hashing, so that a clone in another
folder (CI's) finds what this one left.

Usage: scripts/tidy.py BUILD_DIR [FILE...]   (default: every file of BUILD_DIR's compile
       database that git tracks). Cache: $NPU_RUN_CACHE_DIR/tidy, else /var/cache/npu_run/tidy.
Exit status: 0 clean, 1 findings (printed), 2 usage.
"""

import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACEHOLDER = b"@NPU_RUN_ROOT@"


def cache_dir():
    base = os.environ.get("NPU_RUN_CACHE_DIR")
    if not base:
        base = "/var/cache/npu_run"
        try:
            os.makedirs(base, exist_ok=True)
            if not os.access(base, os.W_OK):
                raise PermissionError(base)
        except OSError:
            base = os.path.join(os.path.expanduser("~"), ".cache", "npu_run")
    path = os.path.join(base, "tidy")
    os.makedirs(path, exist_ok=True)
    return path


def tracked_sources():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "*.cpp"], check=True,
                         capture_output=True, text=True).stdout
    return {os.path.join(ROOT, line) for line in out.splitlines() if line}


def config_files(source):
    """The .clang-tidy files clang-tidy reads for `source`: its folder's and every parent's."""
    found = []
    folder = os.path.dirname(source)
    while folder.startswith(ROOT):
        candidate = os.path.join(folder, ".clang-tidy")
        if os.path.isfile(candidate):
            found.append(candidate)
        if folder == ROOT:
            break
        folder = os.path.dirname(folder)
    return found


def preprocess_command(entry):
    """The compile command of `entry`, printing its preprocessed text (comments kept)."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        if arg == "-c":
            continue
        out.append(arg)
    return out + ["-E", "-C"], args


def key_of(entry, tidy_version):
    command, compile_args = preprocess_command(entry)
    run = subprocess.run(command, cwd=entry["directory"], capture_output=True)
    if run.returncode != 0:
        return None  # clang-tidy will say what is wrong
    h = hashlib.sha256()
    h.update(tidy_version)
    root = ROOT.encode()
    h.update(" ".join(compile_args).encode().replace(root, PLACEHOLDER))
    h.update(entry["directory"].encode().replace(root, PLACEHOLDER))
    for config in config_files(entry["file"]):
        with open(config, "rb") as f:
            h.update(f.read())
    h.update(run.stdout.replace(root, PLACEHOLDER))
    return h.hexdigest()


def check(entry, build_dir, tidy_version, cache):
    source = entry["file"]
    key = key_of(entry, tidy_version)
    marker = os.path.join(cache, key) if key else None
    if marker and os.path.exists(marker):
        return source, True, "", True
    run = subprocess.run(["clang-tidy", "--quiet", "-p", build_dir, source],
                         capture_output=True, text=True)
    output = run.stdout + run.stderr
    findings = [line for line in output.splitlines() if " warning: " in line or " error: " in line]
    clean = run.returncode == 0 and not findings
    if clean and marker:
        with open(marker, "w") as f:
            f.write(os.path.relpath(source, ROOT) + "\n")
    return source, clean, output, False


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    build_dir = os.path.abspath(argv[1])
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        database = {os.path.realpath(e["file"]): e for e in json.load(f)}
    wanted = {os.path.realpath(os.path.abspath(p)) for p in argv[2:]} or tracked_sources()
    entries = [database[f] for f in sorted(wanted) if f in database]
    tidy_version = subprocess.run(["clang-tidy", "--version"], check=True,
                                  capture_output=True).stdout
    cache = cache_dir()
    start = time.monotonic()
    findings, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        jobs = [pool.submit(check, e, build_dir, tidy_version, cache) for e in entries]
        for job in concurrent.futures.as_completed(jobs):
            source, clean, output, was_cached = job.result()
            cached += was_cached
            if not clean:
                findings.append((source, output))
    for source, output in sorted(findings):
        print(f"== {os.path.relpath(source, ROOT)}\n{output.rstrip()}", file=sys.stderr)
    print(f"tidy: {len(entries)} files, {cached} unchanged since a clean check, "
          f"{len(entries) - cached} checked, {len(findings)} with findings "
          f"({time.monotonic() - start:.0f} s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

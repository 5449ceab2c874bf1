#!/usr/bin/env python3
"""clang-tidy over the project's sources, a unity batch at a time, re-run only where the input
changed.

Batches: a unity build's batches (cmake/unity_batches.cmake: unity/TARGET/batch_N.cpp, sources
of one target included by their path in the checkout), eight sources at a time, each written out as one file that holds its sources' text, each after a `#line` naming it. To
clang-tidy every source of the batch is then the main file, as it is when checked alone, so
every check and the static analyzer look at it as they would; but the headers (Asio, Beast,
Catch2, ...) are parsed and walked once per batch instead of once per source: a cold check of the
project takes a sixth of the time. The batch's findings are reported at their own file and line.
The sources of a batch compile as one already (the unity build): nothing clashes.

A batch's result depends on what the compiler sees (its preprocessed text, comments kept, since
NOLINT lives in comments), the flags it is compiled with, the .clang-tidy files that apply, and
clang-tidy's version and arguments. Their hash keys a cache of clean results: a batch whose key
was clean before is clean now, and is not checked again. Findings are never cached, so a batch
with one is checked (and reported) every time until it is fixed. Paths of the checkout are
replaced by a placeholder before hashing, so that a clone in another folder (CI's) finds what
this one left.

Usage: scripts/tidy.py BUILD_DIR [FILE...]   BUILD_DIR a unity build configured with clang (its
       compile_commands.json); FILE: only the batches holding these files (default: every batch
       holding a file git tracks). Cache: $NPU_RUN_CACHE_DIR/tidy, else /var/cache/npu_run/tidy.
Exit status: 0 clean, 1 findings (printed), 2 usage.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACEHOLDER = b"@NPU_RUN_ROOT@"
# The static analyzer (clang-analyzer-*) does not follow calls into function templates: std::,
# Boost.Asio and Beast, fmt and Catch2 are templates, and walking their bodies from every path
# of every file was most of the analyzer's time. Calls of our own functions are still followed
# (within a batch, into its other sources too), and every check runs on every file.
EXTRA_ARGS = ["--extra-arg=-Xclang", "--extra-arg=-analyzer-config",
              "--extra-arg=-Xclang", "--extra-arg=c++-template-inlining=false"]
UNITY_MEMBER = re.compile(r'^#include "([^"]+)"$', re.M)
UNITY_MARKER = "// npu_run unity batch"
TIDY_BATCH = 8  # sources clang-tidy checks as one file, whatever the compiled batch's size


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
    return {os.path.realpath(os.path.join(ROOT, line)) for line in out.splitlines() if line}


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


def compile_flags(entry):
    """The entry's compiler arguments without the compiler, its output and its input."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    flags, skip = [], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in ("-o", "-c"):
            skip = True
        else:
            flags.append(arg)
    return args[0], flags


class Batch:
    """One unity batch written out as a single main file (see the module's docstring)."""

    def __init__(self, entry, members, build_dir, part=0):
        self.entry = entry
        self.members = members  # real paths, in the batch's order
        self.compiler, self.flags = compile_flags(entry)
        unity = os.path.relpath(entry["file"], build_dir)
        self.dir = os.path.join(build_dir, "tidy-batches", f"{os.path.splitext(unity)[0]}_{part}")
        self.path = os.path.join(self.dir, "batch.cpp")
        self.starts = []  # (first line of the member in the batch file, member)

    def write(self):
        os.makedirs(self.dir, exist_ok=True)
        text, line = [], 1
        for member in self.members:
            with open(member, encoding="utf-8") as f:
                body = f.read()
            if not body.endswith("\n"):
                body += "\n"
            text.append(f'#line 1 "{member}"\n')
            self.starts.append((line + 1, member))
            text.append(body)
            line += 1 + body.count("\n")
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("".join(text))
        # The configuration of the batch's sources (one target's: the same for all), whole:
        # clang-tidy looks for it beside the batch file.
        config = subprocess.run(["clang-tidy", "--dump-config", self.members[0]],
                                check=True, capture_output=True, text=True).stdout
        with open(os.path.join(self.dir, ".clang-tidy"), "w", encoding="utf-8") as f:
            f.write(config)
        return config

    def original(self, line):
        """The member and its own line number for line `line` of the batch file."""
        owner = self.starts[0]
        for start in self.starts:
            if start[0] <= line:
                owner = start
        return owner[1], line - owner[0] + 1

    def map_output(self, output):
        pattern = re.compile(re.escape(self.path) + r":(\d+):")

        def to_original(m):
            member, line = self.original(int(m.group(1)))
            return f"{member}:{line}:"
        return pattern.sub(to_original, output)


def batches_of(database, build_dir, wanted):
    batches = []
    for entry in database:
        with open(entry["file"], encoding="utf-8") as f:
            text = f.read()
        if text.startswith(UNITY_MARKER):
            members = [os.path.realpath(os.path.join(ROOT, m)) for m in UNITY_MEMBER.findall(text)]
        else:
            members = [os.path.realpath(entry["file"])]  # a source compiled alone
        # A compiled batch may hold more sources than clang-tidy's: a change re-checks its part.
        for part, first in enumerate(range(0, len(members), TIDY_BATCH)):
            chunk = members[first:first + TIDY_BATCH]
            if any(m in wanted for m in chunk):
                batches.append(Batch(entry, chunk, build_dir, part))
    return batches


def key_of(batch, config, tidy_version):
    run = subprocess.run([batch.compiler] + batch.flags + ["-E", "-C", batch.path],
                         cwd=batch.entry["directory"], capture_output=True)
    if run.returncode != 0:
        return None  # clang-tidy will say what is wrong
    root = ROOT.encode()
    h = hashlib.sha256()
    h.update(tidy_version)
    h.update(" ".join(EXTRA_ARGS).encode())
    h.update(" ".join(batch.flags).encode().replace(root, PLACEHOLDER))
    h.update(config.encode().replace(root, PLACEHOLDER))
    for member in batch.members:
        for path in config_files(member):
            with open(path, "rb") as f:
                h.update(f.read())
    h.update(run.stdout.replace(root, PLACEHOLDER))
    return h.hexdigest()


def check(batch, tidy_version, cache):
    config = batch.write()
    key = key_of(batch, config, tidy_version)
    marker = os.path.join(cache, key) if key else None
    if marker and os.path.exists(marker):
        return batch, True, "", True
    run = subprocess.run(["clang-tidy", "--quiet"] + EXTRA_ARGS + [batch.path, "--"] + batch.flags,
                         cwd=batch.entry["directory"], capture_output=True, text=True)
    output = batch.map_output(run.stdout + run.stderr)
    findings = [line for line in output.splitlines() if " warning: " in line or " error: " in line]
    clean = run.returncode == 0 and not findings
    if clean and marker:
        with open(marker, "w") as f:
            f.write("\n".join(os.path.relpath(m, ROOT) for m in batch.members) + "\n")
    return batch, clean, output, False


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    build_dir = os.path.abspath(argv[1])
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        database = json.load(f)
    wanted = {os.path.realpath(os.path.abspath(p)) for p in argv[2:]} or tracked_sources()
    batches = batches_of(database, build_dir, wanted)
    tidy_version = subprocess.run(["clang-tidy", "--version"], check=True,
                                  capture_output=True).stdout
    cache = cache_dir()
    start = time.monotonic()
    findings, cached, files = [], 0, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        jobs = [pool.submit(check, b, tidy_version, cache) for b in batches]
        for job in concurrent.futures.as_completed(jobs):
            batch, clean, output, was_cached = job.result()
            cached += was_cached
            files += len(batch.members)
            if not clean:
                findings.append((batch.members[0], output))
    for first, output in sorted(findings):
        print(f"== the batch of {os.path.relpath(first, ROOT)}\n{output.rstrip()}", file=sys.stderr)
    print(f"tidy: {files} files in {len(batches)} batches, {cached} batches unchanged since a "
          f"clean check, {len(batches) - cached} checked, {len(findings)} with findings "
          f"({time.monotonic() - start:.0f} s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

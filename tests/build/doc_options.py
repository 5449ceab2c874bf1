#!/usr/bin/env python3
"""Every npu_run option the user's docs name exists: in README.md and docs/guide/*.md, each
option of an `npu_run ...` command line (in a code span or a fenced block, up to the script) must
be one of that command's options, and each option spelled alone in a code span (`--tee`) must be
one of some npu_run command's, msrun's (npu_run msrun takes them), or one of the other programs'
the guide talks about, listed below with the program.

The options come from the binary itself: its bash completion (every command's table) and
`npu_run msrun --help` (msrun's own).

Usage: doc_options.py SOURCE_DIR NPU_RUN. Prints each unknown option with where it is named;
exit 1 if any.
"""

import glob
import os
import re
import subprocess
import sys

# Options of other programs the guide shows beside npu_run's (never passed to npu_run).
FOREIGN = {
    "sbatch/srun": {"--ntasks-per-node", "--nodes", "--signal", "--exclude"},
    "mpirun": {"--map-by"},
    "etcd": {"--client-cert-auth"},
    "etcdctl": {"--cacert", "--cert", "--key"},
    "sha256sum": {"--ignore-missing"},
    "scripts/bench/run_all.sh": {"--smoke"},
    "hccn_tool/npu-smi": set(),
}
FOREIGN_OPTIONS = set().union(*FOREIGN.values())
# Abbreviations the guide shows on purpose (npu_run takes them as argparse does): each must
# still be the start of exactly one option.
ABBREVIATIONS = {"--max_restart"}

SPAN = re.compile(r"`([^`]+)`")
OPTION = re.compile(r"^(--?[A-Za-z][-_A-Za-z0-9]*)")


def option_tables(npu_run):
    """{command: set of option names}; "" is the launch command, "msrun" has msrun's too."""
    script = subprocess.run([npu_run, "completion", "bash"], check=True, capture_output=True,
                            text=True).stdout
    body = script[script.index("_npu_run_options()"):]
    tables = {}
    for command, names in re.findall(r"^\s+'([^']*)'\) echo '([^']*)' ;;$", body, re.M):
        tables[command] = set(names.split())
    msrun_help = subprocess.run([npu_run, "msrun", "--help"], check=True, capture_output=True,
                                text=True).stdout
    tables["msrun"] = tables.get("", set()) | set(re.findall(r"(--[a-z_]+)", msrun_help))
    return tables


def command_lines(path):
    """(line number, text) of each code span and fenced line of a Markdown file."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                yield number, line.split("#")[0] if " # " in line or line.startswith("#") else line
            else:
                for span in SPAN.findall(line):
                    yield number, span


def npu_run_options(text, tables):
    """(command, option) for each option of each `npu_run ...` command in `text`."""
    for match in re.finditer(r"(?:^|[\s|;(])npu_run\s+(.*)", text):
        words = match.group(1).split()
        command = words[0] if words and words[0] in tables and words[0] != "" else ""
        if command:
            words = words[1:]
        for word in words:
            if word.endswith((".py", ".sbatch")) or word in ("-m", "--no-python") or \
                    word.startswith(("/bin/", "/usr/bin/")):
                if word == "--no-python":
                    yield command, word
                break
            m = OPTION.match(word)
            if m and m.group(1).startswith("--"):
                yield command, m.group(1)


def main(root, npu_run):
    tables = option_tables(npu_run)
    every = set().union(*tables.values())
    documents = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "guide", "*.md")))
    unknown, checked = [], 0
    for path in documents:
        rel = os.path.relpath(path, root)
        for number, text in command_lines(path):
            for command, option in npu_run_options(text, tables):
                checked += 1
                if option not in tables.get(command, set()):
                    unknown.append(f"{rel}:{number}: `{option}` is no option of "
                                   f"'npu_run {command}'".replace("'npu_run '", "'npu_run'"))
            alone = OPTION.match(text.strip())
            # A pattern (`--duplicate-*-filters`) names several options.
            if alone and alone.group(1).startswith("--") and "npu_run" not in text and \
                    "*" not in text:
                checked += 1
                option = alone.group(1)
                if option in ABBREVIATIONS:
                    if len([o for o in every if o.startswith(option)]) != 1:
                        unknown.append(f"{rel}:{number}: `{option}` abbreviates no one option")
                elif option not in every and option not in FOREIGN_OPTIONS:
                    unknown.append(f"{rel}:{number}: `{option}` is no option of npu_run's")
    for line in unknown:
        print(line)
    print(f"doc options: {len(documents)} documents, {checked} options checked, "
          f"{len(unknown)} unknown")
    return 1 if unknown else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))

#!/usr/bin/env python3
"""Every file the docs name exists: each backticked path in README.md and docs/*.md, and in the
comments of the project's headers and sources, names a file or folder of the checkout.

A path is a backticked word with a '/' that ends in a source or script extension or starts with
one of the checkout's top-level folders or a layer's folder. It is looked up from the checkout's
root and from launcher/ (where the layers live: `workers/guardian.cpp`). A bare file name
(`messages.hpp`) is checked against the checkout's file names where code is described
(docs/ARCHITECTURE.md, comments); in the user's docs a bare name is often the user's own file
(`train.py`). What is not a file of the checkout is left alone: paths outside it (../shared),
absolute paths (/proc, /etc/hccn.conf), ~, $VARIABLES, placeholders (<run dir>, attempt_<n>, *),
and build outputs (build/, build-*/, dist/).

docs/ARCHITECTURE.md also stays what a newcomer reads in ten minutes: at most 300 lines, none
wider than 100 characters.

Usage: doc_paths.py SOURCE_DIR. Prints each missing path with where it is named; exit 1 if any.
"""

import os
import re
import subprocess
import sys

EXTENSIONS = ("cpp", "hpp", "h", "sh", "py", "md", "cmake", "txt", "h2m", "sbatch", "in")
BACKTICKED = re.compile(r"`([^`\s]+)`")
# In a fenced block every word with a folder and a source extension counts as backticked.
FENCED_PATH = re.compile(r"(?<![\w./-])([\w.-]+/[\w./-]+\.(?:%s))(?![\w/])" % "|".join(EXTENSIONS))


def is_path(word, top_level):
    if word.startswith(("/", "~", "$", "-", "http", "../")):
        return False
    if any(c in "<>*{}()=,;:" for c in word):
        return False
    if word.split("/")[0] in ("build", "dist") or word.startswith("build-"):
        return False
    if re.search(r"\.(%s)$" % "|".join(EXTENSIONS), word):
        return True
    return "/" in word and word.split("/")[0] in top_level


def main(root):
    listed = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True,
                            text=True).stdout.split()
    top_level = {p.split("/")[0] for p in listed} | {
        p.split("/")[1] for p in listed if p.startswith("launcher/") and p.count("/") >= 2}
    documents = [p for p in listed if p.endswith(".md")]
    sources = [p for p in listed if p.endswith((".cpp", ".hpp", ".cmake")) or
               os.path.basename(p) == "CMakeLists.txt"]
    names = {os.path.basename(p) for p in listed}
    describes_code = set(sources) | {"docs/ARCHITECTURE.md"}
    missing = []
    for rel in documents + sources:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            continue
        fenced = False
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if rel in sources and "//" not in line and not line.lstrip().startswith("#"):
                    continue  # in code only comments name files
                if line.startswith("```"):
                    fenced = not fenced
                    continue
                words = FENCED_PATH.findall(line) if fenced else BACKTICKED.findall(line)
                for word in words:
                    word = word.rstrip(".")
                    if not is_path(word, top_level):
                        continue
                    if "/" not in word:
                        if rel in describes_code and word not in names:
                            missing.append(f"{rel}:{number}: `{word}` is no file of the checkout")
                        continue
                    candidates = [os.path.join(root, word), os.path.join(root, "launcher", word)]
                    if not any(os.path.exists(c) for c in candidates):
                        missing.append(f"{rel}:{number}: `{word}` is no file of the checkout")
    with open(os.path.join(root, "docs/ARCHITECTURE.md"), encoding="utf-8") as f:
        page = f.read().splitlines()
    if len(page) > 300:
        missing.append(f"docs/ARCHITECTURE.md: {len(page)} lines; keep it under 300 (details go "
                       "to the headers it names)")
    for number, line in enumerate(page, 1):
        if len(line) > 100:
            missing.append(f"docs/ARCHITECTURE.md:{number}: {len(line)} characters; wrap at 100")
    for m in missing:
        print(m)
    print(f"doc paths: {len(documents)} documents and {len(sources)} sources read, "
          f"{len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))

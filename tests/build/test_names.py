#!/usr/bin/env python3
"""Every Catch test name is one CTest test: catch_discover_tests splits its list of names on ';'
(a CMake list), so a name holding ';' becomes two tests that both fail, in CI only. This check
names such a test at once.

usage: test_names.py SOURCE_DIR"""
import glob
import os
import re
import sys


def main(root):
    bad = []
    pattern = re.compile(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)
    files = glob.glob(os.path.join(root, "tests", "**", "*.cpp"), recursive=True)
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for match in pattern.finditer(text):
            name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', match.group(1)))
            if ";" in name:
                line = text.count("\n", 0, match.start()) + 1
                bad.append(f"{os.path.relpath(path, root)}:{line}: '{name}'")
    for entry in bad:
        print(f"a test name holds ';' (CTest would split it): {entry}")
    print(f"test names: {len(files)} files read, {len(bad)} with ';'")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

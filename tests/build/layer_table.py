#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's table of layers says what the build declares: one row per layer that
a CMakeLists.txt declares with npu_run_layer(), and in each row the layers it uses, as the
declaration's USES lists them. "all of the above" means every layer of the rows above it; "-"
means none; a row "folder/*" stands for every layer in that folder (what they use besides one
another), whose own declarations say the rest. The build enforces the layering (cmake/layers.cmake); this keeps the page that a
newcomer reads first from drifting away from it.

Usage: layer_table.py SOURCE_DIR. Prints each difference; exit 1 if any.
"""

import os
import re
import sys

DECLARATION = re.compile(r"npu_run_layer\(\s*([\w/]+)(.*?)\)", re.S)
ROW = re.compile(r"^\| ([\w/]+(?:/\*)?) \| ([^|]+) \| [^|]+ \|$")


def declared(root):
    """{layer: set of the layers it uses}, from every CMakeLists.txt of the product."""
    layers = {}
    for top in ("launcher", "rendezvous"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            with open(os.path.join(folder, "CMakeLists.txt"), encoding="utf-8") as f:
                text = re.sub(r"#.*", "", f.read())
            for name, body in DECLARATION.findall(text):
                uses = re.search(r"\bUSES\b(.*?)(?:\bLIBS\b|\bSOURCES\b|$)", body, re.S)
                layers[name] = set(uses.group(1).split()) if uses else set()
    return layers


def documented(root, build):
    """[(layer, set of the layers it uses)], in the table's order. A row "folder/*" stands for
    every layer in that folder: what they use besides one another."""
    rows = []
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        for line in f:
            m = ROW.match(line.rstrip("\n"))
            if not m or m.group(1) == "layer":
                continue
            name, uses = m.group(1), m.group(2).strip()
            if uses == "all of the above":
                used = {above for above, _ in rows}
                used |= {layer for above, _ in rows if above.endswith("/*")
                         for layer in members(above, build)}
                used = {u for u in used if not u.endswith("/*")}
            elif uses == "-":
                used = set()
            else:
                used = {u.strip() for u in uses.split(",")}
            rows.append((name, used))
    return rows


def members(row, build):
    """The declared layers a "folder/*" row stands for."""
    prefix = row[:-1]
    return sorted(name for name in build if name.startswith(prefix))


def declared_uses(name, build):
    if not name.endswith("/*"):
        return build.get(name)
    inside = members(name, build)
    if not inside:
        return None
    return set().union(*(build[n] for n in inside)) - set(inside)


def main():
    root = sys.argv[1]
    build = declared(root)
    table = documented(root, build)
    problems = []
    shown = set()
    for name, used in table:
        uses = declared_uses(name, build)
        if uses is None:
            problems.append(f"docs/ARCHITECTURE.md lists a layer '{name}' that no CMakeLists.txt "
                            "declares")
            continue
        shown |= set(members(name, build)) if name.endswith("/*") else {name}
        for missing in sorted(uses - used):
            problems.append(f"layer '{name}' uses '{missing}' (its CMakeLists.txt), which its "
                            "row in docs/ARCHITECTURE.md does not say")
        for extra in sorted(used - uses):
            problems.append(f"docs/ARCHITECTURE.md says layer '{name}' uses '{extra}', which its "
                            "CMakeLists.txt does not declare")
    for name in sorted(set(build) - shown):
        problems.append(f"layer '{name}' (a CMakeLists.txt declares it) has no row in "
                        "docs/ARCHITECTURE.md's table")
    for p in problems:
        print(p)
    print(f"layer table: {len(table)} rows, {len(build)} layers declared, {len(problems)} "
          "differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every test runs where docs/guide/development.md's table ("What runs where") says, and only
there: the check each tree runs on its own registrations (`ctest --show-only=json-v1`).

- Every Catch case of the integration suite matches exactly one row of the table (the rows'
  first cells are Catch test specs, matched by the suite itself), so a case with new tags cannot
  fall between the rows.
- For each column this tree's role owns (plain: "plain tree" and "plain tree, torch2"; asan:
  "ASan tree"; tsan: "plain tree"), the case is registered as "<torch X: ><linux 3.10:
  >integration:CASE" exactly where its row's cell is not "-", with that torch's PYTHON_EXEC,
  the 3.10 wrapper as NPU_RUN_UNDER_TEST or none, RUN_SERIAL where the cell says alone, and the
  label torch2 for the plain tree's torch 2 runs; and nowhere else.
- Every end-to-end script of tests/e2e/ and the store's peer suite has a row in the table of
  end-to-end scripts, and runs (by "SCRIPT ARGS") exactly where that row says, likewise.

usage: test_axes.py SOURCE_DIR BUILD_DIR ROLE INTEGRATION_TESTS
Prints "test axes: ... N problems"; exit status 1 if any.
"""
import json
import os
import re
import subprocess
import sys

COLUMNS = {"plain": ["plain tree", "plain tree, torch2"], "asan": ["ASan tree"],
           "tsan": ["plain tree"]}
PYTHONS = {"1.13": "/usr/bin/python3", "2.6": "tests/torch2/python",
           "2.14": "tests/torch2/python2.14"}
SCRIPT_LIBRARIES = {"lib.sh", "ssh_lib.sh"}


def read_table(root, heading):
    """[(first cell, {column: cell})] of development.md's table whose header starts HEADING."""
    path = os.path.join(root, "docs", "guide", "development.md")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading}"))
    names = [c.strip().replace("`", "") for c in lines[header].strip("|").split("|")][1:]
    rows = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0].strip("`"), dict(zip(names, cells[1:]))))
    return rows


def parse_cell(cell):
    """None for "-", else (torch, kernel, alone) from "2.14 · Linux 3.10, alone"."""
    if cell == "-":
        return None
    m = re.fullmatch(r"(1\.13|2\.6|2\.14) · (this kernel|Linux 3\.10)(, alone)?", cell)
    if not m:
        raise ValueError(f"development.md: cell '{cell}' is neither '-' nor 'TORCH · KERNEL[, alone]'")
    return m.group(1), m.group(2), bool(m.group(3))


def cases_of(binary, spec=None):
    args = [binary] + ([spec] if spec else []) + ["--list-test-names-only"]
    out = subprocess.run(args, capture_output=True, text=True, check=False).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def registered(build_dir):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True,
                         text=True, check=True).stdout
    tests = {}
    for test in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        tests[test["name"]] = (test.get("command", []), props)
    return tests


def expected_name(case, torch, kernel):
    prefix = "" if torch == "1.13" else f"torch {torch}: "
    if kernel == "Linux 3.10":
        prefix += "linux 3.10: "
    return f"{prefix}integration:{case}"


def check_registration(name, want, column, props):
    torch, kernel, alone = want
    env = dict(e.split("=", 1) for e in props.get("ENVIRONMENT", []))
    problems = []
    if not env.get("PYTHON_EXEC", "").endswith(PYTHONS[torch]):
        problems.append(f"'{name}' runs with PYTHON_EXEC={env.get('PYTHON_EXEC')}, not torch {torch}'s")
    if ("NPU_RUN_UNDER_TEST" in env) != (kernel == "Linux 3.10"):
        problems.append(f"'{name}' {'is not' if kernel == 'Linux 3.10' else 'is'} run as Linux 3.10")
    if bool(props.get("RUN_SERIAL")) != alone:
        problems.append(f"'{name}' {'does not run' if alone else 'runs'} alone, against its row")
    if ("torch2" in props.get("LABELS", [])) != column.endswith("torch2"):
        problems.append(f"'{name}' is in the wrong stage: label torch2 belongs to the column "
                        "'plain tree, torch2' only")
    return problems


def check_cases(rows, columns, binary, tests):
    problems, checked = [], 0
    matches = {spec: cases_of(binary, spec) for spec, _ in rows}
    every = cases_of(binary)
    expected = set()
    for case in sorted(every):
        owners = [(spec, cells) for spec, cells in rows if case in matches[spec]]
        if len(owners) != 1:
            problems.append(f"'{case}' matches {len(owners)} rows of development.md's table "
                            f"({', '.join(s for s, _ in owners) or 'none'}); give it a row")
            continue
        for column in columns:
            want = parse_cell(owners[0][1][column])
            if want is None:
                continue
            name = expected_name(case, want[0], want[1])
            expected.add(name)
            checked += 1
            if name not in tests:
                problems.append(f"'{case}' is not registered as '{name}' ({column})")
                continue
            problems += check_registration(name, want, column, tests[name][1])
    suffixes = {f"integration:{case}" for case in every}
    for name in tests:
        stripped = re.sub(r"^(torch [0-9.]+: )?(linux 3\.10: )?", "", name)
        if stripped in suffixes and name not in expected:
            problems.append(f"'{name}' is registered, but its row gives no such run")
    return problems, checked, len(every)


def script_runs(root, tests):
    """{(script and its arguments, column-independent): [(name, torch, kernel, props)]}: every
    registered run of a script of tests/e2e or tests/store, by "SCRIPT ARGS" as the table says."""
    runs = {}
    for name, (command, props) in tests.items():
        if len(command) < 4 or os.path.basename(command[0]) != "bash" or not command[1].endswith(".sh"):
            continue
        rel = os.path.relpath(command[1], root)
        if os.path.dirname(rel) not in (os.path.join("tests", "e2e"), os.path.join("tests", "store")):
            continue
        key = " ".join([os.path.basename(rel)] + command[4:])
        kernel = "Linux 3.10" if command[2].endswith("npu_run-as-linux-3.10") else "this kernel"
        runs.setdefault(key, []).append((name, kernel, props))
    return runs


def check_scripts(root, columns, tests):
    rows = read_table(root, "end-to-end scripts")
    runs = script_runs(root, tests)
    problems, checked = [], 0
    listed = {key.split()[0] for key, _ in rows}
    for folder in ("e2e", "store"):
        for script in sorted(os.listdir(os.path.join(root, "tests", folder))):
            if script.endswith(".sh") and script not in SCRIPT_LIBRARIES and script not in listed:
                problems.append(f"tests/{folder}/{script} has no row in development.md's table of "
                                "end-to-end scripts")
    for key, cells in rows:
        found = runs.pop(key, [])
        for column in columns:
            want = parse_cell(cells[column])
            mine = [r for r in found if ("torch2" in r[2].get("LABELS", [])) == column.endswith("torch2")]
            if want is None:
                problems += [f"'{r[0]}' runs {key}, but its row gives {column} no run" for r in mine]
                continue
            checked += 1
            match = [r for r in mine if r[1] == want[1]]
            if len(match) != 1:
                problems.append(f"{key} should run once as {want[0]} · {want[1]} in the {column}; "
                                f"found {len(match)} such runs")
                continue
            problems += check_registration(match[0][0], want, column, match[0][2])
    problems += [f"'{r[0]}' runs {key}, which has no row in the table" for key, rs in runs.items()
                 for r in rs]
    return problems, checked


def main(argv):
    if len(argv) != 5 or argv[3] not in COLUMNS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root, build_dir, role, binary = argv[1:]
    rows = read_table(root, "integration cases")
    tests = registered(build_dir)
    problems, checked, cases = check_cases(rows, COLUMNS[role], binary, tests)
    more, scripts_checked = check_scripts(root, COLUMNS[role], tests)
    problems += more
    for problem in problems:
        print(f"test axes: {problem}")
    print(f"test axes: {role} tree, {cases} cases in {len(rows)} rows, {checked} case runs and "
          f"{scripts_checked} script runs checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

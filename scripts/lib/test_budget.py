#!/usr/bin/env python3
"""CI's time budget (tests/time_budget): what each test run and stage cost, against its share.

  test_budget.py tests RUN JUNIT WALL_SECONDS
      After a ctest run (`ctest --output-junit JUNIT`): its tests, test-seconds, wall time and
      ten slowest, and the tests past their allowance (the tests that grew).
  test_budget.py stage NAME WALL_SECONDS
      After a stage or a part of one: its wall time against its share.
  test_budget.py summary
      At the end of CI: every run and stage over its budget, in capitals, with the tests that
      grew. Never fails: timings are noisy; a change that adds test-seconds names them instead.

What is over budget is also appended to $NPU_RUN_BUDGET_NOTES when it is set (.ci/run sets it),
which `summary` reads back. $NPU_RUN_TIME_BUDGET names another budget file (its own test does).
Exit status: 0, or 2 for a budget file or usage it cannot read.
"""

import os
import sys
import xml.etree.ElementTree as ElementTree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET_FILE = os.environ.get("NPU_RUN_TIME_BUDGET", os.path.join(ROOT, "tests", "time_budget"))


class Budget:
    """tests/time_budget: `stage NAME S`, `tests RUN S`, `allow RUN S TEST NAME`, `each S`."""

    def __init__(self, path=BUDGET_FILE):
        self.stages, self.runs, self.allowed, self.each = {}, {}, {}, None
        with open(path, encoding="utf-8") as f:
            for number, raw in enumerate(f, 1):
                line = raw.split("#", 1)[0].strip()
                if line:
                    self._read(line, f"{path}:{number}")
        if self.each is None:
            raise ValueError(f"{path}: no 'each SECONDS' line (every test's allowance)")

    def _read(self, line, where):
        words = line.split()
        try:
            if words[0] in ("stage", "tests") and len(words) == 3:
                (self.stages if words[0] == "stage" else self.runs)[words[1]] = float(words[2])
            elif words[0] == "allow" and len(words) >= 4:
                self.allowed[(words[1], " ".join(words[3:]))] = float(words[2])
            elif words[0] == "each" and len(words) == 2:
                self.each = float(words[1])
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"{where}: '{line}' is none of 'stage NAME SECONDS', 'tests RUN "
                             "SECONDS', 'allow RUN SECONDS TEST NAME', 'each SECONDS'") from None

    def allowance(self, run, test):
        return self.allowed.get((run, test), self.each)


def note(text):
    path = os.environ.get("NPU_RUN_BUDGET_NOTES")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def read_junit(path):
    """(name, seconds, status) of every test case ctest wrote."""
    cases = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        cases.append((case.get("name"), float(case.get("time") or 0), case.get("status")))
    return cases


def report_tests(budget, run, junit, wall):
    cases = read_junit(junit)
    ran = [c for c in cases if c[2] != "notrun"]
    total = sum(c[1] for c in ran)
    limit = budget.runs.get(run)
    share = f"budget {limit:.0f} s" if limit is not None else "no budget line"
    print(f"budget: {run}: {len(ran)} tests, {total:.0f} test-seconds in {wall:.0f} s of wall "
          f"time ({share})")
    print(f"budget: {run}: the ten slowest:")
    for name, seconds, _ in sorted(ran, key=lambda c: -c[1])[:10]:
        print(f"budget:   {seconds:7.1f} s  {name}")
    grew = [(n, s, budget.allowance(run, n)) for n, s, _ in ran if s > budget.allowance(run, n)]
    for name, seconds, allowed in sorted(grew, key=lambda g: -g[1]):
        print(f"budget: {run}: '{name}' took {seconds:.1f} s, past its {allowed:.0f} s")
        note(f"grew {run} {seconds:.1f} {allowed:.0f} {name}")
    if limit is None:
        note(f"unbudgeted tests {run} {wall:.0f}")
    elif wall > limit:
        note(f"over tests {run} {wall:.0f} {limit:.0f} {total:.0f}")


def report_stage(budget, name, wall):
    limit = budget.stages.get(name)
    if limit is None:
        print(f"budget: {name}: {wall:.0f} s (no budget line in tests/time_budget)")
        note(f"unbudgeted stage {name} {wall:.0f}")
        return
    print(f"budget: {name}: {wall:.0f} s of its {limit:.0f} s")
    if wall > limit:
        note(f"over stage {name} {wall:.0f} {limit:.0f}")


def split_note(line):
    """A note's words; the last field (a test's name) may hold spaces."""
    kind = line.split(" ", 1)[0]
    return line.split(" ", {"grew": 4, "over": 5, "unbudgeted": 3}.get(kind, 0) or -1)


def summary():
    path = os.environ.get("NPU_RUN_BUDGET_NOTES")
    lines = []
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            lines = [split_note(line.rstrip("\n")) for line in f if line.strip()]
    over = [w for w in lines if w[0] == "over"]
    grew = {}
    for w in lines:
        if w[0] == "grew":  # a run reported twice (a stage run again by hand) names a test once
            grew.setdefault(w[1], {})[w[4]] = f"'{w[4]}' {w[2]} s (allowed {w[3]} s)"
    for w in lines:
        if w[0] == "unbudgeted":
            print(f"budget: {w[1]} '{w[2]}' ({w[3]} s) has no line in tests/time_budget")
    if not over:
        print("budget: every stage and test run within its share of tests/time_budget")
    for w in over:
        what = f"{w[1]} {w[2]}".upper()
        extra = f", {w[5]} TEST-SECONDS" if w[1] == "tests" else ""
        print(f"OVER BUDGET: {what} TOOK {w[3]} S, ITS BUDGET IS {w[4]} S{extra}")
    for run, tests in grew.items():
        print(f"budget: the tests of '{run}' that grew past their allowance:")
        for test in tests.values():
            print(f"budget:   {test}")


def main(argv):
    try:
        budget = Budget()
        if len(argv) == 5 and argv[1] == "tests":
            report_tests(budget, argv[2], argv[3], float(argv[4]))
        elif len(argv) == 4 and argv[1] == "stage":
            report_stage(budget, argv[2], float(argv[3]))
        elif len(argv) == 2 and argv[1] == "summary":
            summary()
        else:
            print(__doc__.strip(), file=sys.stderr)
            return 2
    except (OSError, ValueError, ElementTree.ParseError) as e:
        print(f"test_budget: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""scripts/lib/test_budget.py against a budget and a ctest JUnit file of its own: a run within its
budget says so and notes nothing; a run and a test over theirs are noted, and CI's summary prints
them in capitals with the test that grew; a malformed budget line is refused with its place.

usage: time_budget_check.py SOURCE_DIR      prints "time budget check: N failures"
"""
import os
import subprocess
import sys
import tempfile

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="3">
  <testcase name="unit: fast" classname="a" time="0.5" status="run"/>
  <testcase name="e2e: slow one" classname="b" time="42.0" status="run"/>
  <testcase name="e2e: allowed" classname="c" time="40.0" status="run"/>
</testsuite>
"""


def run(tool, work, *args):
    env = dict(os.environ, NPU_RUN_TIME_BUDGET=os.path.join(work, "budget"),
               NPU_RUN_BUDGET_NOTES=os.path.join(work, "notes"))
    done = subprocess.run([sys.executable, tool, *args], env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main(root):
    tool = os.path.join(root, "scripts", "lib", "test_budget.py")
    failures = []

    def expect(what, condition, output):
        if not condition:
            failures.append(f"{what}:\n{output}")

    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "junit.xml"), "w") as f:
            f.write(JUNIT)
        with open(os.path.join(work, "budget"), "w") as f:
            f.write("stage test 100\ntests quick 60\neach 30\nallow quick 45 e2e: allowed\n")
        rc, out = run(tool, work, "tests", "quick", os.path.join(work, "junit.xml"), "50")
        expect("a run's report", rc == 0 and "3 tests, 82 test-seconds in 50 s" in out
               and "42.0 s  e2e: slow one" in out, out)
        expect("the test past the default allowance", "'e2e: slow one' took 42.0 s, past its 30 s"
               in out and "'e2e: allowed'" not in out, out)
        rc, out = run(tool, work, "summary")
        expect("a run within budget", "every stage and test run within its share" in out
               and "'e2e: slow one' 42.0 s (allowed 30 s)" in out, out)
        run(tool, work, "tests", "quick", os.path.join(work, "junit.xml"), "75")
        run(tool, work, "stage", "test", "120")
        rc, out = run(tool, work, "summary")
        expect("runs and stages over budget, in capitals", rc == 0
               and "OVER BUDGET: TESTS QUICK TOOK 75 S, ITS BUDGET IS 60 S, 82 TEST-SECONDS" in out
               and "OVER BUDGET: STAGE TEST TOOK 120 S, ITS BUDGET IS 100 S" in out, out)
        with open(os.path.join(work, "budget"), "w") as f:
            f.write("each 30\nstage test\n")
        rc, out = run(tool, work, "stage", "test", "1")
        expect("a malformed line", rc == 2 and "budget:2: 'stage test' is none of" in out, out)
    for failure in failures:
        print(f"time budget check: {failure}")
    print(f"time budget check: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

#!/usr/bin/python3
"""Draws the benchmark figures from the tables in a BENCHMARKS.md written by run_all.sh.

The tables are the single record of a run; the plots are drawn from them (medians as points,
min-max as error bars), so figure and table can never disagree.

    /usr/bin/python3 scripts/bench/plots.py docs/BENCHMARKS.md docs/bench
"""

import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

VALUE = re.compile(r"([0-9.]+) (ms|s|MB) \(([0-9.]+)-([0-9.]+)\)")


def value(cell):
    """'16.2 ms (7.8-18.4)' -> (median, low, high) in seconds (or MB)."""
    m = VALUE.search(cell)
    if not m:
        return None
    scale = 0.001 if m.group(2) == "ms" else 1.0
    return tuple(float(m.group(i)) * scale for i in (1, 3, 4))


def sections(text):
    """'## title' -> table rows (lists of cells), header and separator left out."""
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:]
            out[title] = []
        elif title and line.startswith("|") and not line.startswith("|---"):
            out[title].append([c.strip() for c in line.strip("|").split("|")])
    return {t: rows[1:] for t, rows in out.items()}  # rows[0] is the header


def series(points):
    xs = [p[0] for p in points]
    med = [p[1][0] for p in points]
    err = [[p[1][0] - p[1][1] for p in points], [p[1][2] - p[1][0] for p in points]]
    return xs, med, err


def line_plot(path, title, xlabel, ylabel, curves, logx=False):
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, points in curves.items():
        if points:
            xs, med, err = series(points)
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=name)
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    source, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    secs = sections(open(source).read())
    written = []

    launch = {}
    for title, rows in secs.items():
        m = re.match(r"Launch of (\d+) x", title)
        for row in rows if m else []:
            launch.setdefault(row[0], []).append((int(m.group(1)), value(row[1])))
    if launch:
        path = os.path.join(out_dir, "launch.png")
        line_plot(path, "Launch to exit of N x /bin/true, one node", "workers", "seconds (log)", launch)
        written.append(("Single-node launch", path))

    multi = next((rows for t, rows in secs.items() if t.startswith("Multi-node launch")), [])
    if multi:
        curves = {name: [(int(r[0]), value(r[i])) for r in multi]
                  for i, name in ((1, "npu_run"), (2, "torchrun static"), (3, "torchrun c10d"))}
        path = os.path.join(out_dir, "multi_node.png")
        line_plot(path, "Multi-node launch on loopback, 1 worker per agent", "agents", "seconds (log)",
                  curves)
        written.append(("Multi-node launch", path))

    rdzv = next((rows for t, rows in secs.items() if t.startswith("Rendezvous")), [])
    store = next((rows for t, rows in secs.items() if t.startswith("TCPStore barrier")), [])
    if rdzv or store:
        curves = {"npu_run rendezvous (full assignment)":
                  [(int(r[0]), value(r[2])) for r in rdzv if r[1] == "somaxconn"],
                  "TCPStore barrier (torch)": [(int(r[0]), value(r[1])) for r in store]}
        path = os.path.join(out_dir, "rendezvous.png")
        line_plot(path, "N agents meeting one server", "agents (log)", "seconds (log)", curves, logx=True)
        written.append(("Rendezvous scaling", path))

    memory = {}
    for title, rows in secs.items():
        m = re.match(r"Launch of (\d+) x", title)
        for row in rows if m else []:
            if not row[0].startswith("shell"):
                memory.setdefault(row[0], []).append((int(m.group(1)), value(row[4])))
    memory["npu_run rendezvous server"] = [(int(r[0]), value(r[3])) for r in rdzv if r[1] == "somaxconn"]
    if any(memory.values()):
        path = os.path.join(out_dir, "memory.png")
        line_plot(path, "Peak RSS: launcher by workers, server by agents", "workers or agents (log)",
                  "MB (log)", memory, logx=True)
        written.append(("Memory", path))

    print_targets(secs, multi, rdzv)
    print_rendezvous_ratio(rdzv, store)
    print("\n## Figures\n")
    print("Drawn by `scripts/bench/plots.py` from the tables above: medians, with min-max as error bars.\n")
    for name, path in written:
        print(f"![{name}]({os.path.relpath(path, os.path.dirname(os.path.abspath(source)))})")


def print_rendezvous_ratio(rdzv, store):
    """npu_run's rendezvous against the TCPStore barrier at the sizes both ran, same run."""
    ours = {int(r[0]): value(r[2])[0] for r in rdzv if r[1] == "somaxconn"}
    theirs = {int(r[0]): value(r[1])[0] for r in store}
    common = sorted(set(ours) & set(theirs))
    if not common:
        return
    print("\n## Rendezvous against the TCPStore barrier (medians from the tables above)\n")
    print("| agents | npu_run | TCPStore | TCPStore / npu_run |")
    print("|---|---|---|---|")
    for n in common:
        print(f"| {n} | {ours[n]:.2f} s | {theirs[n]:.2f} s | {theirs[n] / ours[n]:.0f}x |")
    print()


def print_targets(secs, multi, rdzv):
    """The issue's targets for this 2-core machine, checked against the tables."""
    rows = []
    ratios = []
    for title, table in secs.items():
        if re.match(r"Launch of \d+ x", title):
            ratios += [float(r[3].rstrip("x")) for r in table if r[0].startswith("torchrun")]
    if ratios:
        rows.append(("launch overhead >= 50x lower than torchrun", f"{min(ratios):.0f}x at worst", min(ratios) >= 50))
    sixteen = [r for r in multi if r[0] == "16"]
    if sixteen:
        ratio = value(sixteen[0][3])[0] / value(sixteen[0][1])[0]
        rows.append(("16 agents launch >= 20x faster than torchrun c10d", f"{ratio:.0f}x", ratio >= 20))
    failures = [value(r[1])[0] for t, table in secs.items() if "failure" in t.lower() or "failing" in t.lower()
                for r in table if r[0] == "npu_run"]
    if failures:
        worst = max(failures)
        rows.append(("failure-to-exit < 100 ms (no grace needed here)", f"{worst * 1000:.0f} ms at worst",
                     worst < 0.1))
    big = [value(r[2])[0] for r in rdzv if r[0] == "16384" and r[1] == "somaxconn"]
    if big:
        rows.append(("16,384 agents assigned in < 5 s", f"{big[0]:.2f} s", big[0] < 5))
    rss = [value(r[4])[0] for t, table in secs.items() if re.match(r"Launch of \d+ x", t)
           for r in table if r[0] == "npu_run"]
    if rss:
        rows.append(("agent RSS < 10 MB", f"{max(rss):.1f} MB at most", max(rss) < 10))
    idle = [r for t, table in secs.items() if t.startswith("Supervision cost") for r in table if r[0] == "npu_run"]
    if idle:
        share = float(idle[0][2].split()[0])  # "0.10 % (0.08-0.12)"
        rows.append(("idle agent CPU < 1% of one core", f"{share:.2f} %", share < 1))
    print("## Targets (2-core machine)\n")
    print("| target | measured | met |")
    print("|---|---|---|")
    for target, measured, met in rows:
        print(f"| {target} | {measured} | {'yes' if met else '**no**'} |")


if __name__ == "__main__":
    main()

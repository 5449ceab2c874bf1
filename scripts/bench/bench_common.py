"""Where the benchmarks find their torchrun anchor."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "anchors", "torchrun_py311.py"))


def torchrun_anchor():
    """The shared anchor next to the checkout if there is one, else this repository's own copy of
    the same fix (scripts/bench/torchrun_anchor.py)."""
    return SHARED if os.path.exists(SHARED) else os.path.join(HERE, "torchrun_anchor.py")

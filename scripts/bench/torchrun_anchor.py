#!/usr/bin/python3
"""Debian's torchrun 1.13 with its Python 3.11 failure worked around, for the benchmarks.

Under Python 3.11, torch 1.13's Std.from_str (which parses --redirects/--tee) breaks on the
enum change, so torchrun cannot start at all. This replaces that one parser and runs torchrun's
own main(). Used when ../shared/anchors/torchrun_py311.py (the same fix) is not next to the
checkout, as on a fresh CI machine.
"""

import re
import sys

from torch.distributed.elastic.multiprocessing import api


def std_from_str(text):
    """'3' -> Std(3) for every local rank; '0:3,1:0' -> {local rank: Std}."""
    if re.fullmatch(r"[0-3]", text):
        return api.Std(int(text))
    per_rank = {}
    for item in text.split(","):
        rank, value = item.split(":")
        per_rank[int(rank)] = api.Std(int(value))
    return per_rank


api.Std.from_str = staticmethod(std_from_str)

from torch.distributed.run import main  # noqa: E402  (after the fix)

sys.exit(main())

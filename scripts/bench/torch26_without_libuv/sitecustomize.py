"""Every TCPStore of this python asks for torch's older backend: Debian 13's torch 2.6 has no libuv.

Debian builds torch 2.6 without libuv, yet torchrun 2.6 creates its agents' stores with
use_libuv=True, and its workers' client stores (the agent's store is shared with them) too,
whatever USE_LIBUV says. Put on PYTHONPATH by scripts/bench/torchrun26_anchor.py, so that the
agent and each worker it starts load it at start-up.
"""

import sys

try:
    import torch.distributed as _dist
except ImportError:  # a python without torch: nothing to change
    pass
else:
    # The module, not the function torch.distributed exports under the same name.
    _rendezvous = sys.modules["torch.distributed.rendezvous"]
    _TCPStore = _dist.TCPStore

    class TCPStoreWithoutLibuv(_TCPStore):
        """torch's TCPStore, always without libuv."""

        def __init__(self, *args, **kwargs):
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)

    # Both names: torch.distributed.rendezvous bound its own when torch.distributed was imported;
    # the elastic modules import it later, by name, from torch.distributed.
    _dist.TCPStore = TCPStoreWithoutLibuv
    _rendezvous.TCPStore = TCPStoreWithoutLibuv

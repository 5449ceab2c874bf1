"""Progress beats for npu_run's hang detection (--hang-timeout), standard library only.

    import npu_run_progress
    for step, batch in enumerate(loader):
        ...
        npu_run_progress.beat(f"step {step}")

Each beat is one datagram to the Unix socket that npu_run's agent names in NPU_RUN_PROGRESS;
its text (the first 200 bytes) is the rank's last progress, shown when a rank hangs and by
`npu_run status`. A beat never blocks and never raises: outside npu_run, with the agent busy or
gone, it does nothing. Copy this file next to your script, or import it from where npu_run is
installed (share/npu_run/python). Without the module, two lines of the standard library do it:

    import os, socket
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"step 1200", os.environ["NPU_RUN_PROGRESS"])
"""

import os
import socket

MAX_TEXT = 200

_sock = None
_owner = None  # the pid that opened _sock: a forked child (a DataLoader worker) opens its own


def beat(text=""):
    """Tells npu_run that this rank made progress; `text` says how far (e.g. "step 1200")."""
    global _sock, _owner
    try:
        path = os.environ.get("NPU_RUN_PROGRESS")
        if not path:
            return
        if _sock is None or _owner != os.getpid():
            _sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            _owner = os.getpid()
        data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
        _sock.sendto(data[:MAX_TEXT], socket.MSG_DONTWAIT, path)
    except Exception:  # a beat must never stop training: a full queue or a gone agent is ignored
        pass

"""Checkpoints that cost seconds, not the hour since the last one: snapshots in npu_run's memory.

    import npu_run_checkpoint
    state = npu_run_checkpoint.load("ckpt/rank{rank}_step{step}.pt")
    if state is not None:
        model.load_state_dict(state["model"]); start = state["step"] + 1
    for step in range(start, steps):
        ...
        if step % 5 == 0:
            npu_run_checkpoint.save({"model": model.state_dict(), "step": step}, step,
                                    "ckpt/rank{rank}_step{step}.pt")

`save` serializes `state` with torch's own serializer into a shared-memory segment that belongs
to npu_run's agent and returns: the training loop waits only for that copy. The agent writes the
segment to `path` in the background (a temporary name, fsync, rename), so `torch.load(path)`
reads it without npu_run. In `path`, `{rank}` is the global rank and `{step}` the step.

After a worker fails, is stopped as hung or restarted with its group, `load` returns the newest
step that every rank of the job holds in memory, at memory speed; where there is none, the newest
step every rank's agent wrote to storage; otherwise the file `path` names (with `{step}`, the
newest on disk), and None when there is no such file. `last_loaded()` says which and from where.

Outside npu_run (no NPU_RUN_CHECKPOINT), with the agent's memory full or gone, `save` writes
`path` itself (atomically) and `load` reads it: the script runs the same under any launcher. Every
rank calls both. States are torch's (tensors, dicts, lists, numbers); MindSpore cells and
parameter dicts are refused with a clear message: snapshots for MindSpore are not supported yet.
"""

import errno
import glob
import json
import os
import re
import socket
import sys
import time

_VARIABLE = "NPU_RUN_CHECKPOINT"
_MAX_ANSWER = 16384
_last = None  # what the last load returned: {"source": ..., "step": ...}
_warned = set()


def _expand(path, step):
    text = os.fspath(path)
    text = text.replace("{rank}", os.environ.get("RANK", "0"))
    return text if step is None else text.replace("{step}", str(int(step)))


def _warn(kind, text):
    if kind in _warned:
        return
    _warned.add(kind)
    print(f"npu_run_checkpoint: {text}", file=sys.stderr, flush=True)


class _Agent:
    """One conversation with the agent: a JSON line asked, a JSON line answered."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        self._file = self._sock.makefile("rwb")

    def ask(self, **request):
        self._file.write(json.dumps(request).encode() + b"\n")
        self._file.flush()
        line = self._file.readline(_MAX_ANSWER)
        if not line.endswith(b"\n"):
            raise OSError(errno.ECONNRESET, "npu_run's agent closed the conversation")
        return json.loads(line)

    def close(self):
        self._file.close()
        self._sock.close()


def _agent():
    path = os.environ.get(_VARIABLE)
    if not path:
        return None
    try:
        return _Agent(path)
    except OSError as e:
        _warn("agent", f"npu_run's agent does not answer at {path} ({e}); saving to storage")
        return None


def _local_rank():
    return int(os.environ.get("LOCAL_RANK", "0"))


def _storage_bytes(tensor):
    try:
        return tensor.untyped_storage().nbytes()  # torch 2
    except AttributeError:
        storage = tensor.storage()  # torch 1.13
        return storage.size() * tensor.element_size()


def _estimate(state):
    """About what torch.save will write: every storage once, and room for the pickle."""
    import torch

    seen, total, todo = set(), 0, [state]
    while todo:
        obj = todo.pop()
        if torch.is_tensor(obj):
            key = (obj.device.type, obj.data_ptr() - obj.storage_offset() * obj.element_size())
            if key not in seen:
                seen.add(key)
                total += _storage_bytes(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)
    return total + total // 50 + (1 << 20)


def _refuse_mindspore(state):
    module = type(state).__module__ or ""
    values = state.values() if isinstance(state, dict) else ()
    if module.startswith("mindspore") or any(
        (type(v).__module__ or "").startswith("mindspore") for v in values
    ):
        raise TypeError(
            "npu_run_checkpoint keeps torch states only: snapshots of MindSpore cells and "
            "parameter dicts are not supported yet; save them with mindspore.save_checkpoint"
        )


def _save_directly(state, target):
    import torch

    temporary = f"{target}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _crc32_switch():
    """torch's switch for the CRC32s of its zip format (torch 2.7 and later), which torch.load
    does not need: off, the copy into memory takes about half the time. None without one."""
    try:
        from torch.utils.serialization import config

        return config.save if hasattr(config.save, "compute_crc32") else None
    except ImportError:
        return None


def _torch_save_fast(state, f):
    """torch.save at about the speed of a copy: without the zip format's CRC32s where torch can
    leave them out, else in torch's older format (what torch.save wrote before 1.6, which every
    torch.load reads), whose writer computes none."""
    import torch

    switch = _crc32_switch()
    if switch is None:
        return torch.save(state, f, _use_new_zipfile_serialization=False)
    before = switch.compute_crc32
    switch.compute_crc32 = False
    try:
        torch.save(state, f)
    finally:
        switch.compute_crc32 = before


def _into_segment(agent, state, step, target):
    """The snapshot in the agent's memory; False when the agent refused it."""
    answer = agent.ask(op="begin", rank=_local_rank(), step=int(step), bytes=_estimate(state))
    if not answer.get("ok"):
        _warn("refused", f"{answer.get('error')}: step {step} and later ones go to {target}")
        return False
    try:
        with open(answer["file"], "r+b") as f:
            _torch_save_fast(state, f)
            f.truncate()
    except OSError as e:  # the segments' file system is full
        agent.ask(op="abort")
        _warn("segment", f"cannot write npu_run's segment ({e}): step {step} goes to {target}")
        return False
    answer = agent.ask(op="commit", path=target)
    if not answer.get("ok"):
        _warn("refused", f"{answer.get('error')}: step {step} and later ones go to {target}")
        return False
    return True


def save(state, step, path):
    """Snapshots `state` at `step`: into npu_run's memory, written to `path` in the background."""
    _refuse_mindspore(state)
    target = os.path.abspath(_expand(path, step))
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, "no such directory for the checkpoint", directory)
    agent = _agent()
    if agent is None:
        return _save_directly(state, target)
    try:
        if _into_segment(agent, state, step, target):
            return None
    except (OSError, ValueError) as e:
        _warn("agent", f"npu_run's agent broke off ({e}): step {step} goes to {target}")
    finally:
        agent.close()
    return _save_directly(state, target)


def _newest_on_disk(path):
    """The file `path` names; with {step}, the one of the highest step there is."""
    text = _expand(path, None)
    if "{step}" not in text:
        return (text, None) if os.path.exists(text) else (None, None)
    pattern = re.compile(re.escape(text).replace(re.escape("{step}"), r"(\d+)") + r"\Z")
    best = (None, None)
    for name in glob.glob(glob.escape(text).replace("{step}", "*")):
        match = pattern.match(name)
        if match and (best[1] is None or int(match.group(1)) > best[1]):
            best = (name, int(match.group(1)))
    return best


def _ask_restore():
    agent = _agent()
    if agent is None:
        return {"source": "none"}
    try:
        return agent.ask(op="restore", rank=_local_rank())
    except (OSError, ValueError):
        return {"source": "none"}
    finally:
        agent.close()


def _tell_restored(source, step, seconds):
    agent = _agent()
    if agent is None:
        return
    try:
        agent.ask(op="restored", rank=_local_rank(), source=source, step=step, seconds=seconds)
    except (OSError, ValueError):
        pass
    finally:
        agent.close()


def load(path, **torch_load_args):
    """The state to resume from (see the module's text), or None when there is none."""
    import torch

    global _last
    answer = _ask_restore()
    source, step = answer.get("source"), answer.get("step")
    if source == "memory":
        target = answer["file"]
    elif source == "storage":
        target = _expand(path, step)
    else:
        target, step = _newest_on_disk(path)
        source = "file"
        if target is None:
            _last = None
            return None
    began = time.monotonic()
    state = torch.load(target, **torch_load_args)
    _last = {"source": source, "step": step}
    _tell_restored(source, step, time.monotonic() - began)
    return state


def last_loaded():
    """{"source": "memory"|"storage"|"file", "step": N or None} of the last load, or None."""
    return _last

"""npu_run's hooks in every Python worker, with no line added to the script:
 - the automatic progress beats (--auto-progress, on by default: NPU_RUN_BEAT_STEPS=1): one beat
   per optimizer step, so that hang detection, --hang-timeout auto, the no-progress restart
   limit, the timeline's steps and the report work for a script that never calls
   npu_run_progress.beat();
 - torch's worker server at NPU_RUN_WORKER_SERVER (torch 2.5 and later), through which the agent
   collects the flight recorder's entries and every thread's stack on a hang, without killing.

npu_run writes this file as sitecustomize.py into its agent's private directory and puts that
directory first on each worker's PYTHONPATH. Python imports it at start-up, before the script:
 - it runs the sitecustomize this one shadows (Debian's, a virtualenv's, the user's own), as
   Python would have;
 - it waits for torch.distributed and torch.optim.optimizer to be imported (importing torch
   itself would cost seconds to a worker that never uses it), then starts the server, and beats
   after every optimizer step: through torch's global step hook (torch 2.0 and later), or, on
   torch 1.13, which has none, by wrapping the step of each optimizer class the first time one of
   its optimizers is made;
 - a module imported already (by a .pth file, by the sitecustomize this one shadows: patching
   torch.distributed there is a common fix) gets its hook at once, as one imported later does.
A beat is one datagram to NPU_RUN_PROGRESS whose first byte (\\x01) marks it automatic: once the
script beats itself, the agent ignores these. Nothing here may stop a worker: every failure is
swallowed, and a worker without torch never notices it.
"""

import os
import sys


def _later_entries(path, here):
    """The entries of `path` after `here`'s: a sitecustomize found before it would run this one
    again, and two that chain would run each other forever."""
    entries = [os.path.abspath(p or os.curdir) for p in path]
    return path[entries.index(here) + 1:] if here in entries else list(path)


def _run_shadowed_sitecustomize():
    try:
        import importlib.machinery
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize",
                                                        _later_entries(sys.path, here))
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as error:  # as Python's site module says of a failing sitecustomize
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (type(error).__name__, error))


_MARK = b"\x01"
_MAX_TEXT = 200
_sock = None
_owner = None  # the pid that opened _sock: a forked child opens its own
_steps = None  # optimizer -> its steps so far


def _beat(text):
    global _sock, _owner
    try:
        path = os.environ.get("NPU_RUN_PROGRESS")
        if not path:
            return
        import socket

        if _sock is None or _owner != os.getpid():
            _sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            _owner = os.getpid()
        _sock.sendto(_MARK + text.encode("utf-8", "replace")[:_MAX_TEXT], socket.MSG_DONTWAIT,
                     path)
    except Exception:  # a full queue, a gone agent: never the worker's problem
        pass


def _stepped(optimizer):
    try:
        count = _steps.get(optimizer, 0) + 1
        _steps[optimizer] = count
        _beat("step %d" % count)
    except Exception:
        pass


def _wrap_step(cls):
    """torch 1.13: the class's step beats after it returns; once per class."""
    import functools

    step = cls.__dict__.get("step") or getattr(cls, "step", None)
    if step is None or getattr(step, "_npu_run_beats", False):
        return

    @functools.wraps(step)
    def step_and_beat(self, *args, **kwargs):
        result = step(self, *args, **kwargs)
        _stepped(self)
        return result

    step_and_beat._npu_run_beats = True
    cls.step = step_and_beat


def _hook_optimizers(optimizer_module):
    global _steps
    import weakref

    _steps = weakref.WeakKeyDictionary()
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(lambda optimizer, args, kwargs: _stepped(optimizer))
        return
    optimizer_class = optimizer_module.Optimizer
    init = optimizer_class.__init__

    def init_and_hook(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            _wrap_step(type(self))
        except Exception:
            pass

    optimizer_class.__init__ = init_and_hook


def _serve_worker(c10d_module):
    """torch's worker server (torch 2.5 and later) at the agent's path for this rank: the agent
    asks it for the flight recorder's entries and every thread's stack on a hang, without
    killing. Kept for the life of the process (the server stops when the object goes)."""
    global _server
    path = _server_path
    make = getattr(getattr(c10d_module, "_C", None), "_distributed_c10d", None)
    make = getattr(make, "_WorkerServer", None)
    if not path or make is None or _server is not None:
        return
    if os.path.exists(path):
        os.unlink(path)  # left by a process this one forked from; the agent made the directory
    _server = make(path)


class _WhenModulesLoad:
    """A finder that runs a hook on each target module once it has been executed, and else
    finds nothing (the next finder imports the module)."""

    def __init__(self, hooks):
        self._hooks = dict(hooks)  # name -> what runs on the executed module

    def find_spec(self, name, path=None, target=None):
        hook = self._hooks.pop(name, None)  # not removed from sys.meta_path: the import loop
        if hook is None:                    # is iterating it
            return None
        try:
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            execute = spec.loader.exec_module

            def exec_and_hook(module):
                execute(module)
                try:
                    hook(module)
                except Exception:
                    pass

            spec.loader.exec_module = exec_and_hook
            return spec
        except Exception:
            return None


def _hooks_wanted():
    hooks = {}
    if os.environ.get("NPU_RUN_BEAT_STEPS") == "1" and os.environ.get("NPU_RUN_PROGRESS"):
        hooks["torch.optim.optimizer"] = _hook_optimizers
    if _server_path:
        hooks["torch.distributed"] = lambda module: _serve_worker(sys.modules["torch"])
    return hooks


def _hook_imported(hooks):
    """Runs the hook of each module that is imported already; returns the others' hooks, for
    when their module loads."""
    later = {}
    for name, hook in hooks.items():
        module = sys.modules.get(name)
        if module is None:
            later[name] = hook
            continue
        try:
            hook(module)
        except Exception:
            pass
    return later


_server = None
# The worker's own: a Python process it starts (multiprocessing's spawn, a subprocess) must not
# take its socket, so the variable goes with this process.
_server_path = os.environ.pop("NPU_RUN_WORKER_SERVER", None)
_run_shadowed_sitecustomize()
_wanted = _hook_imported(_hooks_wanted())
if _wanted:
    sys.meta_path.insert(0, _WhenModulesLoad(_wanted))

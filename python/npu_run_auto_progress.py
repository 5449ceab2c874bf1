"""npu_run's automatic progress beats (--auto-progress, on by default): one beat per optimizer
step, so that hang detection, --hang-timeout auto, the no-progress restart limit, the timeline's
steps and the report work for a script that never calls npu_run_progress.beat().

npu_run writes this file as sitecustomize.py into its agent's private directory and puts that
directory first on each worker's PYTHONPATH. Python imports it at start-up, before the script:
 - it runs the sitecustomize this one shadows (Debian's, a virtualenv's, the user's own), as
   Python would have;
 - it waits for torch.optim.optimizer to be imported (importing torch itself would cost seconds
   to a worker that never uses it), then beats after every optimizer step: through torch's global
   step hook (torch 2.0 and later), or, on torch 1.13, which has none, by wrapping the step of
   each optimizer class the first time one of its optimizers is made.
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


class _WhenOptimizersLoad:
    """A finder that hooks torch.optim.optimizer once it has been executed, and else finds
    nothing (the next finder imports the module)."""

    _target = "torch.optim.optimizer"

    def __init__(self):
        self._done = False

    def find_spec(self, name, path=None, target=None):
        if name != self._target or self._done:
            return None
        self._done = True  # not removed from sys.meta_path: the import loop is iterating it
        try:
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            execute = spec.loader.exec_module

            def exec_and_hook(module):
                execute(module)
                try:
                    _hook_optimizers(module)
                except Exception:
                    pass

            spec.loader.exec_module = exec_and_hook
            return spec
        except Exception:
            return None


_run_shadowed_sitecustomize()
if os.environ.get("NPU_RUN_PROGRESS") and "torch.optim.optimizer" not in sys.modules:
    sys.meta_path.insert(0, _WhenOptimizersLoad())

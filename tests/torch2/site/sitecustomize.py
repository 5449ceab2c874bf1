"""Loaded by tests/torch2/python's interpreter (PYTHONPATH) before anything else.

Debian 13 builds torch 2.6 without libuv, and TCPStore's constructor asks for libuv unless told
use_libuv=False, clients included. torch honours USE_LIBUV=0 (set by tests/torch2/python) where
rank 0 hosts the store, but its agent-store branch of env:// and tcp:// init
(torch.distributed.rendezvous._create_c10d_store with TORCHELASTIC_USE_AGENT_STORE=True) builds
TCPStore(...) without passing use_libuv, so on this build it raises before a byte is sent. A
torch 2.6 built with libuv (PyPI's) takes that branch as is; the client's wire protocol is the
same either way. So, for this test environment only, the module's TCPStore name is wrapped to
default use_libuv to False when torch.distributed.rendezvous is first imported, without importing
torch any earlier than the program itself does.

It shadows any later sitecustomize (npu_run's --auto-progress one, Debian's), so it runs the next
one on sys.path after its own directory, as npu_run's does.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_MODULE = "torch.distributed.rendezvous"


def _default_without_libuv(module):
    store = module.TCPStore

    def tcp_store(*args, use_libuv=False, **kwargs):
        return store(*args, use_libuv=use_libuv, **kwargs)

    module.TCPStore = tcp_store


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _default_without_libuv(module)

        spec.loader.exec_module = exec_module
        return spec


def _run_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(p or os.curdir) for p in sys.path]
    later = sys.path[entries.index(here) + 1:] if here in entries else []
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


sys.meta_path.insert(0, _PatchOnImport())
_run_next_sitecustomize()

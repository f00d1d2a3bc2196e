"""Instrument onnxruntime once it is imported, in this process and (through the environment) in
every Python subprocess. Standard library only: this module is imported at interpreter start.

The environment says what to do (``capture.env``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

from hatch_shrinkray.capture import env, process

WATCHED = "onnxruntime"


def requested() -> bool:
    return bool(os.environ.get(env.RECORD) or os.environ.get(env.CHECK))


def install() -> None:
    """Instrument onnxruntime now if it is loaded, else as soon as it is imported."""
    if not requested():
        return
    if os.environ.get(env.RECORD):
        process.started()
    module = sys.modules.get(WATCHED)
    if module is not None:
        _instrument(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _instrument(module: ModuleType) -> None:
    from hatch_shrinkray.capture.session import instrument

    instrument(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``onnxruntime`` with the other finders and runs ``_instrument`` after its import."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname != WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _instrument(module)

    def __getattr__(self, name: str) -> Any:  # resource readers, is_package, ...
        return getattr(self._loader, name)

"""Fine-grained predictor: discrete-event simulation of compute ops and network flows.

Li et al. (TPDS 2022)'s fine-grained model class: every layer's forward/backward, every tensor's
push/update/pull (parameter server) or every bucket's ring all-reduce is an operation with its
dependencies, on a flow-level max-min fair network (:mod:`.network`) driven by a small event
kernel (:mod:`.engine`). Overlap, contention and stragglers come out of the dependencies rather
than from formulas. Entry point: :func:`predict_simulate`.

The modules are compiled with mypyc where the install could (``setup.py``); ``COMPILED`` says
whether they are. The Python sources are loaded instead (the same results, slower) with
``DDLPERF_PURE_PYTHON=1`` in the environment when this package is first imported (tests that
patch the simulator's classes need it), and, with a warning, where a source is newer than its
compiled module (an edited editable install: ``pip install -e .`` compiles it again).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from importlib.machinery import ModuleSpec

_HERE = os.path.dirname(os.path.abspath(__file__))


class _Sources:
    """Import finder that loads this package's modules from their ``.py`` files."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        package, _, module = name.rpartition(".")
        if package != __name__:
            return None
        source = os.path.join(_HERE, module + ".py")
        return importlib.util.spec_from_file_location(name, source) if os.path.exists(
            source) else None


def _stale() -> str | None:
    """In a source checkout (an editable install), a source newer than its compiled module.
    (Not in an installed wheel, whose files get the time they were unpacked.)"""
    if not os.path.exists(os.path.join(_HERE, "..", "..", "..", "..", "setup.py")):
        return None
    for name in os.listdir(_HERE):
        module, dot, suffix = name.partition(".")
        source = os.path.join(_HERE, module + ".py")
        if dot and suffix.endswith(("so", "pyd")) and os.path.exists(source) and (
                os.path.getmtime(source) > os.path.getmtime(os.path.join(_HERE, name))):
            return source
    return None


if os.environ.get("DDLPERF_PURE_PYTHON", "") not in ("", "0"):
    sys.meta_path.insert(0, _Sources())  # type: ignore[arg-type]
elif (_edited := _stale()) is not None:
    warnings.warn(f"{_edited} changed since it was compiled: the simulator runs as Python "
                  "(slower) until `pip install -e .` compiles it again", stacklevel=2)
    sys.meta_path.insert(0, _Sources())  # type: ignore[arg-type]

from ddlperf.predictors.simulate import engine as _engine  # noqa: E402
from ddlperf.predictors.simulate.runner import predict_simulate  # noqa: E402

#: whether the simulator runs compiled (mypyc) or as Python
COMPILED = not _engine.__file__.endswith(".py")

__all__ = ["COMPILED", "predict_simulate"]

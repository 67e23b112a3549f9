"""Build hook: compile the simulator's modules with mypyc (README, "Quick start"; measured
in docs/simulate-speed.md, "Compiled with mypyc"). Everything else is in pyproject.toml.

Compilation is optional: with ``DDLPERF_PURE_PYTHON=1``, or where mypyc is missing, the
modules do not type-check or the C compiler fails, the package installs as pure Python (the
same results, a slower simulator) with a warning instead of failing.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

SIMULATE = "src/ddlperf/predictors/simulate/"
#: the modules whose code runs per event, compiled together (they call each other natively);
#: the ones that build a run or its results (runner, run, results, units, fabric, ...) stay
#: Python: compiling them gains nothing measurable
COMPILED = [
    "allreduce", "clocks", "compute", "connection", "engine", "flows", "jitter", "maxmin",
    "network", "ps", "ps_worker", "record", "ssp", "update_busy", "worker",
]
#: the rest of ddlperf, numpy and pydantic are seen as Any: only these modules are
#: type-checked, which keeps the build at about a minute
MYPY_FLAGS = ["--ignore-missing-imports", "--follow-imports=skip"]


def _warn(what: str, exc: BaseException) -> None:
    print(f"warning: ddlperf: {what} ({exc!r}); the simulator stays pure Python "
          "(same results, slower)", file=sys.stderr)


def _ext_modules() -> list:
    if os.environ.get("DDLPERF_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify

        return mypycify(MYPY_FLAGS + [SIMULATE + name + ".py" for name in COMPILED],
                        opt_level="3")
    except BaseException as exc:  # no mypyc; a type error ends mypycify with SystemExit
        _warn("mypyc could not compile the simulator", exc)
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` that leaves pure Python behind when the C compiler fails (all or
    nothing: a module's compiled shim needs the shared library of all of them)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _warn("the compiled simulator could not be built", exc)
            for path in self.get_outputs():
                if os.path.exists(path):
                    os.remove(path)


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "ddlperf" / "data"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibrate_compute",
                                                  ROOT / "tools" / "calibrate_compute.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.fixture(scope="module")
def fits() -> dict[str, Any]:
    tool = _tool()
    return {"shipped": tool.calibrate(), "strict": tool.calibrate(strict=True)}


def test_shipped_catalog_is_the_fit_of_the_shipped_figures(fits: dict[str, Any]) -> None:
    """What `tools/calibrate_compute.py --check` verifies: devices.json is not hand-edited."""
    text = json.dumps(fits["shipped"], indent=1) + "\n"
    assert text == (DATA / "devices.json").read_text(encoding="utf-8"), \
        "devices.json differs from a fresh fit: run python tools/calibrate_compute.py"


def test_a_reference_fit_feeds_others_but_is_no_catalog_architecture(
        fits: dict[str, Any]) -> None:
    archs = fits["shipped"]["architectures"]
    assert "pascal_cudnn5" not in archs
    # Kepler's rows are cuDNN 5.0: its Winograd gain is the cuDNN 5 Pascal fit's, not the
    # TensorFlow/cuDNN 7 one the Pascal catalog architecture now carries
    assert archs["kepler"]["simt"]["winograd"] != archs["pascal"]["simt"]["winograd"]
    assert archs["volta"]["simt"]["winograd"] == archs["pascal"]["simt"]["winograd"]


def test_strict_fit_leaves_out_the_relaxed_rule_rows(fits: dict[str, Any]) -> None:
    calibration = json.loads((DATA / "calibration.json").read_text(encoding="utf-8"))
    relaxed = [r for r in calibration["rows"] if r.get("rule") == "relaxed"]
    assert relaxed and all(r["architecture"] == "pascal" for r in relaxed)
    shipped = fits["shipped"]["architectures"]["pascal"]["fitted"]["rows"]
    strict = fits["strict"]["architectures"]["pascal"]["fitted"]["rows"]
    assert len(shipped) - len(strict) == len(relaxed)
    assert not any(r.startswith(("inception_v3", "vgg16")) for r in strict)
    # without VGG-16 the Pascal Winograd gain cannot be fitted: the strict spec takes
    # the cuDNN 5 one, which Kepler uses in both fits
    archs = fits["strict"]["architectures"]
    assert archs["pascal"]["simt"]["winograd"] == archs["kepler"]["simt"]["winograd"]

"""The matrix file: the synthetic block and one-line errors for malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.validate import Synthetic, load_matrix
from tests.validate.helpers import error_of, write


def test_synthetic_block_builds_layers_and_tensors() -> None:
    w = Synthetic.model_validate({"layers": [
        {"name": "big", "forward_ms": 20, "backward_ms": 40, "tensor_mb": 6},
        {"count": 3, "forward_ms": 1, "backward_ms": 2, "tensor_mb": [1, 0.5]},
        {"forward_ms": 1, "backward_ms": 1},
    ]}).workload()
    assert [layer.name for layer in w.layers] == ["big", "l1", "l2", "l3", "l4"]
    assert w.parameter_bytes == 6_000_000 + 3 * 1_500_000
    assert w.layers[0].forward_s == pytest.approx(0.020)
    assert [t.bytes for t in w.layers[1].tensors] == [1_000_000, 500_000]
    assert w.layers[4].tensors == ()
    assert all(layer.forward_cv == layer.backward_cv == 0 for layer in w.layers)


def test_a_synthetic_layers_cv_is_its_forward_and_backward_spread() -> None:
    w = Synthetic.model_validate({"layers": [
        {"forward_ms": 20, "backward_ms": 40, "tensor_mb": 6, "cv": 0.3},
        {"count": 2, "forward_ms": 1, "backward_ms": 2, "tensor_mb": 1},
    ]}).workload()
    assert [(layer.forward_cv, layer.backward_cv) for layer in w.layers] == [
        (0.3, 0.3), (0.0, 0.0), (0.0, 0.0)]


@pytest.mark.parametrize("text,needles", [
    ("scenarios: [\n  - name: a\n", ["not valid YAML", "line"]),
    ("- just\n- a list\n", ["must be a mapping", "scenarios"]),
    ("scenarios: []\n", ["scenarios"]),
    ("defaults: {bandwith: 1Gbps}\nscenarios: [{name: a}]\n",
     ["defaults.bandwith", "not a known field"]),
    ("scenarios: [{name: a, workers: 2, colour: red}]\n",
     ["scenarios[0] (a).colour", "not a known field"]),
    ("scenarios: [{name: a, synthetic: {layers: [{forward_ms: 1, backward_ms: 1, mb: 1}]}}]\n",
     ["scenarios[0] (a).synthetic.layers[0].mb", "not a known field"]),
    ("scenarios: [{name: a, synthetic: {layers: [{forward_ms: 1, backward_ms: 1, cv: -0.1}]}}]\n",
     ["scenarios[0] (a).synthetic.layers[0].cv", "0"]),
    ("scenarios: [{name: a}, {name: a}]\n", ["appears twice"]),
    ("scenarios: [{name: 'a b'}]\n", ["scenarios[0] (a b).name"]),
    ("scenarios: [{name: a, arch: mesh}]\n", ["scenarios[0] (a).arch", "'ps' or 'allreduce'"]),
])
def test_malformed_files_are_one_line(tmp_path: Path, text: str, needles: list[str]) -> None:
    message = error_of(tmp_path, text)
    for needle in needles:
        assert needle in message, message


def test_load_matrix_names_the_file_in_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^x\.yaml: scenarios"):
        load_matrix(write(tmp_path, "scenarios: 3\n", "x.yaml"))

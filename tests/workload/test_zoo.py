"""The bundled zoo: contents, figures everyone quotes, roofline workloads, no torch import."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.hardware import architecture, device_from_spec
from ddlperf.workload import zoo

REQUIRED = [
    "alexnet", "vgg16", "vgg19", "resnet18", "resnet50", "resnet101", "resnet152",
    "inception_v3", "densenet121", "mobilenet_v2", "bert_base", "gpt2",
]
ROOT = Path(__file__).resolve().parents[2]
SRC = Path(zoo.__file__).resolve().parents[2]


def test_every_required_model_is_present() -> None:
    assert set(REQUIRED) <= set(zoo.names())
    assert zoo.names() == sorted(zoo.names())


def test_resnet18_parameters_and_tensor_bytes() -> None:
    assert zoo.info("resnet18")["parameters"] == 11_689_512
    workload = zoo.load("resnet18", batch_size=8)
    assert workload.parameter_bytes == 4 * 11_689_512


@pytest.mark.parametrize("name", REQUIRED)
def test_tensor_bytes_match_parameter_count(name: str) -> None:
    info = zoo.info(name)
    assert zoo.load(name).parameter_bytes == 4 * info["parameters"]


@pytest.mark.parametrize(
    ("name", "gflops"),
    [("resnet50", 8.2), ("resnet18", 3.6), ("vgg16", 30.9), ("bert_base", 28.5)],
)
def test_forward_flops_per_sample(name: str, gflops: float) -> None:
    """2 FLOPs per multiply-add: resnet50 is the usual 4.1 GMACs = 8.2 GFLOPs."""
    assert zoo.info(name)["gflops_per_sample"] == pytest.approx(gflops, rel=0.03)
    workload = zoo.load(name, batch_size=4)
    assert workload.flops == pytest.approx(4 * gflops * 1e9, rel=0.03)


@pytest.mark.parametrize("name", zoo.names())
def test_layer_times_positive(name: str) -> None:
    workload = zoo.load(name, device="A100")
    # every layer with any work has a positive forward time; backward kernels are the ones
    # autograd runs (a parameter added to an activation, e.g. a position embedding, has none)
    for layer in workload.layers:
        if layer.flops or layer.memory_bytes:
            assert layer.forward_s > 0
            assert layer.backward_s >= 0
    assert workload.backward_array.sum() > 0
    assert workload.compute_s > 0
    assert workload.update_s_per_byte > 0
    assert workload.provenance["source"] == "zoo"
    assert workload.device == "A100"


def test_kernel_model_prices_a_conv_by_its_class() -> None:
    """layer1.0.conv2 is a 3×3 stride-1 conv (Winograd class) then a ReLU; one wave-free
    batch (32 × 56 × 56 × 64 outputs = 392 full 128×128 tiles ≈ 4.9 waves on 80 SMs)."""
    from ddlperf.compute import rates

    v100 = device_from_spec("V100")
    workload = zoo.load("resnet50", batch_size=32, device=v100)
    conv = next(layer for layer in workload.layers if layer.name == "layer1.0.conv2")
    kernels = [k for k in conv.kernels if k[0] == "f"]
    assert [k[1] for k in kernels] == ["conv3x3", "elementwise"]
    r = rates(v100)
    arch = architecture("volta").simt
    assert r.flops[1] == pytest.approx(15.7e12 * arch.dense * arch.winograd)
    blocks = -(-kernels[0][6] * 32 // 16384)
    utilisation = blocks / (-(-blocks // 80) * 80)
    conv_s = max(kernels[0][3] * 32 / (r.flops[1] * utilisation),
                 (kernels[0][4] * 32 + kernels[0][5]) / r.bandwidth) + r.kernel_s
    relu_s = (kernels[1][4] * 32 + kernels[1][5]) / r.bandwidth + kernels[1][2] * r.kernel_s
    assert conv.forward_s == pytest.approx(conv_s + relu_s)
    assert workload.update_s_per_byte == pytest.approx(5 / (900e9 * 0.83))


@pytest.mark.parametrize("depth", [50, 101, 152])
def test_resnet_v1_strides_in_the_first_1x1_of_a_downsampling_block(depth: int) -> None:
    """TensorFlow's ResNet v1 against torchvision's layout: same parameters, the downsampling
    1×1 at a quarter of its FLOPs and the 3×3 beside it at stride 1 (a Winograd kernel)."""
    assert zoo.info(f"resnet{depth}_v1")["parameters"] == zoo.info(f"resnet{depth}")["parameters"]
    layers = {layer.name: layer for layer in zoo.load(f"resnet{depth}_v1", batch_size=1).layers}
    old = {layer.name: layer for layer in zoo.load(f"resnet{depth}", batch_size=1).layers}
    for stage in ("layer2", "layer3", "layer4"):
        assert layers[f"{stage}.0.conv1"].flops * 4 == old[f"{stage}.0.conv1"].flops
        assert layers[f"{stage}.0.conv2"].flops == old[f"{stage}.0.conv2"].flops
        classes = {k[1] for k in layers[f"{stage}.0.conv2"].kernels if k[0] == "f"}
        old_classes = {k[1] for k in old[f"{stage}.0.conv2"].kernels if k[0] == "f"}
        assert "conv3x3" in classes and "conv3x3" not in old_classes
    k80 = device_from_spec("K80")
    assert (zoo.load(f"resnet{depth}_v1", batch_size=32, device=k80).compute_s
            < zoo.load(f"resnet{depth}", batch_size=32, device=k80).compute_s)


def test_batch_scales_work_linearly() -> None:
    small, large = zoo.load("resnet18", batch_size=1), zoo.load("resnet18", batch_size=10)
    assert large.flops == pytest.approx(10 * small.flops)
    assert large.parameter_bytes == small.parameter_bytes


def test_half_precision_halves_bytes() -> None:
    fp32, fp16 = zoo.load("resnet18", dtype="fp32"), zoo.load("resnet18", dtype="fp16")
    assert fp16.parameter_bytes == pytest.approx(fp32.parameter_bytes / 2, rel=1e-4)
    assert fp16.dtype == "float16"
    assert fp16.compute_s < fp32.compute_s


def test_load_is_deterministic() -> None:
    assert zoo.load("gpt2", 2).to_json() == zoo.load("gpt2", 2).to_json()
    assert zoo.load("densenet121").batch_size == zoo.info("densenet121")["default_batch_size"]


def test_workload_round_trips_through_json(tmp_path: Path) -> None:
    from ddlperf.workload import load_workload

    path = zoo.load("mobilenet_v2", 4).save(tmp_path / "w.json")
    again = load_workload(path)
    assert again.layers[0].model_extra["type"] == "Conv2d"
    assert again.compute_s == pytest.approx(zoo.load("mobilenet_v2", 4).compute_s)


def test_unknown_model_suggests_the_nearest() -> None:
    with pytest.raises(InputError) as err:
        zoo.load("resnet51")
    assert err.value.field == "model"
    assert "resnet50" in str(err.value)
    with pytest.raises(InputError):
        zoo.info("nope")


@pytest.mark.parametrize("batch", [0, -3])
def test_bad_batch_size(batch: int) -> None:
    with pytest.raises(InputError, match="batch_size"):
        zoo.load("resnet18", batch_size=batch)


def test_bad_device_and_dtype() -> None:
    with pytest.raises(InputError, match="device"):
        zoo.load("resnet18", device="V1000")
    with pytest.raises(InputError, match="dtype"):
        zoo.load("resnet18", dtype="int3")


def test_zoo_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from ddlperf.workload import zoo\n"
        "w = zoo.load('bert_base', 8, device='A100')\n"
        "assert w.layers\n"
        "bad = [m for m in ('torch', 'torchvision', 'transformers') if m in sys.modules]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_shipped_file_is_small_and_tagged() -> None:
    path = SRC / "ddlperf" / "data" / "zoo.json"
    assert path.stat().st_size < 2_000_000
    data = json.loads(path.read_text())
    assert data["format"] == "ddlperf.zoo/2"
    assert "2 FLOPs per multiply-add" in data["flop_convention"]


@pytest.mark.torch
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "resnet50_v1"])
def test_shipped_entry_matches_regeneration(name: str) -> None:
    """Guards against drift between torch_models.py / layer_flops.py and data/zoo.json."""
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    spec = importlib.util.spec_from_file_location("gen_zoo", ROOT / "tools" / "gen_zoo.py")
    assert spec is not None and spec.loader is not None
    gen_zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_zoo)
    shipped = json.loads((SRC / "ddlperf" / "data" / "zoo.json").read_text())["models"][name]
    assert gen_zoo.model_entry(name) == shipped, "zoo.json is stale: run python tools/gen_zoo.py"

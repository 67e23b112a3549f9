"""The kernel-level compute model: math modes, waves, classes, bad input, the check set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddlperf import compute
from ddlperf.api import make_workload, predict
from ddlperf.errors import InputError
from ddlperf.hardware import device_from_spec
from ddlperf.workload import zoo

ROOT = Path(__file__).resolve().parents[1]


def test_pytorch_default_math_runs_convolutions_in_tf32_and_matmuls_in_fp32() -> None:
    a100, v100 = device_from_spec("A100"), device_from_spec("V100")
    plan = compute.math_plan(a100)
    assert plan["conv"] == plan["conv3x3"] == "tf32" and plan["matmul"] == "fp32"
    assert set(compute.math_plan(a100, "fp32", "tf32").values()) == {"tf32"}
    assert set(compute.math_plan(a100, "fp32", "ieee").values()) == {"fp32"}
    assert set(compute.math_plan(v100).values()) == {"fp32"}
    assert set(compute.math_plan(v100, "fp16").values()) == {"fp16"}


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"dtype": "fp8"}, "--dtype"), ({"math": "fast"}, "--math"),
    ({"dtype": "bf16", "device": "V100"}, "--dtype"),
    ({"math": "tf32", "device": "V100"}, "--math"),
    ({"dtype": "fp16", "math": "tf32", "device": "A100"}, "--math"),
    ({"accumulation": 0}, "--accumulation"), ({"grad_dtype": "int8"}, "--grad-dtype"),
])
def test_bad_compute_options_name_their_flag(kwargs: dict, flag: str) -> None:
    with pytest.raises(InputError) as err:
        make_workload("resnet18", **kwargs)
    assert err.value.field == flag and "\n" not in str(err.value)


def test_small_batches_do_not_fill_a_big_gpu() -> None:
    """Per-sample time falls with the batch until the waves fill the SMs (then flattens)."""
    per_sample = [zoo.load("resnet50", b, "A100").compute_s / b for b in (1, 4, 32, 256)]
    assert per_sample == sorted(per_sample, reverse=True)
    assert per_sample[0] > 3 * per_sample[-1]
    assert per_sample[2] < 1.5 * per_sample[3]


def test_mixed_precision_is_faster_where_the_device_has_tensor_cores() -> None:
    fp32, fp16 = (zoo.load("resnet50", 128, "V100", d).compute_s for d in ("fp32", "fp16"))
    assert fp16 < fp32 / 2
    p100 = [zoo.load("resnet50", 64, "P100", d).compute_s for d in ("fp32", "fp16")]
    assert p100[1] < p100[0] < 2 * p100[1]  # 2× FP16 on CUDA cores, no tensor cores


def test_grad_dtype_sets_the_communicated_bytes() -> None:
    fp16 = make_workload("resnet50", dtype="fp16")
    fp32_grads = make_workload("resnet50", dtype="fp16", grad_dtype="fp32")
    assert fp32_grads.parameter_bytes == pytest.approx(2 * fp16.parameter_bytes, rel=1e-4)
    assert fp32_grads.compute_s == pytest.approx(fp16.compute_s)


def test_accumulation_runs_k_micro_batches_per_synchronisation() -> None:
    common = {"arch": "allreduce", "workers": 8, "bandwidth": "1Gbps"}
    one = predict("resnet50", **common)
    four = predict("resnet50", accumulation=4, **common)
    # forward + backward 4×, the optimizer step (in "compute") once
    assert four.breakdown_s["compute"] == pytest.approx(4 * one.breakdown_s["compute"], rel=0.01)
    assert four.workers[0].batch_size == 4 * one.workers[0].batch_size
    # communication is paid once per 4 micro-batches: throughput rises
    assert four.throughput_samples_per_s > 1.5 * one.throughput_samples_per_s


def test_gpt2_at_batch_64_does_not_fit_a_40gb_a100() -> None:
    p = predict("gpt2", batch_size=64, device="A100", arch="allreduce", workers=2)
    memory = p.inputs["memory"]["w"]
    assert not memory["fits"] and 0 < memory["largest_batch"] < 64
    assert any("does not fit" in note and "A100" in note for note in p.notes)
    fits = predict("gpt2", batch_size=memory["largest_batch"], device="A100",
                   arch="allreduce", workers=2)
    assert fits.inputs["memory"]["w"]["fits"]


def test_profile_on_one_device_scales_per_class_to_another(tmp_path: Path) -> None:
    """A workload 'profiled' on V100 (here: the zoo's times) predicted on an A100 equals the
    kernel model on the A100 (exact per layer), not one overall ratio."""
    path = zoo.load("resnet50", 32, "V100").save(tmp_path / "w.json")
    moved = predict(workload=path, device="A100", arch="allreduce", workers=1)
    direct = zoo.load("resnet50", 32, "A100")
    update = direct.update_s_per_byte * direct.parameter_bytes
    assert moved.breakdown_s["compute"] == pytest.approx(direct.compute_s + update, rel=1e-9)
    v100 = zoo.load("resnet50", 32, "V100")
    ratios = direct.forward_array / np.where(v100.forward_array > 0, v100.forward_array, 1)
    assert ratios.max() > 1.5 * ratios.min()  # classes scale differently

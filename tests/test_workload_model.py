import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ddlperf.errors import InputError
from ddlperf.workload import Workload, load_workload

MINIMAL = {"format": "ddlperf.workload/1", "name": "toy", "batch_size": 32,
           "layers": [{"name": "fc", "forward_s": 0.001, "backward_s": 0.002,
                       "tensors": [{"name": "fc.weight", "bytes": 4000000}]}]}


def test_minimal_file_from_the_issue_loads(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**MINIMAL, "comment": "extra keys are allowed"}))
    w = load_workload(path)
    assert w.compute_s == pytest.approx(0.003)
    assert w.parameter_bytes == 4_000_000
    assert [t.name for t in w.gradient_tensors] == ["fc.weight"]


def test_gradient_order_defaults_to_reverse_layers(toy):
    assert [t.name for t in toy.gradient_tensors] == ["l1.t1", "l1.t0", "l0.t0"]


@pytest.mark.parametrize(
    ("change", "field"),
    [({"batch_size": 0}, "batch_size"), ({"layers": []}, "layers"),
     ({"format": "other/9"}, "format"), ({"name": ""}, "name")],
)
def test_bad_workload_names_field(change, field):
    with pytest.raises(InputError) as info:
        Workload.from_dict({**MINIMAL, **change})
    assert field in str(info.value).split(":")[0]


def test_negative_time_names_layer_field():
    bad = json.loads(json.dumps(MINIMAL))
    bad["layers"][0]["forward_s"] = -1
    with pytest.raises(InputError, match=r"layers\[0\]\.forward_s"):
        Workload.from_dict(bad)


def test_duplicate_tensor_rejected():
    bad = json.loads(json.dumps(MINIMAL))
    bad["layers"].append(bad["layers"][0])
    with pytest.raises(InputError, match="appears twice"):
        Workload.from_dict(bad)


def test_malformed_json_is_one_line(tmp_path):
    path = tmp_path / "w.json"
    path.write_text('{"format": ')
    with pytest.raises(InputError, match="not valid JSON"):
        load_workload(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_workload(tmp_path / "nope.json")


layer = st.tuples(
    st.floats(0, 1, allow_nan=False), st.floats(0, 1, allow_nan=False),
    st.lists(st.integers(1, 10**9), max_size=3),
)


@given(st.lists(layer, min_size=1, max_size=6), st.integers(1, 4096))
def test_json_round_trip(layers, batch):
    w = Workload.from_dict({
        "format": "ddlperf.workload/1", "name": "x", "batch_size": batch,
        "layers": [{"name": f"l{i}", "forward_s": f, "backward_s": b,
                    "tensors": [{"name": f"l{i}.{j}", "bytes": s} for j, s in enumerate(ts)]}
                   for i, (f, b, ts) in enumerate(layers)],
    })
    again = Workload.from_dict(json.loads(w.to_json()))
    assert again == w


def test_save_is_atomic_and_loadable(tmp_path, toy):
    path = toy.save(tmp_path / "toy.json")
    assert load_workload(path) == toy
    assert not list(tmp_path.glob(".*tmp"))

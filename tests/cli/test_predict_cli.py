"""``ddlperf predict``, ``models`` and ``devices`` through the CLI, as a user runs them."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import ddlperf.cli  # noqa: F401  (registers the commands)
from ddlperf.cli.app import app

runner = CliRunner()
REQUIRED = {"iteration_time_s", "throughput_samples_per_s", "speedup", "scaling_efficiency",
            "bottleneck", "breakdown_s", "workers", "inputs"}


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_default_prints_a_table():
    result = invoke("predict")
    assert result.exit_code == 0, result.output
    assert "iteration time" in result.output and "bottleneck" in result.output
    assert "resnet50" in result.output


def test_json_has_documented_keys():
    result = invoke("predict", "--json", "--workers", "4", "--ps", "1")
    data = json.loads(result.stdout)
    assert data.keys() >= REQUIRED
    assert set(data["breakdown_s"]) == {"compute", "communication", "wait",
                                        "communication_intra", "communication_inter"}
    assert len(data["workers"]) == 4
    assert {"name", "iteration_time_s", "throughput_samples_per_s"} <= data["workers"][0].keys()
    assert data["inputs"]["cluster"]["bandwidth"] == 10e9
    assert data["inputs"]["strategy"]["sync"] == "bsp"


def test_flags_reach_the_model():
    slow = json.loads(invoke("predict", "--json", "--bandwidth", "1Gbps").stdout)
    fast = json.loads(invoke("predict", "--json", "--bandwidth", "100Gbps").stdout)
    assert fast["iteration_time_s"] < slow["iteration_time_s"]
    ring = json.loads(invoke("predict", "--json", "--arch", "allreduce", "--workers", "16",
                             "--bucket-size", "10MB").stdout)
    assert ring["inputs"]["strategy"]["bucket_bytes"] == 10e6
    assert ring["bottleneck"].startswith(("ring", "compute"))


def test_config_file(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("bandwidth: 25GbE\nworkers:\n  - {count: 3, device: V100}\n"
                   "  - {name: old, count: 1, device: K80}\nps: {count: 1}\n")
    data = json.loads(invoke("predict", "--json", "--config", str(cfg)).stdout)
    assert data["bottleneck"] == "straggler w3"
    assert [w["device"] for w in data["workers"]] == ["V100", "V100", "V100", "K80"]


def test_workload_file(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({
        "format": "ddlperf.workload/1", "name": "toy", "batch_size": 32,
        "layers": [{"name": "fc", "forward_s": 0.001, "backward_s": 0.002,
                    "tensors": [{"name": "fc.weight", "bytes": 4000000}]}]}))
    data = json.loads(invoke("predict", "--json", "--workload", str(path)).stdout)
    assert data["inputs"]["workload"]["name"] == "toy"


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--model", "resnet5"], "resnet50"),
     (["--device", "V10"], "V100"),
     (["--bandwidth", "-1Gbps"], "--bandwidth"),
     (["--bandwidth", "fast"], "--bandwidth"),
     (["--latency", "5 lightyears"], "--latency"),
     (["--workers", "0"], "--workers"),
     (["--sync", "ssp", "--staleness", "-1"], "--staleness"),
     (["--arch", "allreduce", "--sync", "asp"], "--sync"),
     (["--ps", "0"], "--ps"),
     (["--workload", "/nonexistent.json"], "does not exist"),
     (["--config", "/nonexistent.yaml"], "does not exist"),
     (["--bucket-size", "0MB"], "--bucket-size"),
     (["--model", ""], "--model: is empty"),  # was resnet50, silently
     (["--device", " "], "--device: is empty"),  # was V100, silently
     (["--trace", "/proc/t.json", "--method", "simulate"], "not writable")],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    result = invoke("predict", *args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("name", "text"), [
    ("c.yaml", "workers: 4\nworkers: 8\nps: 1\n"),
    ("c.json", '{"workers": 4, "workers": 8, "ps": 1}'),
])
def test_a_key_given_twice_is_refused(tmp_path, name, text):
    """Before: the last one won silently (8 workers)."""
    cfg = tmp_path / name
    cfg.write_text(text)
    result = invoke("predict", "--config", str(cfg))
    assert result.exit_code == 2 and "'workers' twice" in result.stderr


def test_malformed_config(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers: [count: 3\n")
    result = invoke("predict", "--config", str(cfg))
    assert result.exit_code == 2 and "not valid YAML" in result.stderr


def test_models_and_devices():
    models = json.loads(invoke("models", "--json").stdout)
    assert {"resnet50", "bert_base", "gpt2", "vgg16"} <= {m["name"] for m in models}
    devices = json.loads(invoke("devices", "--json").stdout)["devices"]
    assert {"K80", "P100", "V100", "T4", "A10", "A100", "H100", "H200", "cpu"} <= devices.keys()
    assert all(d["source"] for d in devices.values())


def test_prediction_path_never_imports_torch():
    code = ("import sys, ddlperf, ddlperf.cli; "
            "ddlperf.predict('resnet50', workers=4); ddlperf.predict('gpt2', arch='allreduce'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "ddlperf", "predict", "--json", "--workers", "2"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["inputs"]["cluster"]["workers"][0]["count"] == 2


def test_fabrics_lists_the_catalog():
    result = invoke("fabrics")
    assert result.exit_code == 0, result.output
    assert "NVLink2" in result.output and "150GB/s" in result.output
    data = json.loads(invoke("fabrics", "--json").stdout)
    assert data["fabrics"]["PCIe4"]["rate_bps"] == 252e9 and data["notes"]


def test_transports_lists_the_catalog_and_the_flag_reaches_the_model():
    result = invoke("transports")
    assert result.exit_code == 0, result.output
    assert "grpc-tf1" in result.output and "200MB/s" in result.output
    assert "900MB/s" in result.output
    data = json.loads(invoke("transports", "--json").stdout)
    assert data["transports"]["grpc-tf1"]["cap_bps"] == 1.6e9 and data["notes"]
    assert data["transports"]["grpc-tf1"]["receive_bps"] == 7.2e9
    assert "tensorflow/tensorflow#6116" in invoke("transports", "--wide").output.replace("\n", "")
    args = ("predict", "--workers", "16", "--gpus-per-node", "4", "--intra", "PCIe3",
            "--bandwidth", "25Gbps", "--ps", "4", "--placement", "colocated")
    plain = json.loads(invoke(*args, "--json").stdout)
    grpc = json.loads(invoke(*args, "--json", "--transport", "grpc-tf1").stdout)
    assert grpc["iteration_time_s"] > plain["iteration_time_s"]
    assert grpc["inputs"]["cluster"]["transport"] == {"name": "grpc-tf1", "cap": 1.6e9,
                                                      "receive": 7.2e9}
    assert any(n.startswith("transport grpc-tf1: each connection ≤ 200MB/s")
               for n in grpc["notes"])
    table = invoke(*args, "--transport", "grpc-tf1").output
    assert "latency 50us · grpc-tf1" in table and "connection" in table


@pytest.mark.parametrize(
    ("args", "needles"),
    [(("--transport", "grpc-tf"), ("--transport", "did you mean 'grpc-tf1'")),
     (("--transport", "-5MB/s"), ("--transport", "positive rate")),
     (("--workers", "8", "--gpus-per-node", "0"), ("--gpus-per-node",)),
     (("--workers", "8", "--gpus-per-node", "4", "--intra", "NVlink9"),
      ("--intra", "unknown fabric", "did you mean")),
     (("--workers", "8", "--nics", "0"), ("--nics",)),
     (("--workers", "8", "--rack-size", "0", "--rack-uplink", "10Gbps"), ("--rack-size",))],
)
def test_bad_server_or_transport_input_is_one_line(args, needles):
    from tests.conftest import assert_one_line_error

    assert_one_line_error(invoke("predict", *args), *needles)


def test_bad_server_file_is_one_line(tmp_path):
    from tests.conftest import assert_one_line_error

    cfg = tmp_path / "c.yaml"
    cfg.write_text("nodes: [{count: 2, gpus: 2, intra: PCIe3}]\nracks: {servers: 0, uplink: "
                   "10Gbps}\nps: 1\n")
    assert_one_line_error(invoke("predict", "--config", str(cfg)), "racks.servers")
    cfg.write_text("workers: 2\nnodes: [{count: 2}]\nps: 1\n")
    assert_one_line_error(invoke("predict", "--config", str(cfg)), "nodes", "not both")
    cfg.write_text("workers: 2\nps: 1\ntransport: {name: grpc-tf1, cap: -1}\n")
    assert_one_line_error(invoke("predict", "--config", str(cfg)), "transport", "positive")


TOY = {"format": "ddlperf.workload/1", "name": "toy", "batch_size": 32, "device": "V100",
       "layers": [{"name": "fc", "forward_s": 0.001, "backward_s": 0.002,
                   "tensors": [{"name": "fc.weight", "bytes": 4000000}]}]}


def test_batch_size_rescales_a_workload_file(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(TOY))
    base = json.loads(invoke("predict", "--json", "--workload", str(path)).stdout)
    data = json.loads(invoke("predict", "--json", "--workload", str(path), "--batch-size",
                             "64").stdout)
    assert {w["batch_size"] for w in data["workers"]} == {64}
    assert data["workers"][0]["compute_s"] == pytest.approx(2 * base["workers"][0]["compute_s"])
    assert any("batch 64 ≠ profiled 32" in n for n in data["notes"])
    table = invoke("predict", "--workload", str(path), "--batch-size", "64").stdout
    assert "batch 64/worker" in table and "rescaled from the workload's own V100 batch 32" in table


def test_header_describes_a_mixed_cluster_group_by_group(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("workers:\n  - {count: 6, device: V100}\n"
                   "  - {name: old, count: 2, device: K80, batch_size: 16}\nps: 2\n")
    out = invoke("predict", "--config", str(cfg)).stdout
    assert "6 × V100 (batch 32) + 2 × K80 (batch 16)" in out


def test_a_tiny_speedup_is_shown_with_its_digits_and_explained(tmp_path):
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps({**TOY, "device": "cpu", "layers": [
        {**TOY["layers"][0], "flops": 2e8, "memory_bytes": 5e6}]}))
    out = invoke("predict", "--workload", str(path), "--device", "A100").stdout
    assert "0.00×" not in out
    assert "8 × A100" in out and "on cpu" not in out
    assert "slower than w0 alone" in " ".join(out.split())


@pytest.mark.parametrize(("args", "needle"), [
    (["--bandwidth", "10"], "--bandwidth 10 = 10bps, implausible for a NIC line rate"),
    (["--latency", "50"], "did you mean 50us?"),
    (["--arch", "allreduce", "--bucket-size", "25"], "did you mean 25MB?"),
])
def test_implausible_values_warn_once_on_stderr(args, needle):
    result = invoke("predict", *args)
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and needle in lines[0]


def test_plausible_values_do_not_warn():
    result = invoke("predict", "--bandwidth", "1Gbps", "--latency", "5us")
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize(("args", "needle"), [
    (["--staleness", "2"], "--staleness applies to --sync ssp only: ignored"),
    (["--arch", "allreduce", "--sharding", "greedy"], "--sharding does not apply to all-reduce"),
    (["--arch", "allreduce", "--placement", "colocated"], "--placement does not apply"),
    (["--arch", "allreduce", "--local-aggregation"], "--local-aggregation applies to --arch ps"),
    (["--arch", "allreduce", "--step-barrier"], "--step-barrier applies to --arch ps only"),
    (["--allreduce", "hierarchical"], "--allreduce applies to --arch allreduce only"),
    (["--bucket-size", "10MB"], "--bucket-size applies to --arch allreduce only"),
    (["--iterations", "5"], "--iterations applies to --method simulate only"),
])
def test_a_flag_that_does_not_apply_is_a_note_not_an_error(args, needle):
    result = invoke("predict", "--workers", "4", *args)
    assert result.exit_code == 0, result.output
    assert needle in " ".join(result.stdout.split())
    data = json.loads(invoke("predict", "--workers", "4", *args, "--json").stdout)
    assert any(needle in note for note in data["notes"])


def test_step_barrier_is_shown_and_slows_an_overlapped_bsp_ps():
    free = json.loads(invoke("predict", "--workers", "4", "--json").stdout)
    result = invoke("predict", "--workers", "4", "--step-barrier")
    assert result.exit_code == 0, result.output
    assert "step barrier" in result.stdout
    held = json.loads(invoke("predict", "--workers", "4", "--step-barrier", "--json").stdout)
    assert held["inputs"]["strategy"]["step_barrier"] is True
    assert held["iteration_time_s"] > free["iteration_time_s"]


def test_step_barrier_refuses_asynchronous_training():
    result = invoke("predict", "--sync", "asp", "--step-barrier")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: --step-barrier:")
    assert "Traceback" not in result.output


def test_ssp_simulate_says_it_adds_jitter_and_jitter_0_turns_it_off():
    # zoo models have no noise: SSP is simulated with 1% jitter, and says so; --jitter 0 is
    # the noise-free run the user asked for
    base = ("predict", "--json", "--model", "resnet18", "--workers", "3", "--ps", "1",
            "--placement", "colocated", "--sync", "ssp", "--staleness", "2",
            "--method", "simulate", "--iterations", "20")
    noisy = json.loads(invoke(*base).output)
    quiet = json.loads(invoke(*base, "--jitter", "0").output)
    assert noisy["inputs"]["simulate"]["jitter"] == 0.01
    assert quiet["inputs"]["simulate"]["jitter"] == 0.0
    assert any("SSP with 0.01 compute jitter" in n for n in noisy["notes"])
    assert not any("SSP with 0.01 compute jitter" in n for n in quiet["notes"])


def test_asp_simulate_of_one_servers_two_gpus_starts_them_together_and_says_so():
    # one server's two GPUs under ASP: a common start with 1% jitter (their lockstep is what a
    # job shows); --jitter 0 puts them at random phases; two servers are phased as before
    base = ("predict", "--json", "--model", "resnet18", "--ps", "1", "--sync", "asp",
            "--bandwidth", "1Gbps", "--gpus-per-node", "2", "--intra", "PCIe3",
            "--method", "simulate", "--iterations", "20")
    pair = json.loads(invoke(*base, "--workers", "2").output)
    quiet = json.loads(invoke(*base, "--workers", "2", "--jitter", "0").output)
    two = json.loads(invoke(*base, "--workers", "4").output)
    assert pair["inputs"]["simulate"]["jitter"] == 0.01
    assert any("both GPUs starting together" in n for n in pair["notes"])
    assert any("random phase" in n for n in quiet["notes"])
    assert any("random phase" in n for n in two["notes"])
    assert pair["iteration_time_s"] > quiet["iteration_time_s"]


def test_asp_on_one_server_of_three_gpus_notes_the_lockstep_figure():
    base = ("predict", "--json", "--model", "resnet18", "--ps", "2", "--bandwidth", "400Mbps",
            "--gpus-per-node", "3", "--intra", "PCIe3", "--workers", "3")
    asp = json.loads(invoke(*base, "--sync", "asp").output)
    bsp = json.loads(invoke(*base, "--sync", "bsp").output)
    (note,) = [n for n in asp["notes"] if n.startswith("ASP with the 3 GPUs of one server")]
    assert "in lockstep this job takes" in note
    assert not any(n.startswith("ASP with") for n in bsp["notes"])

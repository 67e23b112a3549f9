"""The published-check file: the shipped one reads, every problem is one InputError naming
the field (entries by name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddlperf.errors import InputError
from ddlperf.validate.published_file import load_published
from tests.validate.helpers import PUBLISHED_TINY

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "scenarios" / "published.yaml"

HEAD = PUBLISHED_TINY


def write(tmp_path: Path, entries: str, extra: str = "") -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + extra + "entries:\n" + entries)
    return path


def test_the_shipped_file_reads_and_covers_every_source() -> None:
    f = load_published(PUBLISHED)
    assert set(f.sources) == {"S1", "S2", "S3", "S4"}
    assert len(f.entries) == 98
    assert {f.source_of(e) for e in f.entries} == {"S1", "S2", "S3", "S4"}
    unsupported = [s for s in f.setups.values() if s.unsupported]
    assert unsupported and all(s.unsupported for s in unsupported)
    assert all(s.assumptions for s in f.setups.values() if not s.unsupported)



def test_tensorflows_parameter_servers_and_only_they_run_over_its_grpc() -> None:
    f = load_published(PUBLISHED)
    grpc = {name for name, s in f.setups.items()
            if not s.unsupported and (s.cluster or {}).get("transport") == "grpc-tf1"}
    assert grpc == {"s1-replicated", "s2-16-ps", "s2-64-ps"}
    for name in grpc:  # the assumption says where the figure comes from
        assert any("grpc-tf1" in a and "#6116" in a for a in f.setups[name].assumptions)


@pytest.mark.parametrize("entry,field", [
    ("{name: a, source: X, model: resnet50, device: V100, batch_size: 32, published: 300}",
     "entries[0] (a).dtype"),
    ("{name: a, source: X, model: resnet50, device: V100, batch_size: 32, dtype: fp32}",
     "entries[0] (a).published"),
    ("{name: a, source: X, model: resnet50, device: V100, batch_size: 32, dtype: fp32, "
     "published: 1, published_s: 1}", "entries[0] (a).published_s"),
    ("{name: a, source: X, model: resnet50, batch_size: 32, dtype: fp32, published: 300}",
     "entries[0] (a).device"),
    ("{name: a, setup: ring, model: resnet50, batch_size: 32, dtype: fp32, published: 300}",
     "entries[0] (a).servers"),
    ("{name: a, setup: ps, servers: 2, model: resnet50, batch_size: 32, dtype: fp32, "
     "published: 300}", "entries[0] (a).ps"),
    ("{name: a, setup: nope, servers: 2, model: resnet50, batch_size: 32, dtype: fp32, "
     "published: 300}", "entries[0] (a).setup"),
    ("{name: a, source: Y, model: resnet50, device: V100, batch_size: 32, dtype: fp32, "
     "published: 300}", "entries[0] (a).source"),
    ("{name: a, source: X, model: resnet50, device: V100, batch_size: 32, dtype: fp32, "
     "published: 300, speed: 2}", "entries[0] (a).speed"),
])
def test_a_bad_entry_names_its_field(tmp_path: Path, entry: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        load_published(write(tmp_path, f"  - {entry}\n"))
    assert info.value.field == f"p.yaml: {field}"
    assert "\n" not in str(info.value)


def test_duplicate_names_and_unknown_comparisons_are_named(tmp_path: Path) -> None:
    one = "  - {name: a, source: X, model: resnet50, device: V100, batch_size: 32, " \
          "dtype: fp32, published: 300}\n"
    with pytest.raises(InputError, match=r"entries\[1\] \(a\)\.name"):
        load_published(write(tmp_path, one + one))
    with pytest.raises(InputError, match=r"compare\[0\]\.entries"):
        load_published(write(tmp_path, one + "compare: [{what: x, entries: [a, b]}]\n"))


def test_a_supported_setup_needs_a_cluster_of_one_server_group(tmp_path: Path) -> None:
    bad = HEAD.replace("nodes: [{gpus: 2, device: V100, intra: NVLink2}]},\n         strategy: "
                       "{arch: allreduce}", "workers: 4},\n         strategy: {arch: allreduce}", 1)
    path = tmp_path / "p.yaml"
    path.write_text(bad + "entries:\n  - {name: a, setup: ring, servers: 1, model: resnet50, "
                    "batch_size: 32, dtype: fp32, published: 300}\n")
    with pytest.raises(InputError, match=r"setups\.ring\.cluster\.nodes"):
        load_published(path)

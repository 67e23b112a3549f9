"""The transport catalog and how a transport is named, given as a cap or as a mapping."""

import math

import pytest

from ddlperf.cluster import Cluster
from ddlperf.errors import InputError
from ddlperf.transport import CUSTOM_NAME, parse_transport, transport_catalog


def test_catalog_has_each_preset_with_a_source_and_a_date():
    catalog = transport_catalog()
    assert {"tcp", "grpc-tf1", "grpc-tf1.4", "rdma"} <= set(catalog)
    for t in catalog.values():
        assert t.description and len(t.source) > 40 and t.date
    assert catalog["tcp"].cap_bps is None and catalog["rdma"].cap_bps is None
    # the controlled before/after pair of tensorflow#6116: 200 MB/s before, 800 MB/s after
    assert catalog["grpc-tf1"].cap_bytes_per_s == 200e6
    assert catalog["grpc-tf1.4"].cap_bytes_per_s == 800e6
    assert math.isinf(catalog["tcp"].cap_bytes_per_s)
    # one receiving process: tensorflow#6116's one-connection figure without the fetch
    assert catalog["grpc-tf1"].receive_bytes_per_s == 900e6
    assert all(t.receive_bps is None for n, t in catalog.items() if n != "grpc-tf1")
    assert "GrpcWorkerCache" in catalog["grpc-tf1"].source


def test_names_caps_and_mappings():
    assert parse_transport("GRPC-TF1").name == "grpc-tf1"
    custom = parse_transport("200MB/s")
    assert (custom.name, custom.cap_bps) == (CUSTOM_NAME, 1.6e9)
    assert parse_transport(1.6e9).cap_bps == 1.6e9  # a bare number is bits/s
    override = parse_transport({"name": "grpc-tf1", "cap": "300MB/s"})
    assert override.name == "grpc-tf1" and override.cap_bps == 2.4e9
    assert "overridden" in override.source
    own = parse_transport({"name": "my-rpc", "cap": "1Gbps", "message": "20us"})
    assert (own.name, own.cap_bps) == ("my-rpc", 1e9)
    assert own.message_s == pytest.approx(20e-6)
    assert parse_transport({"name": "tcp", "message": "5us"}).cap_bps is None
    receive = parse_transport({"name": "grpc-tf1", "receive": "1GB/s"})
    assert (receive.cap_bps, receive.receive_bps) == (1.6e9, 8e9)
    assert "overridden" in receive.source
    assert parse_transport({"name": "grpc-tf1", "receive": None}).receive_bps is None
    assert parse_transport({"name": "rpc", "receive": "1GB/s"}).cap_bps is None


def test_the_compact_form_reads_back_unchanged():
    for value in ("grpc-tf1", "200MB/s", {"name": "x", "cap": "1Gbps", "message": "3us"},
                  {"name": "y", "receive": "1GB/s"}, {"name": "grpc-tf1", "receive": None}):
        t = parse_transport(value)
        again = parse_transport(t.spec())
        assert ((again.name, again.cap_bps, again.receive_bps, again.message_s)
                == (t.name, t.cap_bps, t.receive_bps, t.message_s))
        assert again.source == t.source


@pytest.mark.parametrize(("value", "needle"), [
    ("grpc-tf", r"unknown transport 'grpc-tf' — did you mean 'grpc-tf1'"),
    ("-200MB/s", "cap must be a positive rate: got '-200MB/s'"),
    ({"cap": -5}, "cap must be a positive rate: got -5"),
    ({"cap": "0MB/s"}, "cap must be a positive rate"),
    ({"cap": "fast"}, "cannot read bandwidth 'fast'"),
    ({"name": "grpc", "cap": "1Gbps", "mesage": "1us"}, "'mesage' is not a transport field"),
    ({"name": "nope"}, "unknown transport 'nope'"),
    ({"message": "-1us"}, "duration"),
    ({"name": "x", "receive": "-1GB/s"}, r"^transport\.receive: the per-process receive cap "
                                        "must be a positive rate"),
    ([1, 2], "cannot read transport"),
])
def test_bad_transports_are_one_line(value, needle):
    with pytest.raises(InputError, match=needle) as info:
        parse_transport(value, "transport")
    assert "\n" not in str(info.value)


def test_cluster_carries_it_and_writes_it_compactly():
    plain = Cluster.from_dict({"workers": 2})
    assert plain.transport is None and "transport" not in plain.to_dict()
    c = Cluster.from_dict({"workers": 2, "transport": "grpc-tf1"})
    assert c.to_dict()["transport"] == {"name": "grpc-tf1", "cap": 1.6e9, "receive": 7.2e9}
    assert Cluster.from_dict(c.to_dict()) == c
    with pytest.raises(InputError, match=r"^cluster\.transport: unknown transport"):
        Cluster.from_dict({"workers": 2, "transport": "gprc-tf1"})

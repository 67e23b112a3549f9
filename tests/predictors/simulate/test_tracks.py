"""Trace tracks: where a PS connection's rows go (tracks.py)."""

from ddlperf.api import make_cluster, make_strategy
from ddlperf.predictors.simulate.tracks import TrackLog, connection_tracks
from ddlperf.predictors.simulate.units import make_units
from ddlperf.scenario import resolve
from tests.conftest import make_workload

W = make_workload([(0.001, 0.002, [1_000_000])])


def _units(**kw):
    return make_units(resolve(W, make_cluster(**kw), make_strategy()), individual=True)


def test_a_workers_connection_rows_are_its_own_and_the_shards_sharing_one_record_list():
    unit = _units(workers=2, ps=1)[1]
    log = TrackLog()
    rows = connection_tracks(log, unit, "ps0", "push")
    down = connection_tracks(log, unit, "ps0", "pull")
    assert [(t.processes, t.thread, t.category) for t in log.tracks] == [
        (unit.names, "uplink → ps0", "push"), (["ps0"], f"downlink ← {unit.label}", "push"),
        (unit.names, "downlink ← ps0", "pull"), (["ps0"], f"uplink → {unit.label}", "pull")]
    assert log.tracks[0].records is rows is log.tracks[1].records
    assert log.tracks[2].records is down is log.tracks[3].records and down is not rows
    assert connection_tracks(None, unit, "ps0", "push") is None  # no trace asked for


def test_a_server_gpus_connection_rows_go_on_its_servers_nic_track():
    unit = _units(workers=8, gpus_per_node=4, intra="PCIe3", ps=1)[5]
    log = TrackLog()
    shared: list = []
    assert connection_tracks(log, unit, "ps0", "pull", shared) is shared
    assert log.tracks[0].processes == unit.server_names
    assert log.tracks[0].thread == f"nic ({unit.label}) downlink ← ps0"

"""The tie rule every method uses to name the busiest resource."""

from __future__ import annotations

from ddlperf.prediction import ResourceUse, busiest


def uses(**utilization: float) -> list[ResourceUse]:
    return [ResourceUse(name.replace("_", " "), u, u) for name, u in utilization.items()]


def test_equally_busy_resources_go_to_the_push_path_of_the_first_host() -> None:
    # a PS's uplink and downlink carry the same bytes: within 1% they are one figure
    assert busiest(uses(ps0_uplink=0.995, ps0_downlink=0.99)).name == "ps0 downlink"
    # a ring's links: the first worker's uplink
    assert busiest(uses(w1_downlink=0.500, w2_uplink=0.499, w0_uplink=0.498)).name == \
        "w0 uplink"
    # shards before workers, by index
    assert busiest(uses(w0_uplink=0.7, ps1_downlink=0.7, ps0_update=0.7)).name == "ps0 update"


def test_a_clearly_busier_resource_wins_whatever_its_name() -> None:
    assert busiest(uses(ps0_downlink=0.5, w3_downlink=0.9)).name == "w3 downlink"
    assert busiest(uses(ps0_downlink=0.5, ps0_uplink=0.52)).name == "ps0 uplink"

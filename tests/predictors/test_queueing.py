"""Mean value analysis against a hand-computed network and the single-class recursion."""

import numpy as np
import pytest

from ddlperf.predictors.queueing import mva


def test_mva_single_class_by_hand():
    # one station D = 1, think Z = 1, N = 2:
    # n=1: R = 1, X = 1/2, Q = 1/2; n=2: R = 1.5, X = 2/2.5 = 0.8
    x, r = mva(np.array([1.0]), np.array([[1.0]]), np.array([2.0]))
    assert x[0] == pytest.approx(0.8) and r[0, 0] == pytest.approx(1.5)


def test_mva_multiclass_matches_single_class_when_classes_equal():
    z, d = np.array([1.0, 1.0]), np.array([[0.3, 0.3], [0.2, 0.2]])
    x2, _ = mva(z, d, np.array([3.0, 3.0]))
    x1, _ = mva(z[:1], d[:, :1], np.array([6.0]))
    assert x2.sum() == pytest.approx(x1[0], rel=0.05)  # Schweitzer is approximate


def test_a_floor_below_the_demand_changes_nothing():
    z, d = np.array([0.5, 0.2]), np.array([[0.3, 0.1], [0.2, 0.4]])
    n = np.array([3.0, 2.0])
    for zc, dc, nc in ((z, d, n), (z[:1], d[:, :1], n[:1])):
        assert np.array_equal(mva(zc, dc, nc)[0], mva(zc, dc, nc, floor=dc * 0.7)[0])
        assert np.array_equal(mva(zc, dc, nc)[0], mva(zc, dc, nc, floor=dc)[0])


def test_a_floored_station_serves_floor_over_demand_customers_at_once():
    # each visit takes at least S = 3 D (a flow capped at a third of the link): up to three
    # customers pass as through a delay; many saturate the link at 1 / D
    z, d, s = np.array([1.0]), np.array([[0.1]]), np.array([[0.3]])
    for n in (1, 2, 3):
        x, r = mva(z, d, np.array([float(n)]), floor=s)
        assert x[0] == pytest.approx(n / (1.0 + 0.3)) and r[0, 0] == pytest.approx(0.3)
    x, _ = mva(z, d, np.array([200.0]), floor=s)
    assert x[0] == pytest.approx(1 / 0.1, rel=1e-3)


def test_copies_split_a_station_into_separate_networks():
    # one class of 6 customers at a station that stands for 3 copies (a server's NIC met only
    # by its own 2 GPUs): each copy sees 2 customers, so 3 networks of 2 side by side
    z, d = np.array([0.4]), np.array([[0.3]])
    apart, _ = mva(z, d, np.array([2.0]), copies=np.array([1.0]))  # the same iteration
    split, _ = mva(z, d, np.array([6.0]), copies=np.array([3.0]))
    assert split[0] == pytest.approx(3 * apart[0], rel=1e-9)
    whole, _ = mva(z, d, np.array([6.0]), copies=np.array([1.0]))
    assert whole[0] < split[0]  # one station for all 6 queues them more


def test_stations_crossed_together_cost_one_residence():
    # a transfer through two links of equal demand at once takes as long as through one
    z, d, n = np.array([0.4]), np.array([[0.3]]), np.array([4.0])
    one, _ = mva(z, d, n, copies=np.array([1.0]))
    both, _ = mva(z, np.array([[0.3], [0.3]]), n, copies=np.array([1.0, 1.0]),
                  together=np.array([0, 0]))
    apart, _ = mva(z, np.array([[0.3], [0.3]]), n, copies=np.array([1.0, 1.0]))
    assert both[0] == pytest.approx(one[0], rel=1e-9)
    assert apart[0] < both[0]  # visited one after another, the two add up


def test_a_transfer_takes_its_busier_stations_residence():
    # class 0 crosses a shared link and its own NIC at once; class 1 only the shared link.
    # Where the NIC is idle but slow, class 0's transfer lasts the NIC's visit
    z = np.array([0.5, 0.5])
    d = np.array([[0.1, 0.1], [0.4, 0.0]])
    x, r = mva(z, d, np.array([1.0, 3.0]), copies=np.array([1.0, 1.0]),
               together=np.array([0, 0]))
    assert r[0, 0] == r[1, 0] == pytest.approx(0.4)  # alone at its NIC
    assert x[0] == pytest.approx(1.0 / (0.5 + 0.4))
    assert r[1, 1] == 0.0 and r[0, 1] > 0.1  # class 1 never at the NIC, queues at the link


def test_labels_per_class_split_one_station_between_two_transfers():
    # one customer: no queueing, so a cycle is the think time plus, per transfer, its
    # longest station; station 0 is in class 0's first transfer and class 1's second
    z = np.array([0.2, 0.3])
    d = np.array([[0.1, 0.05], [0.3, 0.0], [0.0, 0.2]])
    labels = np.array([[0, 1], [1, 1], [0, 0]])
    x, _ = mva(z, d, np.array([1.0, 1.0]), copies=np.array([1.0, 1.0, 1.0]),
               together=labels)
    # class 0: transfer 0 = station 0 (0.1), transfer 1 = station 1 (0.3); class 1:
    # transfer 0 = station 2 (0.2), transfer 1 = station 0 (0.05); each sees the other once
    assert 1 / x[0] > 0.2 + 0.1 + 0.3 and 1 / x[1] > 0.3 + 0.2 + 0.05
    alone, _ = mva(z[:1], d[:, :1], np.array([1.0]), copies=np.array([1.0, 1.0, 1.0]),
                   together=labels[:, :1])
    assert 1 / alone[0] == pytest.approx(0.2 + 0.1 + 0.3)


def test_labels_per_class_count_a_flow_only_for_its_own_residence():
    # a customer held back at its slow own link (station 1) sits at the shared link
    # (station 0) only for its own visit there: the other class queues behind it less than
    # if it occupied the shared link for its whole transfer (max-min sharing)
    z = np.array([0.5, 0.5])
    d = np.array([[0.1, 0.1], [0.4, 0.0]])
    per_class, _ = mva(z, d, np.array([1.0, 3.0]), copies=np.array([1.0, 1.0]),
                       together=np.array([[0, 0], [0, 0]]))
    whole, _ = mva(z, d, np.array([1.0, 3.0]), copies=np.array([1.0, 1.0]),
                   together=np.array([0, 0]))
    assert per_class[0] == pytest.approx(whole[0], rel=1e-6)  # its own transfer: the NIC
    assert per_class[1] > whole[1]


def test_an_idle_station_crossed_together_changes_nothing_for_one_class():
    # a fast rack link beside the shard's: the transfer lasts the shard's residence, and the
    # exact recursion (not Bard-Schweitzer's fixed point, which moved such a job by 5%) gives
    # the network without that station
    z, n = np.array([0.05]), np.array([2.0])
    d = np.array([[0.5]])
    alone, _ = mva(z, d, n)
    with_link, _ = mva(z, np.array([[0.5], [0.001]]), n, copies=np.array([1.0, 1.0]),
                       together=np.array([0, 0]))
    assert with_link[0] == pytest.approx(alone[0], rel=1e-12)


def test_uniform_copies_of_one_class_are_exact():
    # 3 copies of 2 customers: three exact networks of 2 side by side
    z, d = np.array([0.4]), np.array([[0.3], [0.1]])
    pair, _ = mva(z, d, np.array([2.0]))
    split, _ = mva(z, d, np.array([6.0]), copies=np.array([3.0, 3.0]))
    assert split[0] == pytest.approx(3 * pair[0], rel=1e-12)


def test_classes_identical_but_in_name_are_one_class():
    # 2 + 1 customers of one kind listed as two classes: the same network as one class of 3
    # (before, Bard-Schweitzer's approximation for the pair, the exact recursion for one)
    z, d, f = np.array([0.2]), np.array([[0.3], [0.1]]), np.array([[0.15], [0.1]])
    one, r1 = mva(z, d, np.array([3.0]), floor=f)
    two, r2 = mva(np.array([0.2, 0.2]), np.hstack([d, d]), np.array([2.0, 1.0]),
                  floor=np.hstack([f, f]))
    assert two.sum() == pytest.approx(one[0], rel=1e-12)
    assert two[0] == pytest.approx(2 * two[1], rel=1e-12)  # per customer alike
    assert r2[:, 0] == pytest.approx(r1[:, 0]) and r2[:, 1] == pytest.approx(r1[:, 0])
    # classes that differ in anything stay apart
    apart, _ = mva(np.array([0.2, 0.21]), np.hstack([d, d]), np.array([2.0, 1.0]))
    assert apart.sum() != pytest.approx(one[0], rel=1e-9)

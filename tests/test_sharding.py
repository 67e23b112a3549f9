import numpy as np

from ddlperf.sharding import imbalance, shard_matrix

SIZES = np.array([10.0, 1.0, 10.0, 1.0])


def test_round_robin_by_variable():
    # tensor i on shard i mod 2: shard0 = 10 + 10, shard1 = 1 + 1
    assert shard_matrix(SIZES, 2, "round_robin").sum(axis=0).tolist() == [20, 2]


def test_greedy_balances_bytes():
    # 10→s0 (0,0); 1→s1 (10,0); 10→s1 (10,1); 1→s0 (10,11) → (11, 11)
    assert shard_matrix(SIZES, 2, "greedy").sum(axis=0).tolist() == [11, 11]


def test_even_slices_every_tensor():
    m = shard_matrix(SIZES, 4, "even")
    assert np.allclose(m, SIZES[:, None] / 4)
    assert imbalance(m) == 1.0


def test_imbalance():
    assert imbalance(shard_matrix(SIZES, 2, "round_robin")) == 20 / 11

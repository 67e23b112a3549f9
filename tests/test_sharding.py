import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4096, 2**20, 7_777_777]), min_size=1, max_size=120),
       st.integers(1, 12))
def test_greedy_takes_the_first_least_loaded_shard(sizes, shards):
    """TensorFlow's rule step by step (ties, frequent with equal sizes, go to the lowest
    index, as argmin does)."""
    expected = np.zeros((len(sizes), shards))
    load = np.zeros(shards)
    for i, size in enumerate(sizes):
        k = int(np.argmin(load))
        expected[i, k] = size
        load[k] += size
    assert np.array_equal(shard_matrix(np.array(sizes), shards, "greedy"), expected)

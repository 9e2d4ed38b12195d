"""Collectives: the ring and tree formulas against a direct count, the alpha-beta time on a tier, bus
bandwidth as nccl-tests defines it, and the tier a group crosses."""

import math

import numpy as np
import pytest

from roofline.core import collectives as col
from roofline.core import network
from roofline.core.policies import ZERO_STAGES


def ring_all_reduce(buffers):
    """Run a ring all-reduce (reduce-scatter then all-gather) on ``n`` numpy buffers, counting every byte
    each GPU sends and every step; returns (results, bytes sent per GPU, steps)."""
    n = len(buffers)
    chunks = [np.array_split(b.astype(float).copy(), n) for b in buffers]
    sent = [0] * n
    steps = 0
    for phase in ("reduce", "gather"):
        for s in range(n - 1):
            moves = []
            for i in range(n):  # GPU i sends one chunk to i+1
                c = (i - s) % n if phase == "reduce" else (i + 1 - s) % n
                moves.append((i, (i + 1) % n, c, chunks[i][c].copy()))
            for src, dst, c, data in moves:
                sent[src] += data.nbytes
                chunks[dst][c] = chunks[dst][c] + data if phase == "reduce" else data
            steps += 1
    return [np.concatenate(c) for c in chunks], sent, steps


def ring_gather(shares):
    """A ring all-gather of one share per GPU; bytes sent per GPU and steps."""
    n = len(shares)
    have = [{i: shares[i]} for i in range(n)]
    sent = [0] * n
    for s in range(n - 1):
        moves = [(i, (i + 1) % n, (i - s) % n) for i in range(n)]
        for src, dst, c in moves:
            sent[src] += have[src][c].nbytes
            have[dst][c] = have[src][c]
    return have, sent, n - 1


def tree_all_reduce_total(n, nbytes):
    """A binary tree: every GPU but the root sends its (partial) sum up once, and every GPU but the root
    receives the result once on the way down: the bytes sent by all GPUs together, and the tree's depth."""
    depth = math.ceil(math.log2(n)) if n > 1 else 0
    up = (n - 1) * nbytes
    down = (n - 1) * nbytes
    return up + down, depth


@pytest.mark.parametrize("n", range(1, 9))
def test_ring_all_reduce_matches_a_direct_count(n):
    rng = np.random.default_rng(n)
    buffers = [rng.standard_normal(8 * 840) for _ in range(n)]
    out, sent, steps = ring_all_reduce(buffers)
    for o in out:
        np.testing.assert_allclose(o, sum(buffers))
    size = buffers[0].nbytes
    assert sent == [pytest.approx(col.bytes_sent("all_reduce", n, size))] * n
    assert steps == col.latency_steps("all_reduce", n)
    if n > 1:
        assert col.bytes_sent("all_reduce", n, size) == pytest.approx(2 * (n - 1) / n * size)


@pytest.mark.parametrize("n", range(1, 9))
def test_reduce_scatter_and_all_gather_are_the_two_halves(n):
    size = 8 * 840 * 8
    shares = [np.full(840, i, dtype=float) for i in range(n)]
    have, sent, steps = ring_gather(shares)
    assert all(len(h) == n for h in have)
    gathered = sum(s.nbytes for s in shares)  # nccl-tests' size for all-gather: the whole output
    assert sent == [pytest.approx(col.bytes_sent("all_gather", n, gathered))] * n
    assert steps == col.latency_steps("all_gather", n) == col.latency_steps("reduce_scatter", n)
    both = col.bytes_sent("reduce_scatter", n, size) + col.bytes_sent("all_gather", n, size)
    assert both == pytest.approx(col.bytes_sent("all_reduce", n, size))


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_all_to_all_keeps_one_piece_and_sends_the_rest(n):
    size = 6e6
    pieces = [[size / n] * n for _ in range(n)]
    sent = [sum(p for j, p in enumerate(row) if j != i) for i, row in enumerate(pieces)]
    assert sent == [pytest.approx(col.bytes_sent("all_to_all", n, size))] * n
    assert col.bytes_sent("send_recv", n, size) == size and col.bytes_sent("send_recv", 1, size) == 0


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16, 1024])
def test_tree_sends_what_the_ring_sends_in_fewer_steps(n):
    total, depth = tree_all_reduce_total(n, 1e6)
    assert col.bytes_sent("all_reduce", n, 1e6, algorithm="tree") == pytest.approx(total / n)
    assert col.latency_steps("all_reduce", n, algorithm="tree") == 2 * depth
    assert col.latency_steps("all_reduce", n, algorithm="tree") <= col.latency_steps("all_reduce", n)


@pytest.mark.parametrize("name", list(col.COLLECTIVES))
@pytest.mark.parametrize("n", [2, 4, 8])
def test_a_perfect_collective_shows_the_links_rate_as_bus_bandwidth(name, n, h100):
    for tier in ("scale_up", "host", "network"):
        rate, _ = col.tier_link(h100, tier)
        cost = col.collective_cost(name, n, 8e9, h100, tier=tier, overhead=0)
        assert cost.busbw == pytest.approx(rate, rel=1e-3)  # the latency steps are all that is left
        assert col.bus_bandwidth(name, n, 8e9, cost.transfer) == pytest.approx(rate)
        assert col.algorithm_bandwidth(8e9, cost.transfer) == pytest.approx(rate / col.bus_factor(name, n))


def test_latency_dominates_tiny_messages_and_bandwidth_large_ones(h100):
    tiny = col.collective_cost("all_reduce", 8, 16e3, h100)
    assert tiny.latency > 10 * tiny.transfer
    assert tiny.latency == pytest.approx(col.BASE_LATENCY + 14 * col.LATENCY["scale_up"])
    big = col.collective_cost("all_reduce", 8, 1e9, h100)
    assert big.transfer > 100 * big.latency
    even = col.break_even_size("all_reduce", 8, h100)
    at = col.collective_cost("all_reduce", 8, even, h100)
    assert at.latency == pytest.approx(at.transfer)
    # across nodes the network's longer steps and slower ports push the break-even size up
    assert col.break_even_size("all_reduce", 64, h100) > even
    assert col.break_even_size("all_reduce", 1, h100) == float("inf")


def test_time_grows_with_size_and_group(h100):
    sizes = np.logspace(3, 10, 30)
    t = col.collective_time("all_reduce", 8, sizes, h100)
    assert np.all(np.diff(t) > 0)
    groups = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    for name in col.COLLECTIVES:
        t = col.collective_time(name, groups, 1e9, h100)
        assert np.all(np.diff(t) >= 0), name
        assert t[0] == 0


def test_arrays_agree_with_one_number_at_a_time(h100):
    groups = np.array([1, 2, 8, 16, 64])
    sizes = np.array([1e3, 1e6, 1e9])
    grid = col.collective_cost("reduce_scatter", groups[:, None], sizes[None, :], h100)
    assert np.shape(grid.time) == (5, 3)
    for i, n in enumerate(groups):
        for j, s in enumerate(sizes):
            one = col.collective_cost("reduce_scatter", int(n), float(s), h100)
            assert isinstance(one.time, float)
            assert grid.time[i, j] == pytest.approx(one.time)
            assert grid.network_bytes[i, j] == pytest.approx(one.network_bytes)


def test_the_tier_a_group_crosses(h100):
    inside = col.collective_cost("all_reduce", 8, 16e9, h100)
    assert inside.network_bytes == 0 and inside.tiers[0] == "scale_up"
    assert inside.transfer == pytest.approx(inside.scale_up_bytes / col.tier_link(h100, "scale_up")[0])


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_a_group_across_nodes_is_hierarchical(nodes, h100):
    g, size = 8, 16e9
    cost = col.collective_cost("all_reduce", g * nodes, size, h100, gpus_per_node=g)
    # NVLink carries the whole buffer inside the node; each GPU's port carries 1/g of it across nodes
    assert cost.scale_up_bytes == pytest.approx(2 * (g - 1) / g * size)
    assert cost.network_bytes == pytest.approx(2 * (nodes - 1) / nodes * size / g)
    nvlink, _ = col.tier_link(h100, "scale_up")
    ib, _ = col.tier_link(h100, "network")
    assert cost.transfer == pytest.approx(max(cost.scale_up_bytes / nvlink, cost.network_bytes / ib))
    # never faster than inside one node, far faster than a flat ring over every GPU's own port
    assert cost.time > col.collective_time("all_reduce", g, size, h100)
    flat = col.collective_cost("all_reduce", g * nodes, size, h100, tier="network")
    assert flat.time > 3 * cost.time
    assert flat.network_bytes == 0 and flat.scale_up_bytes == pytest.approx(col.bytes_sent("all_reduce", g * nodes, size))


def test_all_to_all_across_nodes_sends_the_far_pieces_over_the_network(h100):
    cost = col.collective_cost("all_to_all", 32, 4e9, h100)
    assert cost.network_bytes == pytest.approx(24 / 32 * 4e9)
    assert cost.bytes == pytest.approx(col.bytes_sent("all_to_all", 32, 4e9))


def test_zero_stages_run_collectives_that_add_up_to_the_seeds_count(llama):
    for stage, names in network.ZERO_COLLECTIVES.items():
        psi = 2 * llama.params
        total = sum(col.bytes_sent(name, 64, psi) for name in names)
        assert total == pytest.approx(ZERO_STAGES[stage].traffic * 63 / 64 * psi)
        assert network.data_parallel_bytes(llama.params, 64, zero_stage=stage) == pytest.approx(total)
    assert network.data_parallel_bytes(llama.params, 64) == col.bytes_sent("all_reduce", 64, 2 * llama.params)


@pytest.mark.parametrize("call, error, message", [
    (lambda: col.bytes_sent("allreduce", 8, 1e6), KeyError, "did you mean 'all_reduce'"),
    (lambda: col.bytes_sent("all_gather", 8, 1e6, algorithm="tree"), ValueError, "modelled for all_reduce only"),
    (lambda: col.bytes_sent("all_reduce", 8, 1e6, algorithm="star"), ValueError, "algorithm must be 'ring' or 'tree'"),
    (lambda: col.bytes_sent("all_reduce", 0, 1e6), ValueError, "n must be a whole number >= 1"),
    (lambda: col.bytes_sent("all_reduce", 8, -1), ValueError, "size must be"),
    (lambda: col.bytes_sent(3, 8, 1), TypeError, "collective must be a name"),
    (lambda: col.bytes_sent("all_reduce", [1, 2], [1, 2, 3]), ValueError, "do not broadcast together"),
    (lambda: col.collective_cost("all_reduce", 12, 1e6, "h100"), ValueError, "n must be at most gpus_per_node (8)"),
    (lambda: col.collective_cost("all_reduce", 16, 1e6, "h100-pcie"), ValueError, "needs 'network'"),
    (lambda: col.collective_cost("all_reduce", 8, 1e6, "h100", tier="nvlink"), KeyError, "unknown tier 'nvlink'"),
    (lambda: col.collective_cost("all_reduce", 8, 1e6, "h100", gpus_per_node=0), ValueError, "gpus_per_node must be"),
    (lambda: col.tier_link("h100-pcie", "network"), ValueError, "tier must be one of 'scale_up', 'host'"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call()


def test_latency_share_is_latency_over_time():
    from roofline.core import collectives as col

    c = col.collective_cost("all_reduce", 8, 64e3, "h100-sxm")
    assert col.latency_share(c) == pytest.approx(c.latency / (c.latency + c.transfer))
    big = col.collective_cost("all_reduce", 8, 8e9, "h100-sxm")
    assert col.latency_share(big) < 0.01 < col.latency_share(c)  # bytes dominate a big buffer, latency a small one
    assert col.latency_share(col.collective_cost("all_reduce", 1, 1e6, "h100-sxm")) == 0.0  # a group of one
    arr = col.latency_share(col.collective_cost("all_reduce", 8, [64e3, 8e9], "h100-sxm"))
    assert arr == pytest.approx([col.latency_share(c), col.latency_share(big)])
    with pytest.raises(TypeError, match="cost must be a CollectiveCost"):
        col.latency_share(1.0)


def test_break_even_size_times_scales_the_bucket_and_its_latency_share_falls_to_a_tenth():
    even = col.break_even_size("all_reduce", 256, "h100-sxm")
    nine = col.break_even_size("all_reduce", 256, "h100-sxm", times=9)
    assert nine == pytest.approx(9 * even)
    # at nine times the break-even size latency is one part in ten of the time (1 : 9 against the bytes)
    assert col.latency_share(col.collective_cost("all_reduce", 256, nine, "h100-sxm")) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="times"):
        col.break_even_size("all_reduce", 256, "h100-sxm", times=0)


def test_latency_bound_size_keeps_latency_to_the_share_asked():
    # chapter 7, exercise 3: a bucket whose all-reduce over 4 nodes of 8 H100s spends a tenth of its time waiting
    from roofline.core import collectives as c

    size = c.latency_bound_size("all_reduce", 32, "h100-sxm", 0.1)
    assert size == pytest.approx(9 * c.break_even_size("all_reduce", 32, "h100-sxm"))
    assert c.latency_share(c.collective_cost("all_reduce", 32, size, "h100-sxm")) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="share must be a single number strictly between 0 and 1"):
        c.latency_bound_size("all_reduce", 32, "h100-sxm", 1.0)

"""ASP on servers of several GPUs without local aggregation: analytic against simulate.

``PYTHONPATH=src:. python tools/compare_server_asp.py`` (from the repository root; about 10
minutes on 2 cores) predicts 160 clusters of a synthetic model (8 tensors of 1 MB) with both
methods, one JSON line each, then the mean and worst relative difference of analytic from
simulate. The grid: 2 or 4 GPUs per server, 1, 2 or 4 servers (at most 8 GPUs), 1 or 2 shards
at 400 Mbit or 2 Gbit, NICs at 200 Mbit or 1 Gbit, overlap on and off, 10 or 40 ms of forward
compute (docs/models.md, ASP: *GPUs of one server*).
"""

from __future__ import annotations

import itertools
import json

from tests.conftest import make_workload

from ddlperf.api import predict


def main() -> None:
    errors = []
    for gpus, servers, ps, ps_rate, nic, overlap, forward in itertools.product(
            [2, 4], [1, 2, 4], [1, 2], ["400Mbps", "2Gbps"], ["200Mbps", "1Gbps"],
            [True, False], [0.01, 0.04]):
        if servers * gpus > 8:
            continue
        workload = make_workload([(forward, 2 * forward, [1_000_000])] * 8,
                                 update_s_per_byte=5e-10)
        cluster = {"bandwidth": nic, "latency": "50us",
                   "nodes": {"count": servers, "gpus": gpus, "intra": "10Gbps"},
                   "ps": {"count": ps, "bandwidth": ps_rate}}
        row = dict(gpus=gpus, servers=servers, ps=ps, ps_rate=ps_rate, nic=nic,
                   overlap=overlap, forward_s=forward)
        for method in ("analytic", "simulate"):
            extra = {"iterations": 30} if method == "simulate" else {}
            row[method] = predict(workload=workload, cluster=cluster, sync="asp",
                                  method=method, overlap=overlap, **extra).iteration_time_s
        errors.append(100 * (row["analytic"] / row["simulate"] - 1))
        print(json.dumps(row), flush=True)
    print(f"analytic vs simulate over {len(errors)} clusters: mean |difference| "
          f"{sum(abs(e) for e in errors) / len(errors):.2f}%, worst {min(errors):+.1f}% "
          f"and {max(errors):+.1f}%")


if __name__ == "__main__":
    main()

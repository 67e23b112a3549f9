"""``python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S [lockstep]``: the step
timer that :func:`ddlperf.validate.calibration.quota_speeds` starts (one process per timed
copy); ``python -m ddlperf.validate comm-cpu RANK MASTER_IP PORT SIZES_JSON ROUNDS``: one side
of :func:`ddlperf.validate.comm_cpu.calibrate_comm_cpu`'s transfer."""

from __future__ import annotations

import sys

from ddlperf.validate.calibration import time_steps_main


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["comm-cpu"] and len(args) == 6:
        from ddlperf.validate.comm_cpu import comm_cpu_main

        comm_cpu_main(args[1:])
        return
    if args[:1] == ["time-steps"] and (len(args) == 5 or args[5:] == ["lockstep"]):
        time_steps_main(args[1:])
        return
    raise SystemExit("usage: python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S "
                     "[lockstep] | comm-cpu RANK MASTER_IP PORT SIZES_JSON ROUNDS")


if __name__ == "__main__":
    main()

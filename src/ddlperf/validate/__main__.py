"""``python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S [lockstep]``: the step
timer that :func:`ddlperf.validate.calibration.quota_speeds` starts (one process per timed
copy)."""

from __future__ import annotations

import sys

from ddlperf.validate.calibration import time_steps_main


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["time-steps"] and (len(args) == 5 or args[5:] == ["lockstep"]):
        time_steps_main(args[1:])
        return
    raise SystemExit("usage: python -m ddlperf.validate time-steps MODEL BATCH WARM_S WINDOW_S "
                     "[lockstep]")


if __name__ == "__main__":
    main()

"""Print the single-GPU check table: ``python tools/single_gpu_check.py [ROWS.yaml]``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, str(ROOT / "src"))
    from ddlperf.single_gpu_check import check_rows, summary

    results = check_rows(args[0] if args else ROOT / "scenarios" / "published_single_gpu.yaml")
    print(f"{'row':26} {'device':10} {'batch':>5} {'dtype':5} {'published':>9} "
          f"{'predicted':>9} {'error':>7}")
    for r in results:
        print(f"{r['id']:26} {r['device']:10} {r['batch']:5d} {r['dtype']:5} "
              f"{r['published']:9.1f} {r['predicted']:9.1f} {100 * r['error']:+6.1f}%")
    s = summary(results)
    print(f"median |error| {100 * s['median_abs_error']:.1f}%, "
          f"worst {100 * s['max_abs_error']:.1f}% over {len(results)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

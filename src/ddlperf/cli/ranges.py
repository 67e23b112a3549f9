"""Integer ranges on the command line: ``1..64``, ``1,2,4,8``, ``1..8,16,32``."""

from __future__ import annotations

from ddlperf.errors import InputError


def parse_counts(text: str, flag: str) -> list[int]:
    """Sorted distinct positive integers; one-line errors for empty, inverted or bad ranges."""
    values: set[int] = set()
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise InputError(flag, "is empty", "give a range such as 1..64 or a list such as 1,2,4")
    for part in parts:
        if not part:
            raise InputError(flag, f"{text!r} has an empty item", "e.g. 1..8,16,32")
        low, sep, high = part.partition("..")
        try:
            a = int(low)
            b = int(high) if sep else a
        except ValueError:
            raise InputError(flag, f"{part!r} is not a whole number or a range a..b",
                             "e.g. 1..64") from None
        if sep and b < a:
            raise InputError(flag, f"{part!r} is an inverted range", f"write {b}..{a}")
        if a < 1:
            raise InputError(flag, f"{part!r} starts below 1", "counts start at 1")
        values.update(range(a, b + 1))
    return sorted(values)

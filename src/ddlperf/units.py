"""Parse and format human units at the edges; inside, everything is bytes, seconds and bits/s.

Conventions (stated in the README too):
- bandwidth: bits per second. ``10Gbps`` = 10e9 bit/s (SI). ``1GB/s`` / ``1GBps`` = 8e9 bit/s.
  Binary prefixes (``Gibps``) are 2**30 based.
- sizes: bytes. ``25MB`` = 25e6 bytes (SI), ``25MiB`` = 25 * 2**20 bytes (IEC).
- durations: seconds. ``50us`` / ``50µs``, ``2ms``, ``1.5s``, ``3m``.
A bare number means the base unit (bit/s, bytes, seconds).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable

from ddlperf.errors import InputError

_NUMBER = r"(-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9, "t": 1e12, "T": 1e12}
_IEC = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}

_BANDWIDTH_RE = re.compile(
    rf"^\s*{_NUMBER}\s*([kKmMgGtT]i?)?\s*(bps|bit/s|bits/s|b/s|Bps|B/s|bit|b)?\s*$"
)
_SIZE_RE = re.compile(rf"^\s*{_NUMBER}\s*([kKmMgGtT]i?)?\s*(B|bytes?|b)?\s*$")
_DURATION_RE = re.compile(rf"^\s*{_NUMBER}\s*(ns|us|µs|μs|ms|s|sec|m|min|h)?\s*$")
_DURATION_SCALE = {
    None: 1.0,
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
}


def _prefix_scale(prefix: str | None) -> float:
    if not prefix:
        return 1.0
    if prefix.lower().endswith("i"):
        return _IEC[prefix.lower()]
    return _SI[prefix]


def _number(value: float, field: str, what: str, allow_zero: bool) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise InputError(field, f"{what} must be a finite number {bound}, got {value!r}")
    return float(value)


def parse_bandwidth(text: str | float | int, field: str = "bandwidth") -> float:
    """Return bits per second from ``10Gbps``, ``100Mbit``, ``1.25GB/s`` or a bare number."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(float(text), field, "bandwidth", allow_zero=False)
    match = _BANDWIDTH_RE.match(str(text))
    if not match:
        raise InputError(
            field, f"cannot read bandwidth {text!r}", "write it like 10Gbps, 100Mbps or 1.25GB/s"
        )
    value, prefix, unit = match.groups()
    scale = _prefix_scale(prefix)
    if unit in ("Bps", "B/s"):
        scale *= 8.0
    return _number(float(value) * scale, field, "bandwidth", allow_zero=False)


def parse_size(text: str | float | int, field: str = "size") -> float:
    """Return bytes from ``25MB`` (SI), ``25MiB`` (IEC) or a bare number of bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(float(text), field, "size", allow_zero=False)
    match = _SIZE_RE.match(str(text))
    if not match:
        raise InputError(field, f"cannot read size {text!r}", "write it like 25MB, 4MiB or 1e6")
    value, prefix, unit = match.groups()
    if unit == "b":
        raise InputError(field, f"{text!r} is in bits", "give sizes in bytes, e.g. 25MB")
    return _number(float(value) * _prefix_scale(prefix), field, "size", allow_zero=False)


def parse_duration(
    text: str | float | int, field: str = "duration", allow_zero: bool = True
) -> float:
    """Return seconds from ``50us``, ``2ms``, ``1.5s`` or a bare number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(float(text), field, "duration", allow_zero=allow_zero)
    match = _DURATION_RE.match(str(text))
    if not match:
        raise InputError(
            field, f"cannot read duration {text!r}", "write it like 50us, 2ms or 0.5s"
        )
    value, unit = match.groups()
    return _number(float(value) * _DURATION_SCALE[unit], field, "duration", allow_zero)


def _scaled(value: float, steps: list[tuple[float, str]], digits: int) -> str:
    for scale, suffix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{suffix}"
    scale, suffix = steps[-1]
    return f"{value / scale:.{digits}g}{suffix}"


def format_bandwidth(bits_per_s: float, digits: int = 4) -> str:
    """``1e10`` → ``10Gbps``."""
    steps = [(1e12, "Tbps"), (1e9, "Gbps"), (1e6, "Mbps"), (1e3, "kbps"), (1.0, "bps")]
    return _scaled(bits_per_s, steps, digits)


def format_size(n_bytes: float, digits: int = 4) -> str:
    """``25e6`` → ``25MB`` (SI, like the inputs)."""
    steps = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")]
    return _scaled(n_bytes, steps, digits)


def format_duration(seconds: float, digits: int = 4) -> str:
    """``0.00005`` → ``50us``."""
    if seconds == 0:
        return "0s"
    steps = [(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")]
    return _scaled(seconds, steps, digits)


def format_long_duration(seconds: float) -> str:
    """A job's length: ``28500`` → ``7h 55min``, ``1.131e6`` → ``13d 2h``; under a minute as
    :func:`format_duration`."""
    if seconds < 60:
        return format_duration(seconds)
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes}min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h" + (f" {minutes:02d}min" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{days}d" + (f" {hours}h" if hours else "")


def format_flops(flops: float, digits: int = 4) -> str:
    """``4.1e9`` → ``4.1GFLOP``."""
    steps = [(1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1.0, "FLOP")]
    return _scaled(flops, steps, digits)


# ------------------------------------------------------------------ plausibility

class ImplausibleValueWarning(UserWarning):
    """A value far outside what its field takes in practice: probably a unit mistake."""


# Base-unit ranges that real set-ups fall in; a value outside is most likely a number typed
# without its unit (``--bandwidth 10`` is 10 bit/s). Each: low, high, what the field is, the
# unit to suggest for a bare number, and how to show the parsed value.
PLAUSIBLE: dict[str, tuple[float, float, str, str, Callable[[float], str]]] = {
    "bandwidth": (1e6, 1e13, "a NIC line rate (1Mbps…10Tbps)", "Gbps", format_bandwidth),
    "latency": (0.0, 1.0, "a per-message latency (at most 1s)", "us", format_duration),
    "size": (1e3, 1e11, "a bucket size (1kB…100GB)", "MB", format_size),
}


def implausible(kind: str, value: float, text: object) -> str | None:
    """Why ``value`` (base units, as parsed from ``text``) is probably a mistake, or None.

    ``kind`` is a key of :data:`PLAUSIBLE`. A bare number gets a suggested unit.
    """
    low, high, what, unit, show = PLAUSIBLE[kind]
    if low <= value <= high:
        return None
    shown = show(value)
    message = f"{text} = {shown}, implausible for {what}"
    bare = isinstance(text, (int, float)) or re.fullmatch(_NUMBER, str(text).strip())
    if bare:
        message += f"; did you mean {text}{unit}?"
    return message


def warn_if_implausible(kind: str, value: float, text: object, field: str) -> None:
    """Warn (:class:`ImplausibleValueWarning`; the CLI prints one ``warning:`` line on stderr)
    when ``value`` is implausible for its field; base units are kept either way."""
    message = implausible(kind, value, text)
    if message is not None:
        warnings.warn(f"{field} {message}", ImplausibleValueWarning, stacklevel=3)

"""Turn pydantic validation errors into one line that names the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ddlperf.errors import InputError

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[Any, ...], prefix: str = "") -> str:
    """``("layers", 3, "forward_s")`` → ``layers[3].forward_s``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or prefix or "input"


def input_error_from(exc: ValidationError, prefix: str = "") -> InputError:
    """The first pydantic error as an :class:`InputError` (one line is what users read)."""
    err = exc.errors()[0]
    inner = (err.get("ctx") or {}).get("error")
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    got = err.get("input")
    if isinstance(inner, InputError):
        # a model-level check names its own field; a field-level one gets the full path
        return InputError(field_path(loc, prefix) if loc else inner.field, inner.problem,
                          inner.fix)
    if err["type"] == "missing":
        return InputError(field_path(loc, prefix), "is required", "add it")
    if err["type"] == "extra_forbidden":
        return InputError(field_path(loc, prefix), "is not a known field", "remove or rename it")
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
    return InputError(field_path(loc, prefix), f"{message}{shown}")


def validate(model: type[M], data: Any, prefix: str = "") -> M:
    """``model.model_validate`` with :class:`InputError` instead of a multi-line report."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise input_error_from(exc, prefix) from None


def read_structured(path: str | Path, field: str) -> Any:
    """Load a JSON or YAML file (by suffix; YAML also reads JSON) or explain in one line."""
    p = Path(path)
    if not p.exists():
        raise InputError(field, f"file {str(p)!r} does not exist", "check the path")
    if p.is_dir():
        raise InputError(field, f"{str(p)!r} is a directory", "give a file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(field, f"cannot read {str(p)!r}: {exc}") from None
    try:
        if p.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            field, f"{p.name} is not valid JSON (line {exc.lineno}, column {exc.colno})",
            "fix the syntax",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(field, f"{p.name} is not valid YAML{where}", "fix the syntax") from None

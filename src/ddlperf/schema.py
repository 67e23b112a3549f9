"""Turn pydantic validation errors into one line that names the field and the fix."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any, TypeVar

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


# pydantic error types → our wording (``ctx`` holds the bound).
_PROBLEMS = {
    "too_short": "needs at least {min_length} entr{plural}",
    "greater_than": "must be > {gt}", "greater_than_equal": "must be ≥ {ge}",
    "less_than": "must be < {lt}", "less_than_equal": "must be ≤ {le}",
    "finite_number": "must be a finite number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "int_type": "must be a whole number",
    "float_parsing": "must be a number", "float_type": "must be a number",
    "bool_parsing": "must be true or false", "bool_type": "must be true or false",
    "string_type": "must be text", "dict_type": "must be a mapping",
    "model_type": "must be a mapping", "list_type": "must be a list",
    "tuple_type": "must be a list", "literal_error": "must be one of {expected}",
}


def _problem(err: dict[str, Any]) -> str:
    """One error in our words; a NaN is called what it is whatever bound it broke."""
    got = err.get("input")
    if isinstance(got, float) and got != got:
        return "must be a finite number (got nan)"
    template = _PROBLEMS.get(err["type"])
    ctx = dict(err.get("ctx") or {})
    if template is None:
        message = str(err["msg"]).removeprefix("Value error, ")
        problem = message[:1].lower() + message[1:]
    else:
        ctx.setdefault("plural", "y" if ctx.get("min_length") == 1 else "ies")
        problem = template.format(**ctx)
    shown = "" if isinstance(got, (dict, list, tuple)) or got is None else f" (got {got!r})"
    return problem + shown


def field_names(model: type[BaseModel]) -> set[str]:
    """Every field name of ``model`` and of the models nested in it (for typo hints)."""
    names: set[str] = set()
    todo: list[Any] = [model]
    while todo:
        current = todo.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            for name, info in current.model_fields.items():
                if name not in names:
                    names.add(name)
                    todo.append(info.annotation)
        else:
            todo.extend(getattr(current, "__args__", ()))
    return names


def input_error_from(exc: ValidationError, prefix: str = "",
                     known: set[str] | None = None) -> InputError:
    """The first pydantic error as an :class:`InputError` (one line is what users read).

    An unknown key names the known one it most resembles (from ``known``); a missing key that
    is present under a misspelt name is reported as that typo.
    """
    errors = exc.errors()
    extras = [e for e in errors if e["type"] == "extra_forbidden"]
    err = errors[0]
    if err["type"] == "missing" and extras:
        # `workres: 4` says 'workers is required' first; the typo is the better answer
        missing = str(err["loc"][-1])
        typo = next((e for e in extras if difflib.get_close_matches(
            str(e["loc"][-1]), [missing], n=1)), None)
        if typo is not None:
            err = typo
    inner = (err.get("ctx") or {}).get("error")
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    if isinstance(inner, InputError):
        # a model-level check names its own field; a field-level one gets the full path
        return InputError(field_path(loc, prefix) if loc else inner.field, inner.problem,
                          inner.fix)
    if err["type"] == "missing":
        return InputError(field_path(loc, prefix), "is required", "add it")
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), sorted(known or ()), n=1)
        fix = f"did you mean '{close[0]}'?" if close else "remove or rename it"
        return InputError(field_path(loc, prefix), "is not a known field", fix)
    return InputError(field_path(loc, prefix), _problem(err))


def validate(model: type[M], data: Any, prefix: str = "") -> M:
    """``model.model_validate`` with :class:`InputError` instead of a multi-line report."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise input_error_from(exc, prefix, field_names(model)) from None


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
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except json.JSONDecodeError as exc:
            raise InputError(
                field, f"{p.name} is not valid JSON (line {exc.lineno}, column {exc.colno})",
                "fix the syntax",
            ) from None
        except _DuplicateKey as exc:
            raise InputError(field, f"{p.name} gives key {exc.args[0]!r} twice in one object",
                             "keep one of them") from None
    import yaml  # PyYAML loads only for YAML files (it is ~20 ms of start-up otherwise)

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", "") or ""
        if problem.startswith("duplicate key"):
            raise InputError(field, f"{p.name} gives {problem[len('duplicate '):]} twice in "
                             f"one mapping{where}", "keep one of them") from None
        raise InputError(field, f"{p.name} is not valid YAML{where}", "fix the syntax") from None


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (json keeps the last of two silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _unique_key_loader() -> Any:
    """PyYAML's SafeLoader refusing a key given twice in one mapping (it keeps the last one
    silently: ``workers: 4`` then ``workers: 8`` ran 8); keys a merge (``<<``) brings in may
    still be overridden, as YAML means them to be."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def load_named_file(path: str | Path, field: str, model: type[M], list_key: str,
                    shape: str) -> M:
    """Read a YAML/JSON file into ``model``; a problem is one InputError that starts with the
    file name and names an item of ``list_key`` by its ``name`` (``scenarios[3] (ps-asp).arch``).
    ``shape`` says what the top level must hold."""
    raw = read_structured(path, field)
    name = Path(path).name
    if not isinstance(raw, dict):
        raise InputError(field, f"{name} must be a mapping with {shape}",
                         "see the shipped files under scenarios/")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = input_error_from(exc)
        where = err.field
        items = raw.get(list_key)
        match = re.match(rf"^{list_key}\[(\d+)\]", where)
        if match and isinstance(items, list):
            index = int(match.group(1))
            if index < len(items) and isinstance(items[index], dict) and items[index].get("name"):
                where = where.replace(match.group(0),
                                      f"{match.group(0)} ({items[index]['name']})", 1)
        raise InputError(f"{name}: {where}", err.problem, err.fix) from None

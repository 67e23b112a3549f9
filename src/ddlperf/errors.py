"""User-facing errors: one line that names the field and the fix.

The CLI turns any :class:`InputError` into that single line and exit status 2, so library code
raises it for every problem a user can cause (bad flag, bad file, impossible cluster) and never
for programming errors.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: ``field`` names what is wrong, ``fix`` says what to do."""

    def __init__(self, field: str, problem: str, fix: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" — {fix}"
        super().__init__(message)


class MissingExtraError(InputError):
    """An optional dependency (for example torch) is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        super().__init__(
            what,
            f"needs the '{module}' package, which is not installed",
            f"install the extra: pip install 'ddlperf[{extra}]'",
        )

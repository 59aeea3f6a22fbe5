"""The envelope every command returns: text for people, one JSON object for scripts.

A `Result` is what a command did (or why it failed): its exit code, a verdict line, an
optional body printed before the verdict (dry-run's diff, selftest's report), the data of
its ``--json`` object and, for a failure, the ``error`` object (kind, message, reason).
The CLI prints it and exits with its code; tests call the commands and read it directly.

Every ``--json`` object, result or error, starts with the same five keys: ``schema_version``,
``command``, ``ok`` (exit code 0), ``exit_code`` and ``message`` (the verdict); a non-zero exit
adds ``error`` (``kind``, ``message``, ``reason`` where there is one). Every string is valid
Unicode: one holding a path's undecodable bytes is escaped (`json_text.escape`) and its place
listed in ``escaped_strings``, last. The shipped JSON Schema
``ple4patch/schema/output.schema.json`` describes the envelope and each command's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import json_text
from .errors import EXIT_OK, EXIT_USAGE, Ple4Error

JSON_SCHEMA_VERSION = 1


def _kind_of_exit(code: int) -> str:
    """The error kind of an exit code: that of the first error class that exits with it."""
    todo = list(Ple4Error.__subclasses__())
    while todo:
        cls = todo.pop(0)
        if cls.exit_code == code:
            return cls.kind
        todo.extend(cls.__subclasses__())
    return Ple4Error.kind


def error_object(err: Ple4Error) -> dict:
    """The ``error`` member of every command's JSON: kind, message and (engine) reason."""
    error = {"kind": err.kind, "message": str(err)}
    reason = getattr(err, "reason", None)
    if reason:
        error["reason"] = reason
    return error


@dataclass
class Result:
    """What a command did: text for people, data for --json, and the exit code."""

    command: str
    exit_code: int
    message: str  # the verdict: the last line printed
    data: dict = field(default_factory=dict)
    output: str = ""  # the body: text printed before the message (dry-run's diff)
    error: dict | None = None  # a failure's error object: the JSON is then the error envelope

    @classmethod
    def failure(cls, command: str, err: Ple4Error) -> "Result":
        """The envelope of a command that stopped with `err` (its message is the error's)."""
        return cls(command, err.exit_code, str(err), error=error_object(err))

    @classmethod
    def stopped(cls, command: str, exit_code: int, kind: str, message: str) -> "Result":
        """The envelope of a command that did not finish for another reason (Ctrl-C, a bug)."""
        return cls(command, exit_code, message, error={"kind": kind, "message": message})

    @classmethod
    def usage(cls, command: str | None, message: str) -> "Result":
        """The envelope of a bad command line (click's usage errors): exit 2."""
        return cls(command, EXIT_USAGE, message, error={"kind": "usage", "message": message})  # type: ignore[arg-type]

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    def to_json(self) -> dict:
        """The one JSON object: the envelope's five keys, the command's data, then ``error``
        (a non-zero exit always has one: its kind follows from the exit code when the
        command did not give it); every string valid Unicode, those escaped listed last
        (``escaped_strings``: JSON Pointers, `json_text`)."""
        head = {
            "schema_version": JSON_SCHEMA_VERSION,
            "command": self.command,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "message": self.message,
        }
        out = {**head, **{k: v for k, v in self.data.items() if k not in head}}
        error = self.error if self.error is not None else self.data.get("error")
        if error is None and not self.ok:
            error = {"kind": _kind_of_exit(self.exit_code), "message": self.message}
        if error is not None:
            out["error"] = error
        safe, escaped = json_text.escape(out)
        if escaped:
            safe["escaped_strings"] = escaped  # type: ignore[index]
        return safe  # type: ignore[return-value]

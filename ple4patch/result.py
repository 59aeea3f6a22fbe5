"""The envelope every command returns: text for people, one JSON object for scripts.

A `Result` is what a command did (or why it failed): its exit code, a verdict line, an
optional body printed before the verdict (dry-run's diff, selftest's report), the data of
its ``--json`` object and, for a failure, the ``error`` object (kind, message, reason).
The CLI prints it and exits with its code; tests call the commands and read it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import EXIT_OK, Ple4Error

JSON_SCHEMA_VERSION = 1


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

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    def to_json(self) -> dict:
        head = {
            "schema_version": JSON_SCHEMA_VERSION,
            "command": self.command,
            "ok": self.ok,
            "exit_code": self.exit_code,
        }
        if self.error is not None:
            return {**head, "error": self.error}
        return {**head, "message": self.message, **self.data}

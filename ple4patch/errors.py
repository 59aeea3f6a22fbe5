"""Error types of ple4patch, each with the exit code the CLI maps it to.

Every error carries a one-line message that says what was wrong and what the
user can do next. The CLI prints ``str(error)`` and exits with ``error.exit_code``.
"""

from __future__ import annotations

# Exit codes (documented in README.md; contracts for scripts and hooks).
EXIT_OK = 0  # done, or nothing to do
EXIT_INTERNAL = 1  # a bug in ple4patch: please report it
EXIT_USAGE = 2  # bad command line (click's own code)
EXIT_ENGINE_NOT_FOUND = 3  # no venv, no 1cat-vllm, upstream vllm, editable, target missing...
EXIT_UNPINNED = 4  # as shipped but not in the manifest: review with --dry-run, then --allow-unknown
EXIT_MODIFIED = 5  # modified or foreign file (matches neither RECORD nor the manifest), backup conflict
EXIT_LOCK_TIMEOUT = 6  # another ple4patch holds the venv lock
EXIT_NOT_WRITABLE = 7  # cannot write beside the target (permissions, read-only fs, disk full)
EXIT_VERIFY_FAILED = 8  # verify: target or backup is not what it must be
EXIT_SELFTEST_FAILED = 9  # selftest: kernel did not compile or was not bit-exact; torch/triton missing
EXIT_CHECKPOINT = 10  # inspect: the checkpoint will not load as it is
EXIT_STALE_BYTECODE = 11  # written, but an unchecked-hash pyc of the old bytes stays: Python would run it
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): stopped; every file is whole (pristine or patched)


class Ple4Error(Exception):
    """Base of all errors a user can act on."""

    exit_code = EXIT_INTERNAL
    kind = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # one line, always
        return " ".join(self.message.split("\n"))


class UsageError(Ple4Error):
    exit_code = EXIT_USAGE
    kind = "usage"


class EngineNotFound(Ple4Error):
    exit_code = EXIT_ENGINE_NOT_FOUND
    kind = "engine_not_found"


class VenvNotFound(EngineNotFound):
    """No venv at the path a command that needs only a Python (selftest) was given: it looks
    for no engine, so its kind says what is missing (the exit code is engine-not-found's)."""

    kind = "venv_not_found"


class UnpinnedFile(Ple4Error):
    exit_code = EXIT_UNPINNED
    kind = "unpinned"


class ModifiedFile(Ple4Error):
    exit_code = EXIT_MODIFIED
    kind = "modified"


class ChangedDuringRun(ModifiedFile):
    """A file of the set was written by another program (pip, an editor) between the moment
    ple4patch read it and the moment it would have replaced it: what this run wrote is taken
    back, nothing of the other program's write is lost, and the command can simply run again."""


class LockTimeout(Ple4Error):
    exit_code = EXIT_LOCK_TIMEOUT
    kind = "lock_timeout"


class NotWritable(Ple4Error):
    exit_code = EXIT_NOT_WRITABLE
    kind = "not_writable"


class VerifyFailed(Ple4Error):
    exit_code = EXIT_VERIFY_FAILED
    kind = "verify_failed"


class SelftestFailed(Ple4Error):
    exit_code = EXIT_SELFTEST_FAILED
    kind = "selftest_failed"


class CheckpointProblem(Ple4Error):
    exit_code = EXIT_CHECKPOINT
    kind = "checkpoint"


class StaleBytecode(Ple4Error):
    """The target holds its new bytes, but an unchecked-hash pyc of its old bytes could not be
    removed: the interpreter would run that pyc (the old code) instead of the file."""

    exit_code = EXIT_STALE_BYTECODE
    kind = "stale_bytecode"


class TransformError(ModifiedFile):
    """A libcst transform could not find its anchor (or found it more than once).

    The target is then something this patch does not know how to change: nothing is written,
    and it exits as a modified/foreign file does (5), with its own kind. `in_file` names the file.
    """

    exit_code = EXIT_MODIFIED
    kind = "transform"

    def __init__(self, anchor: str, detail: str) -> None:
        super().__init__(f"anchor {anchor!r}: {detail}")
        self.anchor = anchor
        self.detail = detail

    def in_file(self, path: str) -> "TransformError":
        """This failure as the refusal of the file at `path`: the file named, nothing written."""
        err = TransformError(self.anchor, self.detail)
        err.message = (f"the patch does not fit {path}: {self}; nothing written (this engine file has a "
                       f"shape ple4patch does not know)")
        return err

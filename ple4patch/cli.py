"""The `ple4patch` command line: a thin layer over `ple4patch.commands`.

Each command parses its options, calls one command's `run`, prints text (or one JSON
object with `--json`) and exits with its code; a `Ple4Error` exits
with its own code, anything unexpected with EXIT_INTERNAL and a request to
report it. To add a command::

    @main.command()
    @venv_argument
    @json_option
    def mycommand(venv, as_json):
        \"\"\"One line of help.\"\"\"
        run_command("mycommand", as_json, lambda: commands.mycommand.run(venv))

Shell completion (click): `eval "$(_PLE4PATCH_COMPLETE=bash_source ple4patch)"`
(zsh: `zsh_source`, fish: `fish_source`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from typing import Callable

import click

from . import __version__, commands
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, Ple4Error
from .result import Result

DEBUG_ENV = "PLE4PATCH_DEBUG"

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (with schema_version) instead of text."
)
venv_argument = click.argument("venv", required=False, metavar="[VENV]")


def _printable_streams() -> None:
    """Paths are bytes: one the output encoding cannot represent (non-UTF-8 bytes, a C locale)
    is written as its own bytes (UTF-8 streams) or escaped, never a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        utf8 = (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8"
        with contextlib.suppress(Exception):
            reconfigure(errors="surrogateescape" if utf8 else "backslashreplace")


def _emit(result: Result, as_json: bool, error_line: str | None = None) -> None:
    """Print `result` (one JSON object, or its body and verdict; a failure's one line on
    stderr) and exit with its code. A closed stdout, a broken pipe or a full disk under the
    output changes nothing: the action happened, its exit code stands, nothing more is said."""
    _printable_streams()
    try:
        if as_json:
            click.echo(json.dumps(result.to_json(), indent=2, sort_keys=False))
        elif error_line is not None:
            click.echo(error_line, err=True)
        else:
            if result.output:
                click.echo(result.output, nl=False)
            click.echo(result.message)
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except OSError:  # EPIPE, EBADF, ENOSPC on the output: the result stands
        _silence_output()
    sys.exit(result.exit_code)


def _silence_output() -> None:
    """Point stdout/stderr at /dev/null so that the interpreter's last flush cannot fail."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)


def run_command(command: str, as_json: bool, thunk: Callable[[], Result]) -> None:
    """Call `thunk`, print its Result (text or JSON) and exit with its code."""
    try:
        result = thunk()
    except KeyboardInterrupt:  # Ctrl-C: the writes are atomic and a half-done apply takes itself back
        msg = (
            f"interrupted (Ctrl-C); every file ple4patch writes is whole (pristine or patched): "
            f"run `ple4patch status` to see which, and run `ple4patch {command}` again to finish"
        )
        _emit(Result.stopped(command, EXIT_INTERRUPTED, "interrupted", msg), as_json, f"ple4patch {command}: {msg}")
    except Ple4Error as err:
        _emit(Result.failure(command, err), as_json, f"ple4patch {command}: error: {err}")
    except Exception as exc:  # a bug: say so, ask for a report
        msg = (
            f"internal error in ple4patch {__version__} ({type(exc).__name__}: {exc}); nothing more "
            f"was written. Please report it with the output of `ple4patch status --json` "
            f"(set {DEBUG_ENV}=1 for a traceback)"
        )
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        _emit(Result.stopped(command, EXIT_INTERNAL, "internal", msg), as_json, f"ple4patch {command}: {msg}")
    else:
        _emit(result, as_json)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ple4patch")
def main() -> None:
    """Patch an installed 1Cat-vLLM to read the NVFP4 row-packed PLE table (V100).

    VENV is the engine's virtual environment (default: $VIRTUAL_ENV, else the
    prefix of the Python running ple4patch). Exit codes: 0 done or nothing to
    do, 1 internal error, 2 usage, 3 engine not found, 4 unpinned file,
    5 modified/foreign file, 6 lock timeout, 7 not writable, 8 verify failed,
    9 selftest failed, 10 checkpoint will not load, 11 written but a stale
    unchecked-hash pyc would run instead, 130 interrupted (Ctrl-C).
    """


@main.command()
@venv_argument
@click.option("--dry-run", is_flag=True, help="Print the unified diff; write nothing.")
@click.option(
    "--allow-unknown",
    is_flag=True,
    help="Patch a file that is as shipped (matches RECORD) but not pinned; records a local pin.",
)
@json_option
def apply(venv: str | None, dry_run: bool, allow_unknown: bool, as_json: bool) -> None:
    """Patch the engine's ple_layer.py (idempotent; writes a .bak-pre-ple4 backup)."""
    run_command("apply", as_json, lambda: commands.apply.run(venv, dry_run=dry_run, allow_unknown=allow_unknown))


@main.command()
@venv_argument
@json_option
def status(venv: str | None, as_json: bool) -> None:
    """Show the state, engine version, hashes and backup (fast; imports no engine)."""
    run_command("status", as_json, lambda: commands.status.run(venv))


@main.command()
@venv_argument
@json_option
def verify(venv: str | None, as_json: bool) -> None:
    """Exit 0 only if the target is the exact patched output and the backup restores it."""
    run_command("verify", as_json, lambda: commands.verify.run(venv))


@main.command()
@venv_argument
@click.option("--clean", is_flag=True, help="Also remove a stale backup left by another engine version.")
@json_option
def revert(venv: str | None, clean: bool, as_json: bool) -> None:
    """Restore the pristine file from the backup and remove the backup."""
    run_command("revert", as_json, lambda: commands.revert.run(venv, clean=clean))


@main.command()
@click.argument("venv", required=False, metavar="[VENV]")
@click.option("--arch", default="sm_70", show_default=True, help="GPU architecture to compile the kernel for.")
@json_option
def selftest(venv: str | None, arch: str, as_json: bool) -> None:
    """Compile the NVFP4 gather for --arch and check it bit for bit (on the GPU if present).

    Uses VENV's own Python, torch and Triton (default: the Python running ple4patch).
    Exit 9 if it does not compile, is not bit-exact, or torch/Triton are missing.
    """
    from .commands import selftest as selftest_command

    run_command("selftest", as_json, lambda: selftest_command.run(venv, arch))


@main.command("inspect")
@click.argument("checkpoint", metavar="CHECKPOINT_DIR")
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tensor-parallel size: each rank pins 1/TP of the table's rows.")
@click.option("--ranks-per-host", type=click.IntRange(min=1), default=None,
              help="TP ranks sharing this host's memory (default: all of them).")
@click.option("--venv", default=None, help="Also check that this venv's engine is patched and reads the layout.")
@click.option("--scan", is_flag=True, help="Also read the PLE data: NaN/negative block scales, bad global scales.")
@click.option("--host-budget-gib", type=click.FloatRange(min=0), default=None,
              help="Pinned-host budget per rank in GiB (default: $VLLM_QWEN4EXP_PLE_HOST_GIB): rows past it go "
              "to VRAM; 0 puts every row in VRAM.")
@json_option
def inspect_(checkpoint: str, tp: int, ranks_per_host: int | None, venv: str | None, scan: bool,
             host_budget_gib: float | None, as_json: bool) -> None:
    """Will CHECKPOINT_DIR load with the patched engine, and what will each rank pin?

    Reads config.json and the safetensors headers only (seconds); --scan streams
    the PLE data too. Exit 10 if the checkpoint will not load as it is.
    """
    from .ckpt import inspect as ckpt_inspect

    run_command("inspect", as_json, lambda: ckpt_inspect.run(
        checkpoint, tp=tp, ranks_per_host=ranks_per_host, venv=venv, scan=scan, host_budget_gib=host_budget_gib))


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="ple4patch")

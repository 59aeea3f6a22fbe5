"""The `ple4patch` command line: a thin layer over `ple4patch.commands`.

Each command parses its options, calls one command's `run`, prints text (or one JSON
object with `--json`) and exits with its code; a `Ple4Error` exits with its own code,
anything unexpected with EXIT_INTERNAL and a request to report it, a bad command line with
2 (with `--json`: the same JSON envelope as every other error). `--help` lists the commands
in the order they are used. To add a command::

    @main.command()
    @venv_argument
    @json_option
    def mycommand(venv, as_json):
        \"\"\"One line of help (at most 60 characters).\"\"\"
        run_command("mycommand", as_json, lambda: commands.mycommand.run(venv))

Shell completion (click; VENV and CHECKPOINT_DIR complete as directories):
`eval "$(_PLE4PATCH_COMPLETE=bash_source ple4patch)"` (zsh: `zsh_source`, fish: `fish_source`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from typing import Callable

import click
from click.shell_completion import CompletionItem

from . import __version__, columns, commands, render, shell, terminal
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, Ple4Error
from .result import Result
from .sentinel import PATCH_ID

DEBUG_ENV = "PLE4PATCH_DEBUG"


class DirectoryPath(click.Path):
    """A directory argument (a venv, a checkpoint): completes as a directory path. Whether it
    exists and is what it must be is the command's to check, with its own exit code."""

    name = "directory"

    def __init__(self) -> None:
        super().__init__(path_type=str)

    def shell_complete(self, ctx, param, incomplete):  # noqa: ANN001 - click's signature
        return [CompletionItem(incomplete, type="dir")]


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (schema: ple4patch/schema) instead of text."
)
verbose_option = click.option("-v", "--verbose", is_flag=True, help="Show hashes in full (64 hex digits).")
venv_argument = click.argument("venv", required=False, metavar="[VENV]", type=DirectoryPath())


def _for_people(text: str, verbose: bool) -> str:
    """Text for people: hashes short and files relative to site-packages unless --verbose (full
    in --json), every line within 100 columns, a suggested command continued shell-style."""
    return columns.for_people(text if verbose else render.short_hashes(text), verbose)


def _text(result: Result, verbose: bool) -> str:
    """The verdict for people (`_for_people`)."""
    return _for_people(result.message, verbose)


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


def _emit(result: Result, as_json: bool, error_line: str | None = None, verbose: bool = False,
          show: Callable[[Result], None] | None = None) -> None:
    """Print `result` (one JSON object, `show(result)` when given, or its body and verdict; a
    failure's one line on stderr) and exit with its code. A closed stdout, a broken pipe or a
    full disk under the output changes nothing: the action happened, its exit code stands,
    nothing more is said."""
    _printable_streams()
    try:
        if as_json:
            click.echo(json.dumps(result.to_json(), indent=2, sort_keys=False))
        elif error_line is not None:
            click.echo(_for_people(error_line, verbose), err=True)
        elif show is not None:
            show(result)
        elif result.output:  # a report's body (status, selftest, inspect), then its verdict: one text
            click.echo(_for_people(result.output + result.message, verbose))
        else:
            click.echo(_text(result, verbose))
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


def run_command(command: str, as_json: bool, thunk: Callable[[], Result], *, verbose: bool = False,
                show: Callable[[Result], None] | None = None) -> None:
    """Call `thunk`, print its Result (text, `show` when given, or JSON) and exit with its code."""
    try:
        result = thunk()
    except KeyboardInterrupt:  # Ctrl-C: the writes are atomic and a half-done apply takes itself back
        ctx = click.get_current_context(silent=True)
        venv = ctx.params.get("venv") if ctx is not None else None
        where = [venv] if venv else []
        msg = (
            f"interrupted (Ctrl-C); every file ple4patch writes is whole (pristine or patched): "
            f"run `{shell.ple4patch('status', *where)}` to see which, and run "
            f"`{shell.ple4patch(command, *where)}` again to finish"
        )
        _emit(Result.stopped(command, EXIT_INTERRUPTED, "interrupted", msg), as_json, f"ple4patch {command}: {msg}")
    except Ple4Error as err:
        _emit(Result.failure(command, err), as_json, f"ple4patch {command}: error: {err}", verbose)
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
        _emit(result, as_json, verbose=verbose, show=show)


def _wants_json(args: list[str]) -> bool:
    return "--json" in (args[: args.index("--")] if "--" in args else args)


class Commands(click.Group):
    """The command group: commands listed in the order they are defined (the order of use),
    and a bad command line given with `--json` answered with the JSON error envelope."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: ANN001
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or not _wants_json(argv):
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            _emit(self._usage_result(exc, argv), True)
        except click.Abort:
            msg = "interrupted (Ctrl-C) while reading the command line; nothing was done"
            _emit(Result.stopped(self._command_in(argv), EXIT_INTERRUPTED, "interrupted", msg), True)
        sys.exit(rv if isinstance(rv, int) else 0)

    def _command_in(self, argv: list[str]) -> str | None:
        return next((a for a in argv if a in self.commands), None)

    def _usage_result(self, exc: click.ClickException, argv: list[str]) -> Result:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command.name if ctx is not None and ctx.command is not self else self._command_in(argv)
        where = f"ple4patch {command}" if command else "ple4patch"
        result = Result.usage(command, f"{where}: {exc.format_message()} (see `{where} --help`)")
        result.exit_code = exc.exit_code if exc.exit_code else EXIT_USAGE
        return result


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ple4patch", message=f"%(prog)s, version %(version)s (writes patch id {PATCH_ID})")
def main() -> None:
    """Patch an installed 1Cat-vLLM to read the NVFP4 row-packed PLE table (V100).

    VENV is the engine's virtual environment, the directory holding bin/python (default:
    $VIRTUAL_ENV, else the prefix of the Python running ple4patch). Usual order: apply
    --dry-run, apply, verify; inspect a checkpoint before serving it. Exit codes: 0 done or
    nothing to do, 1 internal error, 2 usage, 3 engine not found, 4 unpinned file,
    5 modified/foreign file, 6 lock timeout, 7 not writable, 8 verify failed,
    9 selftest failed, 10 checkpoint will not load (or start), 11 written but a stale
    unchecked-hash pyc would run instead, 130 interrupted (Ctrl-C).
    """


def _show_dry_run(stat: bool, pager: bool, verbose: bool) -> Callable[[Result], None]:
    """A dry run for people: `--stat` the summary alone; on a terminal the summary, then the
    diff (coloured unless NO_COLOR, paged when longer than the screen); piped, the plain
    unified diff and the verdict."""

    def show(result: Result) -> None:
        diff = result.data.get("diff", "")
        verdict = _text(result, verbose)
        summary = render.stat_text(result.data.get("regions") or render.diff_regions(diff))
        if stat:
            click.echo(summary + "\n" + verdict)
        elif terminal.is_tty():
            body = terminal.colour_diff(diff) if terminal.colour_wanted() else diff
            terminal.show(f"{summary}\n{verdict}\n\n{body}{verdict}\n", page=pager)
        else:
            click.echo(diff + verdict)

    return show


@main.command(short_help="Patch the engine (idempotent); --dry-run shows the diff.")
@venv_argument
@click.option("--dry-run", is_flag=True, help="Show what would change (summary, then the diff); write nothing.")
@click.option("--stat", is_flag=True, help="With --dry-run: the summary alone (regions changed, +/- lines).")
@click.option("--no-pager", "no_pager", is_flag=True, help="With --dry-run: never page the diff ($PAGER, less).")
@click.option(
    "--allow-unknown",
    is_flag=True,
    help="Patch a file that is as shipped (matches RECORD) but not pinned; records a local pin.",
)
@verbose_option
@json_option
def apply(venv: str | None, dry_run: bool, stat: bool, no_pager: bool, allow_unknown: bool, verbose: bool,
          as_json: bool) -> None:
    """Patch the engine's patch set: ple_layer.py, and the start-up policy file where the
    release has one (idempotent, all files or none; a .bak-pre-ple4 backup beside each).

    With --dry-run nothing is written: on a terminal, a summary (the regions that change,
    +/- lines each, the verdict), then the diff, coloured (unless NO_COLOR is set) and paged
    when longer than the screen; piped, the plain unified diff, then the verdict.
    """
    if stat and not dry_run:
        raise click.UsageError("--stat goes with --dry-run (the summary of what would change); nothing was written")
    if no_pager and not dry_run:
        raise click.UsageError("--no-pager goes with --dry-run (the diff it would page); nothing was written")
    run_command("apply", as_json, lambda: commands.apply.run(venv, dry_run=dry_run, allow_unknown=allow_unknown),
                verbose=verbose, show=_show_dry_run(stat, not no_pager, verbose) if dry_run else None)


@main.command(short_help="Show the state, engine version, hashes and backup (fast).")
@venv_argument
@verbose_option
@json_option
def status(venv: str | None, verbose: bool, as_json: bool) -> None:
    """Show the state, engine version, hashes and backup (fast; imports no engine)."""
    run_command("status", as_json, lambda: commands.status.run(venv), verbose=verbose)


@main.command(short_help="Exit 0 only if exactly patched and the backup restores it.")
@venv_argument
@verbose_option
@json_option
def verify(venv: str | None, verbose: bool, as_json: bool) -> None:
    """Exit 0 only if the target is the exact patched output and the backup restores it."""
    run_command("verify", as_json, lambda: commands.verify.run(venv), verbose=verbose)


@main.command(short_help="Restore the pristine files from their backups; remove the backups.")
@venv_argument
@click.option("--clean", is_flag=True, help="Also remove a stale backup left by another engine version.")
@verbose_option
@json_option
def revert(venv: str | None, clean: bool, verbose: bool, as_json: bool) -> None:
    """Restore every file of the patch set from its backup (all or none) and remove the backups."""
    run_command("revert", as_json, lambda: commands.revert.run(venv, clean=clean), verbose=verbose)


@main.command("inspect", short_help="Will a checkpoint load, and what will each rank pin?")
@click.argument("checkpoint", metavar="CHECKPOINT_DIR", type=DirectoryPath())
@click.argument("venv_arg", required=False, metavar="[VENV]", type=DirectoryPath())
@click.option("--tp", type=click.IntRange(min=1), default=None,
              help="Tensor-parallel size: each rank pins 1/TP of the table's rows (default: the "
              "--tensor-parallel-size in --serve-args, else 1).")
@click.option("--ranks-per-host", type=click.IntRange(min=1), default=None,
              help="TP ranks sharing this host's memory (default: all of them).")
@click.option("--venv", "venv_opt", default=None, metavar="VENV", type=DirectoryPath(),
              help="The same as the VENV argument (kept for scripts).")
@click.option("--scan", is_flag=True, help="Also read the PLE data: NaN/negative block scales, bad global scales.")
@click.option("--host-budget-gib", type=click.FloatRange(min=0), default=None,
              help="Pinned-host budget per rank in GiB (default: $VLLM_QWEN4EXP_PLE_HOST_GIB): rows past it go "
              "to VRAM; 0 puts every row in VRAM.")
@click.option("--serve-args", default=None, metavar="'OPTIONS'",
              help="With VENV: the vllm serve options you will start with (one quoted string), checked too.")
@json_option
def inspect_(checkpoint: str, venv_arg: str | None, tp: int, ranks_per_host: int | None, venv_opt: str | None,
             scan: bool, host_budget_gib: float | None, serve_args: str | None, as_json: bool) -> None:
    """Will CHECKPOINT_DIR load with the patched engine, and what will each rank pin?

    Reads config.json and the safetensors headers only (seconds); --scan streams the PLE
    data too. With VENV (the engine's venv) it is a preflight of `vllm serve`: every file of
    the patch set patched, no PLE setting in this environment (or in --serve-args) that the
    NVFP4 table refuses, what the engine's automatic PLE placement will choose, the exact
    pinned bytes against this host's memory; one verdict, and what to change. Exit 10 if it
    will not load (or start) as it is.
    """
    if venv_arg and venv_opt and os.path.abspath(venv_arg) != os.path.abspath(venv_opt):
        raise click.UsageError(f"two venvs given: {venv_arg} and --venv {venv_opt}; give one")
    venv = venv_arg or venv_opt
    options = dict(ranks_per_host=ranks_per_host, scan=scan, host_budget_gib=host_budget_gib)
    if venv is None:
        if serve_args is not None:
            raise click.UsageError("--serve-args needs VENV (the engine's venv): the preflight checks them there")
        from .ckpt import inspect as ckpt_inspect

        run_command("inspect", as_json, lambda: ckpt_inspect.run(checkpoint, tp=tp, **options))
    from . import preflight

    run_command("inspect", as_json, lambda: preflight.run(checkpoint, venv, serve_args=serve_args, tp=tp, **options))


@main.command(short_help="Check the NVFP4 kernel bit for bit in the engine's Python.")
@venv_argument
@click.option("--arch", default="sm_70", show_default=True, help="GPU architecture to compile the kernel for.")
@json_option
def selftest(venv: str | None, arch: str, as_json: bool) -> None:
    """Compile the NVFP4 gather for --arch and check it bit for bit (on the GPU if present).

    Runs in VENV's own Python, with the engine's torch and Triton (default: the Python
    running ple4patch). Exit 9 if it does not compile, is not bit-exact, or torch/Triton
    are missing there.
    """
    from .commands import selftest as selftest_command

    run_command("selftest", as_json, lambda: selftest_command.run(venv, arch))


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="ple4patch")

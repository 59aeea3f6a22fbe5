"""`ple4patch selftest`: compile the NVFP4 gather for a GPU arch and check it is bit-exact
(in the venv's own Python; see `ple4patch.selftest`)."""

from __future__ import annotations

from ..errors import EXIT_OK
from ..result import Result
from ..selftest import format_report, run_selftest


def run(venv: str | None, arch: str = "sm_70") -> Result:
    """The report as the Result's JSON data; the text is its body and verdict."""
    report = run_selftest(venv, arch)
    body, verdict = format_report(report)
    return Result(command="selftest", exit_code=EXIT_OK, message=verdict, data={"report": report}, output=body)

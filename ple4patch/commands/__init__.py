"""The commands: one module each, each with one entry point `run(...) -> Result`.

`apply`, `status`, `verify`, `revert` and `selftest` are here (`inspect` is
`ple4patch.ckpt_inspect.run`). Each takes the venv (None: `$VIRTUAL_ENV`, else this
interpreter's prefix) and returns a `result.Result`, or raises a `Ple4Error` whose
`exit_code` the CLI exits with. The CLI (`cli.py`) is a thin layer over these.
"""

from . import apply, revert, status, verify  # noqa: F401 (selftest is imported on use)

"""The real ple4patch CLI with the tiny test transform (`kit.fakepatch.fake_patch`).

Used by the reliability tests where ple4patch runs hundreds of times (races): locking,
fault points, writes, exit codes and JSON are the real ones; only the libcst transform
(about a second per run) is replaced. With `PLE4_TEST_BARRIER=<dir>` the process, once
imported, creates `<dir>/ready-<pid>` and waits for `<dir>/go`: every process of a race
starts its command at the same instant.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the kit

from kit.fakepatch import fake_patch  # noqa: E402
from ple4patch import cli, plan  # noqa: E402

plan.default_patch_source = lambda: fake_patch

barrier = os.environ.get("PLE4_TEST_BARRIER")
if barrier:
    Path(barrier, f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while not Path(barrier, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.001)

cli.main(sys.argv[1:], prog_name="ple4patch")

"""The real ple4patch CLI with the tiny test transform (`fakepatch.fake_patch`).

Used by the reliability tests where ple4patch runs hundreds of times (races): locking,
fault points, writes, exit codes and JSON are the real ones; only the libcst transform
(about a second per run) is replaced. `PLE4_TEST_START_AT=<time.time() value>` makes
every process of a race start at the same instant.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakepatch import fake_patch  # noqa: E402
from ple4patch import actions, cli  # noqa: E402

actions._default_patch_source = lambda: fake_patch

start_at = os.environ.get("PLE4_TEST_START_AT")
if start_at:
    delay = float(start_at) - time.time()
    if delay > 0:
        time.sleep(delay)

cli.main(sys.argv[1:], prog_name="ple4patch")

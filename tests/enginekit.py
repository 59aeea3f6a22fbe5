"""The engine files and throw-away installs under their earlier module name, for the e2e tests
and benchmarks that still import it: everything here is `tools/engine_files.py` and
`tools/throwaway.py` (new code imports those, or `kit` in tests)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ple4patch.hashing import sha256_hex  # noqa: E402,F401
from ple4patch.paths import LOCK_NAME, TARGET_REL  # noqa: E402,F401
from tools.engine_files import *  # noqa: E402,F401,F403
from tools.engine_files import REPO, SHARED_ENGINES, STANDIN_DIR, TEST_MANIFEST  # noqa: E402,F401
from tools.throwaway import *  # noqa: E402,F401,F403
from tools.throwaway import PY  # noqa: E402,F401

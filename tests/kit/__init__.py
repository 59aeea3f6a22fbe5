"""The test kit: one import (`import kit`) for everything the tests share.

- `kit.venvs`: template venvs and their clones, the wheelhouse of the fixtures,
  snapshots and hashes of site-packages, bytecode helpers; wheels, venvs and pip
  installs themselves come from `tools/throwaway.py` (also used by the demo).
- `kit.pins`: pins and manifest files for the stand-in and the fake transform.
- `kit.cli`: the CLI in a subprocess (the real one, or with the fake transform) and
  readers of its output.
- `kit.schema`: every --json object checked against the shipped JSON Schema.
- `kit.fakepatch`: the tiny deterministic transform and the PRISTINE_A/B files.
- The engine files (`shared_engines()`, `standin_file()`) come from `tools/engine_files.py`.

`tools/` never imports from here: tests are the top layer.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `tools` is a folder of the checkout, not an installed package
    sys.path.insert(0, str(REPO))

from ple4patch.hashing import sha256_hex  # noqa: E402
from ple4patch.paths import LOCK_NAME, TARGET_REL  # noqa: E402
from tools.engine_files import (  # noqa: E402
    SHARED_ENGINES,
    STANDIN_DIR,
    TEST_MANIFEST,
    SharedEngine,
    parse_index,
    shared_engines,
    standin_file,
)
from tools.throwaway import (  # noqa: E402
    PY,
    build_wheel,
    cli_env,
    install,
    make_venv,
    site_packages,
    target_of,
    venv_python,
)

from .cli import (  # noqa: E402
    env_with,
    error_message,
    fake_cli,
    fake_cmd,
    json_of,
    logical_lines,
    mentions,
    names_of,
    one_message,
    popen_for_ctrl_c,
    run_cli,
    run_real,
    shell_lines,
)
from .schema import schema_errors, validate  # noqa: E402
from .pins import (  # noqa: E402
    SET_KINDS,
    extra_manifests,
    fake_manifest_file,
    set_manifests,
    standin_config_manifest,
    standin_config_set_manifests,
    standin_manifest,
    standin_set_manifests,
)
from .venvs import (  # noqa: E402
    Wheelhouse,
    assert_imports_current_source,
    backup_sha,
    clone,
    compile_unchecked,
    config_era_bytes,
    pycs,
    sha,
    site_snapshot,
    standin_bytes,
    standin_policy_bytes,
    template,
    temps,
    tree_hash,
)

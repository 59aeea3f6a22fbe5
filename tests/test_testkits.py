"""The test helper modules share one copy of the stand-in engine and its manifest."""

from __future__ import annotations

import enginekit
import reliakit


def test_reliakit_uses_enginekits_standin_and_manifest():
    assert reliakit.standin_bytes is enginekit.standin_bytes
    assert reliakit.TEST_MANIFEST is enginekit.TEST_MANIFEST
    assert enginekit.TEST_MANIFEST.is_file()

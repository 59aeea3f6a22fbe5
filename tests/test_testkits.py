"""The test kit shares one copy of the stand-in engine and its manifest with the tools."""

from __future__ import annotations

import kit
from kit import pins, venvs
from tools import engine_files


def test_kit_uses_the_tools_standin_and_manifest():
    assert kit.standin_bytes is venvs.standin_bytes
    assert kit.standin_manifest is pins.standin_manifest
    assert kit.TEST_MANIFEST is engine_files.TEST_MANIFEST
    assert kit.standin_file is engine_files.standin_file
    assert kit.TEST_MANIFEST.is_file()

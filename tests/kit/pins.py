"""Pins for the tests, all made by `pin_for`: the stand-in under the real transform (once a
session, so tests need not wait for `make pin`), and the fake transform's pins."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from ple4patch import manifest as m
from ple4patch.hashing import sha256_hex
from ple4patch.sentinel import PATCH_ID

from .fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest


def pin_for(data: bytes, patch: Callable[[str], str], *, label: str, source: str, engine_versions: str = "",
            older: Mapping[str, str] | None = None) -> m.Pin:
    """The pin of pristine `data` under the transform `patch` (the shape `make pin` writes)."""
    return m.Pin(
        pristine_sha256=sha256_hex(data),
        patched_sha256=sha256_hex(patch(data.decode("utf-8")).encode("utf-8")),
        patch_id=PATCH_ID,
        label=label,
        engine_versions=engine_versions,
        size=len(data),
        older=dict(older or {}),
        source=source,
    )


_pins: dict[str, tuple[Path, m.Pin]] = {}


def standin_manifest(base: Path) -> tuple[Path, m.Pin]:
    """A manifest file pinning the stand-in to what the current transform makes of it.

    Made once per session, so these tests do not depend on the checked-in test manifest
    being re-pinned (test_cli checks that); the pin is the same shape `make pin` writes.
    """
    if str(base) not in _pins:
        from ple4patch.transform import patch_source

        from .venvs import standin_bytes

        pin = pin_for(standin_bytes(), patch_source, source="reliability-tests",
                      label="stand-in engine (reliability tests, pinned at session start)")
        man = m.Manifest(sources=["reliability-tests"])
        man.add(pin)
        path = base / "standin_current_transform_manifest.json"
        path.write_text(man.dumps())
        _pins[str(base)] = (path, pin)
    return _pins[str(base)]


def standin_set_manifests(base: Path) -> tuple[list[Path], dict[str, m.Pin]]:
    """Manifest files pinning the stand-in's two files (layer and start-up policy) to what the
    current transforms make of them: ([layer file, policy file], {rel: pin})."""
    from ple4patch.paths import POLICY_REL, TARGET_REL
    from ple4patch.transform import patch_policy_source

    from .venvs import standin_policy_bytes

    layer_path, layer_pin = standin_manifest(base)
    key = str(base) + "#policy"
    if key not in _pins:
        pin = pin_for(standin_policy_bytes(), patch_policy_source, source="reliability-tests",
                      label="stand-in engine start-up policy (pinned at session start)")
        pin = m.Pin(**{**pin.__dict__, "target": POLICY_REL})
        man = m.Manifest(sources=["reliability-tests"])
        man.add(pin)
        path = base / "standin_policy_current_transform_manifest.json"
        path.write_text(man.dumps())
        _pins[key] = (path, pin)
    policy_path, policy_pin = _pins[key]
    return [layer_path, policy_path], {TARGET_REL: layer_pin, POLICY_REL: policy_pin}


def standin_config_manifest(base: Path) -> tuple[Path, m.Pin]:
    """A manifest file pinning the stand-in ``vllm/config/vllm.py`` (tests/fixtures/config_era)
    to what the current transform makes of it (once a session, as `standin_manifest`)."""
    from ple4patch.paths import CONFIG_REL
    from ple4patch.transform import patch_config_source

    from .venvs import config_era_bytes

    key = str(base) + "#config"
    if key not in _pins:
        pin = pin_for(config_era_bytes(), patch_config_source, source="reliability-tests",
                      label="stand-in engine VllmConfig module (pinned at session start)")
        pin = m.Pin(**{**pin.__dict__, "target": CONFIG_REL})
        man = m.Manifest(sources=["reliability-tests"])
        man.add(pin)
        path = base / "standin_config_current_transform_manifest.json"
        path.write_text(man.dumps())
        _pins[key] = (path, pin)
    return _pins[key]


def standin_config_set_manifests(base: Path) -> tuple[list[Path], dict[str, m.Pin]]:
    """Manifest files pinning the config-era stand-in's two files (layer and VllmConfig module):
    ([layer file, config file], {rel: pin}), the set's order."""
    from ple4patch.paths import CONFIG_REL, TARGET_REL

    layer_path, layer_pin = standin_manifest(base)
    config_path, config_pin = standin_config_manifest(base)
    return [layer_path, config_path], {TARGET_REL: layer_pin, CONFIG_REL: config_pin}


# The sets the set tests run over: each kind's wheel files and manifests (the set's order).
SET_KINDS = ("policy", "config")


def set_manifests(base: Path, kind: str) -> tuple[list[Path], dict[str, m.Pin]]:
    """`standin_set_manifests` (kind "policy": layer + runtime_defaults.py) or
    `standin_config_set_manifests` (kind "config": layer + vllm/config/vllm.py)."""
    assert kind in SET_KINDS, kind
    return standin_set_manifests(base) if kind == "policy" else standin_config_set_manifests(base)


def extra_manifests() -> list[Path]:
    """The session's stand-in manifest (after `standin_manifest` made it)."""
    assert _pins, "use the `pinned` fixture first"
    return [path for path, _pin in _pins.values()]


def fake_manifest_file(directory: Path) -> Path:
    """A manifest file pinning PRISTINE_A and PRISTINE_B under the fake transform."""
    path = directory / "fake_manifest.json"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(fake_manifest(PRISTINE_A, PRISTINE_B).dumps())
    return path

#!/usr/bin/env python3
"""Re-pin the manifests from the real transform (dev tool; `make pin`).

For every real engine file listed in ../shared/engines/INDEX.md (its sha256 is
checked against the table) this runs `ple4patch.transform.patch_source`, checks
the output compiles and carries the sentinel once, and writes the pin (pristine
sha256 -> label, engine version range, patch id, patched sha256) into
`ple4patch/patches/ple_layer.json`. The stand-in engine of the tests
(tests/fixtures/standin_engine/...) is pinned the same way into the TEST
manifest `tests/fixtures/standin_manifest.json` (never shipped).

When the patch id changes, the previous output's hash moves to the pin's
`older` map so that `status` still recognises files patched by the old id.

    python tools/pin_manifest.py            # rewrite both manifests
    python tools/pin_manifest.py --check    # exit 1 (and say what) if they are out of date

Without ../shared the shipped pins are kept as they are (and --check skips them).

The engine's start-up policy file (`vllm/platforms/runtime_defaults.py`, the second file of a
set) is pinned the same way by `ple4patch.transform.patch_policy_source`: the real ones stored in
tests/data/engines (`POLICY_FILES`) into `ple4patch/patches/runtime_defaults.json`, the stand-in
engine's into the test manifest `tests/fixtures/standin_policy_manifest.json`.

The VllmConfig module (`vllm/config/vllm.py`, the third file of a set in releases before the
policy file) is patched by `ple4patch.transform.patch_config_source`: the real ones stored in
tests/data/engines that are plausible installs (INDEX.md ``pin``: main or a release; a fork's is
test data only) into `ple4patch/patches/vllm_config.json`, a pin kept when its file is absent
here; the stand-in of tests/fixtures/config_era into the test manifest
`tests/fixtures/standin_config_manifest.json`. The module changes with almost every commit, so
most config-era installs still match none of these pins and are applied with `--allow-unknown`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ple4patch import manifest as m  # noqa: E402
from ple4patch.errors import Ple4Error  # noqa: E402
from ple4patch.hashing import sha256_hex  # noqa: E402
from ple4patch.output_check import check_output  # noqa: E402
from ple4patch.paths import SHIPPED_MANIFESTS_DIR  # noqa: E402
from ple4patch.sentinel import PATCH_ID  # noqa: E402
from tools import engine_files  # noqa: E402  (INDEX.md parsing, shared with the tests)
from tools.engine_files import TEST_MANIFEST  # noqa: E402
from tools import engine_corpus  # noqa: E402  (tests/data/engines/INDEX.md parsing, shared with the tests)

SHIPPED = SHIPPED_MANIFESTS_DIR / "ple_layer.json"

# The engine version range each real file plausibly belongs to (reported only:
# a pinned file is recognised by its hash whatever the version says). Facts from
# INDEX.md: 1.5.0 was released ~2026-09-02, 1.5.1 on 2026-10-03, no 1.4.x;
# setuptools_scm names the builds between releases <next>.devN.
VERSION_RANGES = {
    # (`<1.5.1rc0`, not `<1.5.1`: PEP 440 keeps 1.5.1.devN out of `<1.5.1`)
    "a223f046": ">=1.5.0.dev0,<1.5.1rc0",  # 1.5.0-era shape (fork): 1.5.0 and 1.5.1.devN builds
    "036318a0": ">=1.5.1.dev0,<1.5.2.dev0",  # after PR #528 (Sept 2026): the 1.5.1 feature set
    "15a8d185": ">=1.5.2.dev0,<1.7",  # October 2026 main, after 1.5.1
}


def patched_output(source: bytes, name: str) -> bytes:
    """The transform's output for `source`, through the same check as `apply` (no pin yet)."""
    from ple4patch.transform import patch_source

    try:
        return check_output(patch_source(source.decode("utf-8")), name)
    except Ple4Error as err:
        raise SystemExit(f"{name}: {err}") from None


def make_pin(source: bytes, name: str, label: str, versions: str, old: m.Pin | None, note: str = "") -> m.Pin:
    pristine = sha256_hex(source)
    patched = sha256_hex(patched_output(source, name))
    older = dict(old.older) if old else {}
    if old is not None and old.patch_id != PATCH_ID:
        older[old.patch_id] = old.patched_sha256  # keep recognising the previous patch
    older.pop(PATCH_ID, None)
    return m.Pin(
        pristine_sha256=pristine,
        patched_sha256=patched,
        patch_id=PATCH_ID,
        label=label,
        engine_versions=versions or (old.engine_versions if old else ""),
        size=len(source),
        older=older,
        note=note,
    )


def load_existing(path: Path) -> m.Manifest:
    return m.load_file(path) if path.is_file() else m.Manifest()


def pin_shared(existing: m.Manifest, engines_dir: Path) -> tuple[m.Manifest, list[str]]:
    out = m.Manifest()
    notes = []
    rows = engine_files.shared_engines(engines_dir)
    if not rows:
        notes.append(f"{engines_dir} not found: shipped pins kept as they are")
        return existing, notes
    for row in rows:
        data = row.path.read_bytes()
        if sha256_hex(data) != row.sha256 or len(data) != row.size:
            raise SystemExit(f"{row.path}: sha256/size differ from INDEX.md; refusing to pin")
        # folder names are 1cat-vllm-<main|fork>-<commit8>
        where = row.folder.split("-")[2] if row.folder.count("-") >= 3 else "commit"
        label = f"1Cat-vLLM {where} {row.commit[:8]}"
        pin = make_pin(data, str(row.path), label, VERSION_RANGES.get(row.commit[:8], ""),
                       existing.by_pristine(row.sha256), note=f"{row.commit}: {row.era}")
        out.pins[pin.pristine_sha256] = pin
    for sha, pin in existing.pins.items():  # pins of files no longer in ../shared stay
        if sha not in out.pins:
            notes.append(f"kept pin {sha[:12]}… ({pin.label}): its file is not in {engines_dir}")
            out.pins[sha] = pin
    return out, notes


def pin_corpus(out: m.Manifest, existing: m.Manifest) -> tuple[list[str], set[str]]:
    """Add to ``out`` the pins of tests/data/engines files that are plausible installs (INDEX.md
    column ``pin``: a main-branch or release commit) and that the transform patches."""
    notes, pinned = [], set()
    for row in engine_corpus.corpus_files("ple_layer.py"):
        data = engine_corpus.check(row)
        if not row.plausible_install:
            notes.append(f"not pinned: {row.label} ({row.repository}): test data only (INDEX.md pin: no)")
            continue
        try:
            from ple4patch.transform import patch_source

            patch_source(data.decode("utf-8"))
        except Ple4Error as exc:
            notes.append(f"not pinned: {row.label}: the transform refuses it: {exc}")
            continue
        label = f"1Cat-vLLM {row.release or 'main'} {row.commit[:8]}"
        pin = make_pin(data, str(row.path), label, VERSION_RANGES.get(row.commit[:8], ""),
                       existing.by_pristine(row.sha256),
                       note=f"{row.repository} {row.commit}: {row.shape.split('. ')[0]}")
        out.pins[pin.pristine_sha256] = pin
        pinned.add(pin.pristine_sha256)
    return notes, pinned


def pin_standin(existing: m.Manifest) -> tuple[m.Manifest | None, list[str]]:
    path = engine_files.standin_file()
    if path is None:
        return None, [f"no stand-in engine at {engine_files.STANDIN_DIR}: test manifest not written"]
    data = path.read_bytes()
    old = existing.by_pristine(sha256_hex(data))
    pin = make_pin(data, str(path), "stand-in engine (TEST ONLY)", "", old,
                   note="tests/fixtures/standin_engine: a small ple_layer.py shaped like 1Cat-vLLM's")
    return m.Manifest({pin.pristine_sha256: pin}), []


POLICY_SHIPPED = SHIPPED_MANIFESTS_DIR / "runtime_defaults.json"
POLICY_TEST_MANIFEST = REPO / "tests" / "fixtures" / "standin_policy_manifest.json"
# The real policy files pinned (tests/data/engines/INDEX.md gives their provenance):
# (folder, commit, engine version range).
POLICY_FILES = (
    ("main-51c0f972", "51c0f97201a70a644a80ac21d292a15eff0dc4e6", ""),
)


def make_policy_pin(source: bytes, name: str, label: str, versions: str, old: m.Pin | None, note: str) -> m.Pin:
    from ple4patch.paths import POLICY_REL
    from ple4patch.transform import patch_policy_source

    try:
        out = check_output(patch_policy_source(source.decode("utf-8")), name)
    except Ple4Error as err:
        raise SystemExit(f"{name}: {err}") from None
    older = dict(old.older) if old else {}
    if old is not None and old.patch_id != PATCH_ID:
        older[old.patch_id] = old.patched_sha256
    older.pop(PATCH_ID, None)
    return m.Pin(pristine_sha256=sha256_hex(source), patched_sha256=sha256_hex(out), patch_id=PATCH_ID,
                 label=label, engine_versions=versions or (old.engine_versions if old else ""),
                 size=len(source), older=older, note=note, target=POLICY_REL)


def pin_policies(existing: m.Manifest) -> tuple[m.Manifest, list[str]]:
    """The shipped policy pins: every stored real policy file (kept when its file is gone)."""
    out = m.Manifest()
    notes = []
    for folder, commit, versions in POLICY_FILES:
        path = REPO / "tests/data/engines" / folder / "runtime_defaults.py"
        if not path.is_file():
            notes.append(f"{path.relative_to(REPO)} not found: its pin (if any) is kept")
            continue
        data = path.read_bytes()
        pin = make_policy_pin(data, str(path), f"1Cat-vLLM main {commit[:8]} (start-up policy)", versions,
                              existing.by_pristine(sha256_hex(data)),
                              note=f"{commit}: vllm/platforms/runtime_defaults.py with "
                                   f"_apply_sm70_qwen38_disk_ple_defaults and _qwen4exp_ple_cascade_requested")
        out.pins[pin.pristine_sha256] = pin
    for sha, pin in existing.pins.items():
        out.pins.setdefault(sha, pin)
    return out, notes


def pin_standin_policy(existing: m.Manifest) -> m.Manifest | None:
    from ple4patch.paths import POLICY_REL

    path = engine_files.STANDIN_DIR / POLICY_REL
    if not path.is_file():
        return None
    data = path.read_bytes()
    pin = make_policy_pin(data, str(path), "stand-in engine start-up policy (TEST ONLY)", "",
                          existing.by_pristine(sha256_hex(data)),
                          note="tests/fixtures/standin_engine: runtime_defaults.py shaped like 1Cat-vLLM 51c0f972's")
    return m.Manifest({pin.pristine_sha256: pin})


CONFIG_SHIPPED = SHIPPED_MANIFESTS_DIR / "vllm_config.json"
CONFIG_TEST_MANIFEST = REPO / "tests" / "fixtures" / "standin_config_manifest.json"
CONFIG_STANDIN = REPO / "tests" / "fixtures" / "config_era" / "vllm" / "config" / "vllm.py"


def make_config_pin(source: bytes, name: str, label: str, old: m.Pin | None, note: str) -> m.Pin:
    from ple4patch.paths import CONFIG_REL
    from ple4patch.transform import patch_config_source

    try:
        out = check_output(patch_config_source(source.decode("utf-8")), name)
    except Ple4Error as err:
        raise SystemExit(f"{name}: {err}") from None
    older = dict(old.older) if old else {}
    if old is not None and old.patch_id != PATCH_ID:
        older[old.patch_id] = old.patched_sha256
    older.pop(PATCH_ID, None)
    return m.Pin(pristine_sha256=sha256_hex(source), patched_sha256=sha256_hex(out), patch_id=PATCH_ID,
                 label=label, engine_versions="", size=len(source), older=older, note=note, target=CONFIG_REL)


def pin_configs(existing: m.Manifest) -> tuple[m.Manifest, list[str]]:
    """The shipped config pins: every stored real ``vllm/config/vllm.py`` that is a plausible
    install (kept when its file is gone)."""
    out, notes = m.Manifest(), []
    for row in engine_corpus.indexed("vllm.py"):
        if not row.plausible_install:
            continue
        if not row.present:
            notes.append(f"{row.label}/vllm.py not found: its pin (if any) is kept")
            continue
        data = engine_corpus.check(row)
        pin = make_config_pin(data, str(row.path), f"1Cat-vLLM {row.release or 'main'} {row.commit[:8]} (VllmConfig module)",
                              existing.by_pristine(row.sha256),
                              note=f"{row.repository} {row.commit}: {row.shape.split('; ')[0]}")
        out.pins[pin.pristine_sha256] = pin
    for sha, pin in existing.pins.items():
        out.pins.setdefault(sha, pin)
    return out, notes


def pin_standin_config(existing: m.Manifest) -> m.Manifest | None:
    if not CONFIG_STANDIN.is_file():
        return None
    data = CONFIG_STANDIN.read_bytes()
    pin = make_config_pin(data, str(CONFIG_STANDIN), "stand-in engine VllmConfig module (TEST ONLY)",
                          existing.by_pristine(sha256_hex(data)),
                          note="tests/fixtures/config_era: vllm/config/vllm.py shaped like ChainZeaxion/1Cat-vLLM ebeb346a's")
    return m.Manifest({pin.pristine_sha256: pin})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if out of date")
    ap.add_argument("--engines", type=Path, default=engine_files.SHARED_ENGINES, help="folder with INDEX.md")
    args = ap.parse_args(argv)

    stale = []
    shipped_old = load_existing(SHIPPED)
    shipped_new, notes = pin_shared(shipped_old, args.engines)
    shipped_new = m.Manifest(dict(shipped_new.pins))  # never the loaded object itself
    corpus_notes, corpus_shas = pin_corpus(shipped_new, shipped_old)
    notes = [n for n in notes if not any(n.startswith(f"kept pin {sha[:12]}") for sha in corpus_shas)]
    notes += corpus_notes
    test_old = load_existing(TEST_MANIFEST)
    test_new, more = pin_standin(test_old)
    notes += more
    policy_old = load_existing(POLICY_SHIPPED)
    policy_new, more = pin_policies(policy_old)
    notes += more
    policy_test_old = load_existing(POLICY_TEST_MANIFEST)
    policy_test_new = pin_standin_policy(policy_test_old)
    config_old = load_existing(CONFIG_SHIPPED)
    config_new, more = pin_configs(config_old)
    notes += more
    config_test_old = load_existing(CONFIG_TEST_MANIFEST)
    config_test_new = pin_standin_config(config_test_old)
    from ple4patch.paths import CONFIG_REL, POLICY_REL, TARGET_REL

    for path, old, new, target in ((SHIPPED, shipped_old, shipped_new, TARGET_REL),
                                   (TEST_MANIFEST, test_old, test_new, TARGET_REL),
                                   (POLICY_SHIPPED, policy_old, policy_new, POLICY_REL),
                                   (POLICY_TEST_MANIFEST, policy_test_old, policy_test_new, POLICY_REL),
                                   (CONFIG_SHIPPED, config_old, config_new, CONFIG_REL),
                                   (CONFIG_TEST_MANIFEST, config_test_old, config_test_new, CONFIG_REL)):
        if new is None:
            continue
        text = new.dumps(target)
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text == current:
            print(f"up to date: {path.relative_to(REPO)}")
            continue
        if args.check:
            stale.append(str(path.relative_to(REPO)))
            for sha, pin in new.pins.items():
                have = old.pins.get(sha)
                if have is None or have.to_json() != pin.to_json():
                    print(f"out of date: {path.relative_to(REPO)} pin {sha[:12]}… ({pin.label[:60]}): "
                          f"{'missing' if have is None else have.patch_id + ' ' + have.patched_sha256[:12]}… "
                          f"-> {pin.patch_id} {pin.patched_sha256[:12]}…")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"pinned {len(new.pins)} file(s) into {path.relative_to(REPO)}")
    for n in notes:
        print(f"note: {n}")
    if stale:
        print(f"manifest out of date with the transform: run `make pin` ({', '.join(stale)})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

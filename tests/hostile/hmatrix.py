"""The state x backup matrix of the hostile tests: a venv built in each target state and backup
state, the manifests that make those states, every command, and a venv path of realistic length.

- `build(state, backup, venv, rels=)`: the target (and, for a set, the start-up policy file or
  vllm/config/vllm.py too) put in `state` (pristine, patched, patched_older, unpinned, modified)
  with its backup `backup` (absent, present, stale, corrupt), under the fake transform
  (`kit.fakepatch`).
- `SET_FILES`: the files of each kind of venv the matrix runs over ("layer", "set": with the
  policy file, "config-set": with vllm/config/vllm.py) and the A file of its second member.
- `write_manifests(directory)`: (pinned, only_b): manifest files for the layer, the policy file
  and vllm/config/vllm.py; `pinned` pins the A files (and their older patch id) and the B files,
  `only_b` pins only the B files, so that the A files are `unpinned`.
- `long_venv_path(root)`: a venv path as long as a user's (72 characters:
  `ROOT/.local/share/virtualenvs/qwen38-next-...`), for the text tests.
"""

from __future__ import annotations

from pathlib import Path

import kit
from kit.fakepatch import PRISTINE_A, PRISTINE_B, fake_manifest, fake_patch, fake_patch_old
from kit.pins import pin_for
from ple4patch import manifest as m
from ple4patch.paths import CONFIG_REL, POLICY_REL, TARGET_REL, backup_path

CORRUPT = b"my own notes, not a backup\n"
STATES = ("pristine", "patched", "patched_older", "unpinned", "modified")
BACKUPS = ("absent", "present", "stale", "corrupt")
COMMANDS = (("status",), ("apply",), ("apply", "--dry-run"), ("verify",), ("revert",), ("revert", "--clean"))
CASES = [(s, b) for s in STATES for b in BACKUPS]
CASE_IDS = [f"{s}-{b}" for s, b in CASES]

# A start-up policy file with the entry point and a PLE placement function (what
# `policy_file.places_ple` looks for, as in 1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6's
# vllm/platforms/runtime_defaults.py), in two versions.
POLICY_A = (b'"""stand-in runtime_defaults A"""\n\n\ndef _qwen4exp_ple_cascade_requested(config):\n    return True\n'
            b"\n\ndef apply_runtime_policy_defaults(config):\n    return _qwen4exp_ple_cascade_requested(config)\n")
POLICY_B = POLICY_A.replace(b"runtime_defaults A", b"runtime_defaults B (another engine version)")
# A VllmConfig module with a module-level PLE default (what `policy_file.config_places_ple` looks
# for, as in ChainZeaxion/1Cat-vLLM ebeb346a66d5d485d71fb2fc4079c8b891dd9250's vllm/config/vllm.py),
# in two versions.
CONFIG_A = (b'"""stand-in vllm/config/vllm.py A"""\nimport os\n\n\n'
            b"def _apply_sm70_qwen38_hybrid_ple_defaults(parallel_config):\n"
            b"    os.environ['VLLM_PLE_CPU_OFFLOAD'] = '1'\n")
CONFIG_B = CONFIG_A.replace(b"vllm.py A", b"vllm.py B (another engine version)")
FILES = {TARGET_REL: (PRISTINE_A, PRISTINE_B), POLICY_REL: (POLICY_A, POLICY_B), CONFIG_REL: (CONFIG_A, CONFIG_B)}
SET_FILES = {"layer": (TARGET_REL,), "set": (TARGET_REL, POLICY_REL), "config-set": (TARGET_REL, CONFIG_REL)}


def set_wheel(wheelhouse, files: str):
    """The 1cat-vllm wheel of a kind of `SET_FILES` (the A files)."""
    return wheelhouse.wheel({rel: FILES[rel][0] for rel in SET_FILES[files]},
                            version={"layer": "1.5.0", "set": "1.5.2", "config-set": "1.5.0"}[files])

LONG_VENV_LENGTH = 72


def long_venv_path(root: Path, length: int = LONG_VENV_LENGTH) -> Path:
    """A venv path of `length` characters as pipenv makes them, `root` standing in for the
    user's home: `ROOT/.local/share/virtualenvs/qwen38-next-Ab3dE9fG...` (longer when
    `root` leaves too little room)."""
    base = root / ".local" / "share" / "virtualenvs"
    name = "qwen38-next-"
    pad = max(length - len(str(base / name)), 8)
    return base / (name + ("Ab3dE9fGk2" * (pad // 10 + 1))[:pad])


def build(state: str, backup: str, venv: Path, rels: tuple[str, ...] = (TARGET_REL,)) -> None:
    """Each file of `rels` in `state`, with its backup in `backup`."""
    site = kit.site_packages(venv)
    for rel in rels:
        a, b = FILES[rel]
        target = site / rel
        target.write_bytes({
            "pristine": a, "unpinned": a,
            "patched": fake_patch(a.decode()).encode(),
            "patched_older": fake_patch_old(a.decode()).encode(),
            "modified": a + b"# tuned by hand\n",
        }[state])
        data = {"absent": None, "present": a, "stale": b, "corrupt": CORRUPT}[backup]
        if data is not None:
            backup_path(target).write_bytes(data)


def _member_manifest(rel: str, *pristine: bytes, older: bool) -> m.Manifest:
    from kit.fakepatch import OLD_PATCH_ID

    label = "test policy pin" if rel == POLICY_REL else "test config pin"
    out = m.Manifest(sources=["test"])
    for data in pristine:
        old = {OLD_PATCH_ID: pin_for(data, fake_patch_old, label=label, source="test").patched_sha256}
        pin = pin_for(data, fake_patch, label=label, source="test", engine_versions=">=1.5.2,<1.6" if rel == POLICY_REL else ">=1.5.0,<1.5.2",
                      older=old if older else None)
        out.add(m.Pin(**{**pin.__dict__, "target": rel}))
    return out


def write_manifests(directory: Path) -> tuple[list[Path], list[Path]]:
    """([layer, policy, config] manifests pinning A and B, [layer, policy, config] manifests
    pinning only B)."""
    out = []
    for name, mans in (
        ("pinned", (fake_manifest(PRISTINE_A, PRISTINE_B, older=True),
                    _member_manifest(POLICY_REL, POLICY_A, POLICY_B, older=True),
                    _member_manifest(CONFIG_REL, CONFIG_A, CONFIG_B, older=True))),
        ("only-b", (fake_manifest(PRISTINE_B), _member_manifest(POLICY_REL, POLICY_B, older=False),
                    _member_manifest(CONFIG_REL, CONFIG_B, older=False))),
    ):
        paths = [directory / f"{name}.json", directory / f"{name}-policy.json", directory / f"{name}-config.json"]
        for path, man in zip(paths, mans):
            path.write_text(man.dumps())
        out.append(paths)
    return out[0], out[1]

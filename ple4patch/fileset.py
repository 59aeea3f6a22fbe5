"""The set of files one engine version's patch spans, assessed together, and the set's journal.

A set is the PLE layer (`paths.TARGET_REL`, always) and the file from which the release places
the PLE table by itself at start-up, where it has one: the start-up policy file
`paths.POLICY_REL` (`policy_file.places_ple`: 1CatAI/1Cat-vLLM
51c0f97201a70a644a80ac21d292a15eff0dc4e6 and later), and, in releases before it, the VllmConfig
module `paths.CONFIG_REL` (`policy_file.config_places_ple`: ChainZeaxion/1Cat-vLLM
ebeb346a66d5d485d71fb2fc4079c8b891dd9250). Each file is assessed on its own (`state.assess`:
its hashes, pins, sentinel and `.bak-pre-ple4`); the set's state is theirs when they agree,
else `mixed`.

The journal (`<site-packages>/.ple4patch-journal.json`) exists only while an apply or revert
replaces more than one file: it names the direction and, per file, the pristine and the patched
sha256. A kill leaves it behind; `status` reports the interrupted run, and the next apply or
revert (each file on its own is safe in either state, and both commands finish per file)
converges the whole set and removes it. No libcst, no torch: `status` runs this.

`config_placement` reads what ``vllm/config/vllm.py`` places (the preflight judges it): a
member's placement is patched with the set; one outside the set (a cascade alone, or a file
that cannot be read) gets one line in the set's notes (`ConfigPlacement.note`) saying what the
patched layer needs at start-up.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from . import fsio, readfile, shell
from .engine import Engine, _read_record
from .errors import ModifiedFile
from .manifest import Manifest
from .paths import CONFIG_REL, POLICY_REL, TARGET_REL, TARGET_RELS, backup_path, journal_path
from .policy_file import CASCADE_SWITCH, CONFIG_DEFAULTS, CONFIG_SKIP, config_cascade_form, config_placement as _functions
from .policy_file import config_places_ple, places_ple
from .sentinel import SENTINEL_PREFIX, find_patch_id
from .state import Assessment, State, assess

JOURNAL_SCHEMA = 1
DIRECTIONS = ("apply", "revert")
MIXED = "mixed"  # the set's state when its files disagree


def engine_for(engine: Engine, rel: str) -> Engine:
    """`engine` with `rel` as its target (its RECORD row read afresh)."""
    if rel == TARGET_REL and engine.target == engine.site_packages / TARGET_REL:
        return engine
    row = _read_record(engine.dist_info).get(rel)
    sha, size = row if row else (None, None)
    return dataclasses.replace(engine, target=engine.site_packages / rel, record_sha256=sha,
                               record_size=size, record_listed=row is not None)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# Which files join the set beside the layer, and what their text (or their backup's) must
# define for that: the PLE placement the patch overrides.
PLACING = ((POLICY_REL, places_ple), (CONFIG_REL, config_places_ple))


def _places(member: Engine, places) -> bool:
    """RECORD lists it, it is a file, and it defines the placement; or it is ple4patch's work (it
    carries the sentinel, or cannot be read) and its backup defines it. A new version of the file
    that no longer places the table is not a member, even beside the stale backup of an old one
    (an upgrade): that backup is then an orphan, never restored."""
    # a symlinked file is a member, so that apply/revert refuse it (they never write through
    # symlinks) instead of patching the layer alone
    if not (member.record_listed and (member.target.is_file() or member.target.is_symlink())):
        return False
    text = _text(member.target)
    if text is not None and places(text):
        return True
    if text is not None and find_patch_id(text) is None and SENTINEL_PREFIX not in text:
        return False
    backup = _text(backup_path(member.target))
    return backup is not None and places(backup)


def members(engine: Engine) -> list[Engine]:
    """The files of this engine version's set: the layer, and each file of `PLACING` where
    RECORD lists it, it is a file, and it (or its backup) defines the PLE placement the patch
    overrides."""
    out = [engine_for(engine, TARGET_REL)]
    for rel, places in PLACING:
        member = engine_for(engine, rel)
        if _places(member, places):
            out.append(member)
    return out


CONFIG_READ_LIMIT = 8 * readfile.MiB  # the real vllm/config/vllm.py is 161 KB


@dataclass(frozen=True)
class ConfigPlacement:
    """The automatic PLE placement a release's ``vllm/config/vllm.py`` defines."""

    path: Path
    functions: tuple[str, ...]  # as `policy_file.config_placement` names them
    cascade: str | None  # `policy_file.config_cascade_form`
    venv: Path
    unreadable: str | None = None  # why the file could not be read (then functions is empty)
    member: bool = False  # the file is in the set: apply patches its placement (no note)
    state: str | None = None  # a member's state (`state.State` value)
    pins_fix: str | None = None  # a modified member's step when its local pins file is unusable (`Assessment.pins_fix`)

    @property
    def patched(self) -> bool:
        """A member whose patch skips the placement for an NVFP4 request (an older patch id too)."""
        return self.member and self.state in (State.PATCHED.value, State.PATCHED_OLDER.value)

    @property
    def defaults(self) -> tuple[str, ...]:
        """The functions that write the PLE variables into os.environ at start-up."""
        return tuple(f for f in self.functions if f in CONFIG_DEFAULTS)

    @property
    def skip(self) -> str:
        """The setting that skips the defaults and that the NVFP4 table needs anyway."""
        return "=".join(CONFIG_SKIP)

    def note(self) -> str:
        """The one line status and apply say about a file outside the set: the file, and what to do."""
        if self.unreadable is not None:
            return (f"{CONFIG_REL} cannot be read ({self.unreadable}), so whether it moves the PLE table "
                    f"off the GPU workers by itself is unknown: start `vllm serve` with {self.skip} in "
                    "its environment to be sure")
        if self.defaults:
            return (f"{CONFIG_REL} moves the PLE table off the GPU workers by itself on V100s "
                    f"({self.defaults[0]}), and ple4patch does not patch it: start `vllm serve` with "
                    f"{self.skip} in its environment")
        what = f"{CONFIG_REL} admits the PLE disk cascade by itself ({self.functions[0]}), not patched by ple4patch"
        if self.cascade == "switch":
            return f"{what}: it runs only when {CASCADE_SWITCH}=1 asks for it, which the patched layer refuses"
        if self.cascade == "storage":
            return f"{what}: it takes FP8 PLE storage only, so an NVFP4 checkpoint needs no setting"
        return (f"{what}, in a form ple4patch does not know: check a start with "
                f"`{shell.ple4patch('inspect', 'CHECKPOINT_DIR', self.venv)}`")


def config_placement(engine: Engine) -> ConfigPlacement | None:
    """The automatic PLE placement of the engine's ``vllm/config/vllm.py``, or None (no such file,
    or it places nothing); a file there that cannot be read is said so (``unreadable``)."""
    path = engine.site_packages / CONFIG_REL
    try:
        text = readfile.read_regular(path, limit=CONFIG_READ_LIMIT).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except (readfile.NotRegular, readfile.TooLarge) as exc:
        found = exc.found if isinstance(exc, readfile.NotRegular) else f"larger than {exc.limit:,} bytes"
        return ConfigPlacement(path, (), None, engine.venv, unreadable=found)
    except OSError as exc:
        return ConfigPlacement(path, (), None, engine.venv, unreadable=exc.strerror or type(exc).__name__)
    functions = _functions(text)
    return ConfigPlacement(path, functions, config_cascade_form(text), engine.venv) if functions else None


def orphan_backups(engine: Engine, in_set: list[Engine]) -> list[Path]:
    """Backups of files that are no longer in the set (an upgrade removed the policy file, so
    pip removed the patched file and left ple4patch's backup): never restored."""
    taken = {m.target for m in in_set}
    out = []
    for rel in TARGET_RELS:
        target = engine.site_packages / rel
        if target not in taken and (backup_path(target).exists() or backup_path(target).is_symlink()):
            out.append(backup_path(target))
    return out


@dataclass(frozen=True)
class Journal:
    direction: str
    files: dict  # rel -> {"pristine_sha256": ..., "patched_sha256": ...}
    path: Path

    def as_dict(self) -> dict:
        return {"path": str(self.path), "direction": self.direction, "files": self.files}


def read_journal(site_packages: Path) -> tuple[Journal | None, str | None]:
    """(the journal, None), or (None, why it is unusable) when a file is there but unreadable,
    or (None, None) when there is none."""
    path = journal_path(site_packages)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return None, f"{path.name} is not a regular file"
    try:
        raw = fsio.read_if_exists(path)
    except OSError as exc:
        return None, f"cannot read {path.name}: {exc.strerror or exc}"
    if raw is None:
        return None, None
    try:
        data = json.loads(raw.decode("utf-8"))
        direction, files = data["direction"], data["files"]
        ok = data.get("schema_version") == JOURNAL_SCHEMA and direction in DIRECTIONS and isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        return None, f"{path.name} is not a ple4patch journal (schema {JOURNAL_SCHEMA})"
    return Journal(direction, files, path), None


def write_journal(site_packages: Path, direction: str, files: dict) -> Path:
    assert direction in DIRECTIONS, direction
    path = journal_path(site_packages)
    data = {"schema_version": JOURNAL_SCHEMA, "direction": direction, "files": files}
    fsio.atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=0o644)
    return path


def check_journal_slot(site_packages: Path) -> None:
    """Refuse (before anything is written) when something else is where the journal goes."""
    path = journal_path(site_packages)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ModifiedFile(f"{path} is in the way of ple4patch's journal (not a regular file): nothing "
                           f"written; move it away, then run the command again")


def remove_journal(site_packages: Path) -> bool:
    check_journal_slot(site_packages)
    return fsio.remove(journal_path(site_packages))


@dataclass
class SetAssessment:
    files: list[Assessment]
    journal: Journal | None = None
    journal_problem: str | None = None  # a journal file that cannot be read
    notes: list[str] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)  # backups of files no longer in the set
    config: ConfigPlacement | None = None  # the placement vllm/config/vllm.py does by itself

    @property
    def placement_notes(self) -> list[str]:
        """The note on the release's own placement outside the set (one line, or none)."""
        return [self.config.note()] if self.config is not None and not self.config.member else []

    @property
    def layer(self) -> Assessment:
        return self.files[0]

    @property
    def engine(self) -> Engine:
        return self.layer.engine

    @property
    def rels(self) -> list[str]:
        return [str(a.target.relative_to(a.engine.site_packages).as_posix()) for a in self.files]

    @property
    def state(self) -> str:
        """The files' state when they agree; `unpinned` when none is patched and some are unpinned,
        the others pristine (a release with a file no pin knows, as installed); else `mixed` (a
        killed run's, a hand edit's, a layer patched before the set grew)."""
        states = {a.state for a in self.files}
        if len(states) == 1:
            return states.pop().value
        if states == {State.PRISTINE, State.UNPINNED}:
            return State.UNPINNED.value
        return MIXED

    def by_state(self, *states: State) -> list[Assessment]:
        return [a for a in self.files if a.state in states]


def assess_set(engine: Engine, manifest: Manifest) -> SetAssessment:
    """Every file of the set, assessed on its own against its own pins; and the journal."""
    in_set = members(engine)
    files = [assess(member, manifest.only(str(member.target.relative_to(member.site_packages).as_posix())))
             for member in in_set]
    orphans = orphan_backups(engine, in_set)
    journal, problem = read_journal(engine.site_packages)
    notes = []
    if journal is not None:
        notes.append(f"an interrupted {journal.direction} left {journal.path}: the next "
                     f"`{shell.ple4patch('apply', engine.venv)}` or `{shell.ple4patch('revert', engine.venv)}` finishes the "
                     f"whole set")
    if problem is not None:
        notes.append(f"{problem}; the next apply/revert removes it (each file is assessed on its own)")
    for p in orphans:
        notes.append(f"{p.relative_to(engine.site_packages)} is the backup of a file this engine version "
                     f"no longer has in its patch set (gone, or it no longer places the PLE table); it is never restored (`{shell.ple4patch('revert', '--clean', engine.venv)}` "
                     f"removes it)")
    config = config_placement(engine)
    member = next((a for a in files if a.target == engine.site_packages / CONFIG_REL), None)
    if config is not None and member is not None:
        config = dataclasses.replace(config, member=True, state=member.state.value,
                                     pins_fix=member.pins_fix() if member.lost_pin() else None)
    if config is not None and not config.member:
        notes.append(config.note())
    seen = set()
    for a in files:  # notes of the root of site-packages come once
        a.notes[:] = [n for n in a.notes if not (n in seen or seen.add(n))]
    return SetAssessment(files, journal, problem, notes, orphans, config)

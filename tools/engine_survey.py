#!/usr/bin/env python3
"""Survey the real versions of the engine files ple4patch cares about (dev tool).

Reads every version of `vllm/models/qwen4_exp/nvidia/ple_layer.py` and
`vllm/platforms/runtime_defaults.py` from the git directories it is given (bare mirrors of
public 1Cat-vLLM repositories, read with `git show`, never checked out) and from the real
files this repository already knows (../shared/engines and tests/data/engines, with their
INDEX.md provenance). Versions are deduplicated by sha256; for each one it reports which
repositories and commits hold it, the commit dates, bytes, sha256, and what ple4patch does
with it: for `ple_layer.py` the codemod that applies (a dispatch gets a branch, or the
earlier single assignment is wrapped) and whether the patched output passes the same check
as `apply` (sentinel once, compiles), or the transform's refusal message; for
`runtime_defaults.py` the start-up policy functions it defines and the outcome of the policy
patch (`ple4patch.transform.patch_policy_source`: the second file of a set), or that the file is
not in a set (it defines no PLE placement function).

Everything happens in memory: no engine text is written anywhere; the report (a markdown
table of hashes, provenance and outcomes) goes to stdout or to --out.

    python tools/engine_survey.py --mirrors /work/.mirror            # every <owner>+<name>/repo
    python tools/engine_survey.py --git-dir /path/to/repo.git --out docs/engine-survey.md
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools import engine_corpus, engine_files  # noqa: E402

PLE_LAYER = "vllm/models/qwen4_exp/nvidia/ple_layer.py"
RUNTIME_DEFAULTS = "vllm/platforms/runtime_defaults.py"
PATHS = (PLE_LAYER, RUNTIME_DEFAULTS)
UPSTREAM = "1CatAI/1Cat-vLLM"
# The head of PR #446, named by the engine's 1.5.0 release notes.
RELEASE_COMMITS = {"a3675cd7ad73112d1d52a4c0b7d2b00274f0a402": "1.5.0"}
# The start-up policy functions of runtime_defaults.py that decide PLE placement
# (1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6, vllm/platforms/runtime_defaults.py).
POLICY_NAMES = (
    "apply_runtime_policy_defaults",
    "_apply_sm70_qwen38_disk_ple_defaults",
    "_qwen4exp_ple_cascade_requested",
)


@dataclass
class Holder:
    repository: str
    commit: str
    date: str
    where: str  # "mirror <git dir>", "../shared/engines/<folder>", "tests/data/engines/<label>"
    refs: str = ""
    release: str = ""


@dataclass
class Version:
    path: str
    sha256: str
    data: bytes
    holders: list[Holder] = field(default_factory=list)


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def _git_ok(git_dir: Path, *args: str) -> bool:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True).returncode == 0


def mirror_name(git_dir: Path) -> str:
    """`owner/name` from a mirror laid out as <root>/<owner>+<name>/repo."""
    folder = git_dir.parent.name if git_dir.name in ("repo", ".git") else git_dir.name
    return folder.replace("+", "/", 1).removesuffix(".git")


@dataclass
class MirrorScan:
    git_dir: Path
    repository: str
    newest: str  # date of the newest commit on any ref
    refs: int
    commits: dict[str, int]  # path -> commits that touched it
    release_commits: dict[str, bool]  # commit -> present in the mirror


def _present(git_dir: Path, specs: list[str]) -> set[str]:
    """Which of the `<rev>:<path>` / `<rev>` specs name an object in the git dir (one batch call)."""
    if not specs:
        return set()
    out = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "--batch-check"],
                         input="\n".join(specs) + "\n", capture_output=True, text=True, check=True).stdout
    return {spec for spec, line in zip(specs, out.splitlines()) if not line.endswith(" missing")}


def scan_mirror(git_dir: Path, versions: dict[tuple[str, str], Version], upstream: Path | None) -> MirrorScan:
    repository = mirror_name(git_dir)
    newest = _git(git_dir, "log", "--all", "-1", "--format=%cI").decode().strip()
    tips: dict[str, list[str]] = {}  # commit -> refs pointing at it (tags peeled)
    for line in _git(git_dir, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)").decode().splitlines():
        ref, obj, *peeled = line.split()
        tips.setdefault(peeled[0] if peeled else obj, []).append(ref)
    nrefs = sum(len(r) for r in tips.values())
    touched = {}
    for path in PATHS:
        # every commit that touched the path, plus every ref tip that holds it
        log = _git(git_dir, "log", "--all", "--format=%H", "--", path).decode().split()
        touched[path] = len(log)
        candidates = list(dict.fromkeys(log + list(tips)))
        held = _present(git_dir, [f"{c}:{path}" for c in candidates])
        for commit in candidates:
            if f"{commit}:{path}" not in held:
                continue  # deleted there, or a tip without the file
            data = _git(git_dir, "show", f"{commit}:{path}")
            date = _git(git_dir, "log", "-1", "--format=%cI", commit).decode().strip()[:10]
            holder_repo = repository
            if upstream is not None and repository != UPSTREAM and _present(upstream, [commit]):
                holder_repo = UPSTREAM  # upstream history carried by the fork
            containing = _git(git_dir, "for-each-ref", "--contains", commit,
                              "--format=%(refname:short)").decode().split()
            at_tags = [r.removeprefix("refs/tags/") for r in tips.get(commit, []) if r.startswith("refs/tags/")]
            release = ",".join(filter(None, [RELEASE_COMMITS.get(commit, "")] + at_tags))
            ref_text = ", ".join(containing[:4]) + (f" … ({len(containing)} refs)" if len(containing) > 4 else "")
            _add(versions, path, data, Holder(holder_repo, commit, date, f"mirror {git_dir}", ref_text, release))
    present = {c: bool(_present(git_dir, [c])) for c in RELEASE_COMMITS}
    return MirrorScan(git_dir, repository, newest[:10], nrefs, touched, present)


def _add(versions: dict[tuple[str, str], Version], path: str, data: bytes, holder: Holder) -> None:
    sha = hashlib.sha256(data).hexdigest()
    version = versions.setdefault((path, sha), Version(path, sha, data))
    if not any(h.repository == holder.repository and h.commit == holder.commit for h in version.holders):
        version.holders.append(holder)


def scan_local(versions: dict[tuple[str, str], Version]) -> list[str]:
    """The real files already in ../shared/engines and tests/data/engines (checked against their
    INDEX.md); returns notes on what was absent."""
    notes = []
    shared = engine_files.shared_engines()
    if not shared:
        notes.append(f"{engine_files.SHARED_ENGINES} absent: its files are not in this survey")
    for row in shared:
        data = row.data
        if hashlib.sha256(data).hexdigest() != row.sha256:
            raise SystemExit(f"{row.path}: sha256 differs from its INDEX.md")
        repo = "rapatel0/1Cat-vLLM" if "fork" in row.folder else UPSTREAM
        _add(versions, PLE_LAYER, data, Holder(repo, row.commit, "unknown", f"../shared/engines/{row.folder}"))
    for name, path in (("ple_layer.py", PLE_LAYER), ("runtime_defaults.py", RUNTIME_DEFAULTS)):
        for row in engine_corpus.corpus_files(name):
            data = engine_corpus.check(row)
            assembled = "assembled" in row.shape.lower()
            where = f"tests/data/engines/{row.label}" + (" (assembled from index pages)" if assembled else "")
            _add(versions, path, data, Holder(row.repository, row.commit, row.date, where, "", row.release or ""))
    return notes


@dataclass
class Outcome:
    shape: str
    result: str
    patched_sha256: str = ""


def ple_layer_outcome(data: bytes) -> Outcome:
    import libcst as cst

    from ple4patch.errors import Ple4Error
    from ple4patch.hashing import sha256_hex
    from ple4patch.output_check import check_output
    from ple4patch.transform import patch_source
    from ple4patch.transform.pipeline import ngram_embedding_transform

    text = data.decode("utf-8")
    try:
        shape = ngram_embedding_transform(cst.parse_module(text)).__name__
    except Exception as exc:  # noqa: BLE001  (reported, not hidden)
        shape = f"(no shape: {type(exc).__name__}: {exc})"
    try:
        out = check_output(patch_source(text), PLE_LAYER)
    except Ple4Error as exc:
        return Outcome(shape, f"refused: {exc}")
    return Outcome(shape, "patched; output carries the sentinel once and compiles", sha256_hex(out))


def runtime_defaults_outcome(data: bytes) -> Outcome:
    try:
        tree = ast.parse(data.decode("utf-8"))
    except SyntaxError as exc:
        return Outcome("(does not parse)", f"not a ple4patch target; {exc}")
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    have = [n for n in POLICY_NAMES if n in defined]
    missing = [n for n in POLICY_NAMES if n not in defined]
    shape = "defines " + ", ".join(f"`{n}`" for n in have) if have else "defines none of the PLE policy functions"
    if missing:
        shape += "; lacks " + ", ".join(f"`{n}`" for n in missing)
    from ple4patch.errors import Ple4Error
    from ple4patch.hashing import sha256_hex
    from ple4patch.output_check import check_output
    from ple4patch.policy_file import places_ple
    from ple4patch.transform import patch_policy_source

    text = data.decode("utf-8")
    if not places_ple(text):
        return Outcome(shape, "not in a patch set (no PLE placement to override): the set is ple_layer.py alone")
    try:
        out = check_output(patch_policy_source(text), RUNTIME_DEFAULTS)
    except Ple4Error as exc:
        return Outcome(shape, f"refused: {exc}")
    return Outcome(shape, "patched (policy patch, second file of the set); output carries the sentinel once and compiles",
                   sha256_hex(out))


def outcome(version: Version) -> Outcome:
    return ple_layer_outcome(version.data) if version.path == PLE_LAYER else runtime_defaults_outcome(version.data)


def exact_bytes(holder: Holder) -> bool:
    """False for a file assembled from a nearby version (its sha256 need not be the real file's)."""
    return "assembled" not in holder.where


def plausible_install(version: Version) -> bool:
    """Held, with its exact bytes, at a 1CatAI/1Cat-vLLM commit or a release."""
    return any((h.repository == UPSTREAM or h.release) and exact_bytes(h) for h in version.holders)


def _patch_id() -> str:
    from ple4patch.sentinel import PATCH_ID

    return PATCH_ID


def report(versions: list[Version], scans: list[MirrorScan], notes: list[str]) -> str:
    lines = ["Generated by `tools/engine_survey.py`: every version of "
             f"`{PLE_LAYER}` and `{RUNTIME_DEFAULTS}` found in the git mirrors listed below "
             "and in the real files this repository already holds (`../shared/engines`, "
             "`tests/data/engines`), deduplicated by sha256, with what ple4patch does with each. "
             "No engine text is stored here.", "",
             f"Patched sha256s are those of this build's patch id `{_patch_id()}`.", ""]
    lines += ["## Mirrors read", "",
              "| repository | git dir | newest commit | refs | commits touching ple_layer.py | commits touching runtime_defaults.py | "
              + " | ".join(f"has {c[:8]} ({r})" for c, r in RELEASE_COMMITS.items()) + " |",
              "|---|---|---|---|---|---|" + "---|" * len(RELEASE_COMMITS)]
    for s in scans:
        lines.append(f"| {s.repository} | `{s.git_dir}` | {s.newest} | {s.refs} | {s.commits[PLE_LAYER]} | "
                     f"{s.commits[RUNTIME_DEFAULTS]} | "
                     + " | ".join("yes" if s.release_commits[c] else "no" for c in RELEASE_COMMITS) + " |")
    lines += ["", "## Versions", "",
              "| file | sha256 | bytes | held by (repository, commit, date, where) | plausible install | shape | outcome | patched sha256 |",
              "|---|---|---|---|---|---|---|---|"]
    for v in versions:
        o = outcome(v)
        held = "<br>".join(
            f"{h.repository} `{h.commit}` {h.date} ({h.where}"
            + (f"; refs {h.refs}" if h.refs else "") + (f"; release {h.release}" if h.release else "") + ")"
            for h in v.holders)
        lines.append(f"| {Path(v.path).name} | `{v.sha256}` | {len(v.data)} | {held} | "
                     f"{'yes' if plausible_install(v) else 'no'} | {o.shape} | {o.result} | "
                     f"{('`' + o.patched_sha256 + '`') if o.patched_sha256 else ''} |")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- engine_survey.py: begin -->", "<!-- engine_survey.py: end -->"


def splice(current: str, generated: str) -> str:
    """`current` with the text between the BEGIN/END markers replaced by `generated` (the
    hand-written rest of the document is kept); the whole report when there are no markers."""
    block = f"{BEGIN}\n{generated}{END}"
    if BEGIN in current and END in current:
        head, rest = current.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    if BEGIN in current or END in current:
        raise SystemExit(f"the report file has only one of the markers {BEGIN!r} / {END!r}: fix it by hand")
    return (current.rstrip("\n") + "\n\n" if current else "") + block + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", type=Path, action="append", default=[], help="a bare git dir to read (repeatable)")
    ap.add_argument("--mirrors", type=Path, help="a folder of <owner>+<name>/repo git dirs: read them all")
    ap.add_argument("--upstream", type=Path, help=f"the {UPSTREAM} git dir (commits found there are upstream history)")
    ap.add_argument("--no-local", action="store_true", help="leave out ../shared/engines and tests/data/engines")
    ap.add_argument("--out", type=Path, help="write the markdown report here (default: stdout)")
    args = ap.parse_args(argv)

    git_dirs = list(args.git_dir)
    if args.mirrors:
        git_dirs += sorted(p for p in args.mirrors.glob("*/repo") if p.is_dir())
    upstream = args.upstream
    if upstream is None:
        upstream = next((g for g in git_dirs if mirror_name(g) == UPSTREAM), None)
    versions: dict[tuple[str, str], Version] = {}
    scans = [scan_mirror(g, versions, upstream) for g in git_dirs]
    notes = [] if args.no_local else scan_local(versions)
    ordered = sorted(versions.values(), key=lambda v: (v.path != PLE_LAYER, -plausible_install(v), v.sha256))
    text = report(ordered, scans, notes)
    if args.out:
        if args.out.suffix != ".md":
            raise SystemExit(f"--out {args.out}: the report is markdown; give a .md path")
        args.out.write_text(splice(args.out.read_text(encoding="utf-8") if args.out.is_file() else "", text),
                            encoding="utf-8")
        print(f"wrote {args.out} ({len(ordered)} version(s), {len(scans)} mirror(s))")
    else:
        sys.stdout.write("# Survey of the real engine files\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""tools/engine_survey.py on throw-away git mirrors built here from the stand-in engine file."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tools import engine_files, engine_survey as es

pytestmark = pytest.mark.skipif(engine_files.standin_file() is None, reason="no stand-in engine file")

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null",
           "PATH": "/usr/bin:/bin"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_file(work: Path, rel: str, data: bytes, message: str) -> str:
    path = work / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    git(work, "add", rel)
    git(work, "commit", "-qm", message)
    return git(work, "rev-parse", "HEAD")


def mirror(work: Path, root: Path, name: str) -> Path:
    dest = root / name / "repo"
    subprocess.run(["git", "clone", "-q", "--mirror", str(work), str(dest)], env=GIT_ENV, check=True)
    return dest


@pytest.fixture
def mirrors(tmp_path):
    standin = engine_files.standin_file().read_bytes()
    up = tmp_path / "up"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    first = commit_file(up, es.PLE_LAYER, standin, "layer")
    policy = b"def apply_runtime_policy_defaults(config):\n    return config\n"
    third = commit_file(up, es.RUNTIME_DEFAULTS, policy, "policy")
    root = tmp_path / "mirrors"
    upstream = mirror(up, root, "1CatAI+1Cat-vLLM")
    fork = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", str(up), str(fork)], env=GIT_ENV, check=True)
    second = commit_file(fork, es.PLE_LAYER, standin + b"# a fork's change\n", "fork change")
    git(fork, "tag", "v9.9.9")
    broken = commit_file(fork, es.PLE_LAYER, b"x = 1\n", "not an engine layer")
    git(fork, "branch", "-f", "old", second)
    fork_mirror = mirror(fork, root, "someone+1Cat-vLLM")
    return dict(root=root, upstream=upstream, fork=fork_mirror, first=first, second=second,
                third=third, broken=broken, standin=standin)


def test_versions_are_deduplicated_with_provenance_and_outcome(mirrors):
    versions: dict = {}
    scans = [es.scan_mirror(g, versions, mirrors["upstream"]) for g in (mirrors["upstream"], mirrors["fork"])]
    assert [s.repository for s in scans] == ["1CatAI/1Cat-vLLM", "someone/1Cat-vLLM"]
    assert scans[1].commits == {es.PLE_LAYER: 3, es.RUNTIME_DEFAULTS: 1}
    by_sha = {v.sha256: v for v in versions.values()}
    assert len(by_sha) == 4  # the stand-in, the fork's change, the broken file, the policy file
    pristine = by_sha[hashlib.sha256(mirrors["standin"]).hexdigest()]
    # the commit that wrote it and the branch tip that still holds it; the fork carries both
    # upstream commits: recorded once each, as the upstream repository's
    assert [(h.repository, h.commit) for h in pristine.holders] == [
        ("1CatAI/1Cat-vLLM", mirrors["first"]), ("1CatAI/1Cat-vLLM", mirrors["third"])]
    assert es.plausible_install(pristine)
    forked = by_sha[hashlib.sha256(mirrors["standin"] + b"# a fork's change\n").hexdigest()]
    assert [(h.repository, h.release) for h in forked.holders] == [("someone/1Cat-vLLM", "v9.9.9")]
    assert "old" in forked.holders[0].refs
    assert es.plausible_install(forked)  # a release tag
    outcome = es.outcome(pristine)
    assert outcome.result.startswith("patched") and len(outcome.patched_sha256) == 64
    refused = es.outcome(by_sha[hashlib.sha256(b"x = 1\n").hexdigest()])
    assert refused.result.startswith("refused: anchor ")  # the transform's own message
    assert "Qwen4ExpNGramEmbedding" in refused.shape
    policy = next(v for v in by_sha.values() if v.path == es.RUNTIME_DEFAULTS)
    shape = es.outcome(policy).shape
    assert "lacks `_apply_sm70_qwen38_disk_ple_defaults`" in shape
    assert shape.startswith("defines `apply_runtime_policy_defaults`") and shape.endswith("`_qwen4exp_ple_cascade_requested`")


def test_report_is_spliced_between_markers_and_keeps_the_rest(mirrors, tmp_path):
    out = tmp_path / "survey.md"
    out.write_text(f"# head\n\n{es.BEGIN}\nSTALE BLOCK\n{es.END}\n\n## tail\n", encoding="utf-8")
    assert es.main(["--mirrors", str(mirrors["root"]), "--no-local", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# head\n\n" + es.BEGIN) and text.endswith(f"{es.END}\n\n## tail\n")
    assert "STALE BLOCK" not in text.split(es.BEGIN)[1]
    assert mirrors["second"] in text and hashlib.sha256(mirrors["standin"]).hexdigest() in text
    # no engine text lands in the report: none of its long lines
    long_lines = [ln.strip() for ln in mirrors["standin"].decode().splitlines() if len(ln.strip()) > 50]
    assert long_lines and not [ln for ln in long_lines if ln in text]


def test_half_marked_report_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="only one of the markers"):
        es.splice(f"# head\n{es.BEGIN}\n", "x\n")

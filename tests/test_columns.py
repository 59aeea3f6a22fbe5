"""Text for people in 100 columns (`ple4patch.columns`): prose under its label, commands kept
copy-pasteable, files relative to site-packages."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

import kit
from ple4patch import columns
from ple4patch.columns import CONTINUATION, WIDTH

VENV = "/home/alexandra/.local/share/virtualenvs/qwen38-flash-next-Ab3dE9fG"
SITE = VENV + "/lib/python3.12/site-packages"
TARGET = SITE + "/vllm/models/qwen4_exp/nvidia/ple_layer.py"


def fits(text: str) -> bool:
    return all(len(line) <= WIDTH or " " not in line.strip().removesuffix(CONTINUATION) for line in text.splitlines())


def test_prose_wraps_under_its_label_and_never_breaks_a_word():
    line = "note:    " + " ".join(["word"] * 40) + " " + "/p" * 60
    out = columns.fit(line)
    assert fits(out) and out.splitlines()[0].startswith("note:    word")
    assert all(x.startswith(" " * 9) for x in out.splitlines()[1:])
    assert out.splitlines()[-1].strip() == "/p" * 60  # longer than a line: alone on its own
    assert kit.logical_lines(out) == [line]


def test_an_error_line_hangs_two_columns_in():
    line = "ple4patch apply: error: " + "x " * 60
    out = columns.fit(line).splitlines()
    assert out[0].startswith("ple4patch apply: error: x") and out[1].startswith("  x")


def test_a_command_moves_whole_or_goes_on_shell_style():
    fits_fresh = f"next:    review with `ple4patch apply --dry-run /opt/engine` and then some more words to wrap it {'y ' * 10}"
    out = columns.fit(fits_fresh)
    assert any(line.strip().startswith("`ple4patch apply --dry-run /opt/engine`") or
               "`ple4patch apply --dry-run /opt/engine`" in line for line in out.splitlines())
    long_one = f"next:    review with `ple4patch apply --dry-run {VENV}`, then `ple4patch apply --allow-unknown {VENV}`"
    out = columns.fit(long_one)
    assert out.splitlines() == [
        "next:    review with",
        "         `ple4patch apply --dry-run \\",
        f"           {VENV}`, then",
        "         `ple4patch apply --allow-unknown \\",
        f"           {VENV}`",
    ]
    pasted = kit.shell_lines(out)[1].strip().strip("`,").removesuffix("`, then")
    assert shlex.split(pasted) == ["ple4patch", "apply", "--dry-run", VENV]


def test_a_bare_command_and_a_pip_requirement_stay_whole():
    line = f"next:    reinstall the engine (pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'), then ple4patch apply {VENV}"
    out = columns.fit(line)
    shell = kit.shell_lines(out)
    assert any("pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'" in x for x in shell), out
    assert any(f"ple4patch apply {VENV}" in x for x in shell), out
    assert fits(out)


def test_the_venvs_own_pip_stays_whole_with_its_interpreter():
    """`VENV/bin/python -m pip install ...` (the path quoted when it must be) is one command: the
    interpreter never stays behind on the line before, as a shell would then run it alone."""
    for py in (f"{VENV}/bin/python", "'/opt/my engine/bin/python'"):
        cmd = f"{py} -m pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'"
        line = f"next:    reinstall the engine ({cmd}), then ple4patch apply {VENV}"
        out = columns.fit(line)
        assert fits(out), out
        shell = kit.shell_lines(out)
        assert any(cmd in x for x in shell), out
        (pasted,) = [x for x in shell if "-m pip" in x]
        assert shlex.split(pasted[pasted.index(py):].split(")")[0])[:4] == [shlex.split(py)[0], "-m", "pip", "install"]


def test_quotes_open_words_only():
    """A single-quoted span is never split; an apostrophe inside a word opens nothing."""
    line = "x: " + "the engine's RECORD " * 6 + "pass --kernel-config '{\"ple_disk_cascade\": false}' to vllm serve"
    out = columns.fit(line)
    assert "'{\"ple_disk_cascade\": false}'" in "".join(out.splitlines()) or any(
        "'{\"ple_disk_cascade\": false}'" in x for x in out.splitlines())
    assert max(len(x) for x in out.splitlines()) <= WIDTH


def test_files_relative_to_site_packages_the_directory_named_once():
    text = (f"ple4patch revert: error: cannot revert {TARGET}: its backup {TARGET}.bak-pre-ple4 is stale; "
            f"run `ple4patch apply {VENV}`")
    out = columns.relative_to_site(text)
    assert out == ("ple4patch revert: error: cannot revert vllm/models/qwen4_exp/nvidia/ple_layer.py "
                   f"(in {SITE}): its backup vllm/models/qwen4_exp/nvidia/ple_layer.py.bak-pre-ple4 is stale; "
                   f"run `ple4patch apply {VENV}`")
    named = f"no engine in {SITE}; {SITE}/vllm is left over."
    assert columns.relative_to_site(named) == f"no engine in {SITE}; vllm is left over."
    two = f"{SITE}/a and /opt/other/lib/python3.11/site-packages/b"
    assert columns.relative_to_site(two) == two  # several site-packages: nothing shortened
    inside = f"run `python {SITE}/x.py` on {SITE}/y"
    assert columns.relative_to_site(inside) == f"run `python {SITE}/x.py` on y (in {SITE})"


def test_a_site_packages_path_with_a_space_or_quote_is_shown_whole():
    for venv in ("/tmp/x sp/engine", "/tmp/it's/engine", ODD_VENV):
        site = venv + "/lib/python3.11/site-packages"
        text = f"target:  {site}/vllm/models/qwen4_exp/nvidia/ple_layer.py\nnote:    recorded a pin in {site}/.p.json"
        assert columns.relative_to_site(text) == text  # where the path starts is not known: whole
        assert f"{site}/vllm/models" in " ".join(kit.logical_lines(columns.for_people(text)))


def test_a_quoted_command_wraps_as_a_shell_continuation():
    venv = "/srv/models/qwen3.8-flash-next/engine venv with spaces in its name/and a bit more"
    line = f"if the diff looks right, patch it with: ple4patch apply --allow-unknown {shlex.quote(venv)}"
    out = columns.fit(line)
    assert out.splitlines()[1].endswith(CONTINUATION) and fits(out), out
    (pasted,) = [x for x in kit.shell_lines(out) if "ple4patch apply" in x]
    assert shlex.split(pasted.strip()) == ["ple4patch", "apply", "--allow-unknown", venv], out


def test_verbose_keeps_every_path_whole():
    text = f"cannot revert {TARGET}: its backup is stale"
    assert TARGET in columns.for_people(text, verbose=True).replace("\n", "")
    assert TARGET not in columns.for_people(text).replace("\n", "")


def test_a_report_keeps_its_columns():
    line = "placement   ! " + "the engine admits the cascade " * 5
    out = columns.fit_lines([(line, 14), (f"              change: ple4patch apply {VENV} (patches x too)", 22)])
    lines = out.splitlines()
    assert lines[0].startswith("placement   ! the engine") and lines[1].startswith(" " * 14 + "cascade")
    assert lines[2:] == ["              change: ple4patch apply \\", f"{'':24}{VENV} (patches", f"{'':22}x too)"]


ODD_VENV = "/srv/it's my engine/ünï venv"  # a space, a quote, non-ASCII: quoted in a command
QUOTED = shlex.quote(ODD_VENV)

WHOLE = [f"`ple4patch apply --allow-unknown {VENV}`", f"ple4patch verify {VENV}",
         f"ple4patch apply --dry-run {QUOTED}", f"`ple4patch revert --clean {QUOTED}`",
         f"{shlex.quote(ODD_VENV + '/bin/python')} -m pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'",
         "pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'", "'a quoted span'",
         f"{VENV}/bin/python -m pip install --force-reinstall --no-deps '1cat-vllm==1.5.1'"]
_words = st.lists(st.one_of(
    st.text("abcdefghij", min_size=1, max_size=12),
    st.text("abc/._-", min_size=20, max_size=130).map(lambda s: "/" + s),
    st.sampled_from(WHOLE),
), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(label=st.sampled_from(["", "note:    ", "next:    ", "ple4patch apply: error: "]), words=_words)
def test_any_line_fits_and_reads_back_as_it_was(label, words):
    line = label + " ".join(words)
    out = columns.fit(line)
    assert fits(out), out
    (back,) = kit.logical_lines(out)
    assert back.split() == line.split(), out  # nothing lost, nothing added but line breaks
    shell = "\n".join(kit.shell_lines(out))
    for w in set(words) & set(WHOLE):  # a command or a quoted span: on one line as a shell reads it
        assert w in shell, out
    assert columns.fit(out) == out  # fitting again changes nothing


def test_a_path_after_a_quote_inside_a_word_is_not_a_site_packages():
    text = "target:  /tmp/o'/v/lib/python3.11/site-packages/vllm/ple_layer.py"
    assert columns.relative_to_site(text) == text
    quoted = "see '/opt/e/lib/python3.12/site-packages/vllm/x.py' and `/opt/e/lib/python3.12/site-packages/vllm/y.py`"
    # a quote that opens a word is fine; a backticked path is a command, kept whole
    assert columns.relative_to_site(quoted) == (
        "see 'vllm/x.py (in /opt/e/lib/python3.12/site-packages)' and `/opt/e/lib/python3.12/site-packages/vllm/y.py`")


def test_a_report_line_with_a_newline_in_a_path_loses_no_line():
    lines = [("files       /tmp/x\ny/lib/python3.11/site-packages/vllm/q.py: pristine", 12), ("memory      fits", 12),
             ("WILL START", 0)]
    out = columns.fit_lines(lines).split("\n")
    assert out == ["files       /tmp/x\\ny/lib/python3.11/site-packages/vllm/q.py: pristine", "memory      fits", "WILL START"]

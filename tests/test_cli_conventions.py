"""Conventions of the command line: --help in the order of use with whole one-line help, VENV
and CHECKPOINT_DIR completing as directories (click's completion API, and the shell's
protocol end to end), one way to name the venv (inspect's positional VENV, --venv kept)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

import kit
from ple4patch.cli import main
from ple4patch.paths import backup_path

WORKFLOW = ["apply", "status", "verify", "revert", "inspect", "selftest"]


def test_help_lists_the_commands_in_workflow_order_with_whole_one_line_help():
    res = CliRunner().invoke(main, ["--help"], terminal_width=80)
    assert res.exit_code == 0
    listed = res.output.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in listed if line.strip()]
    assert names == WORKFLOW
    for line in listed:
        if not line.strip():
            continue
        name, text = line.split(None, 1)
        assert text == main.commands[name].short_help, "the listing shows the whole one-line help"
        assert not text.endswith("...") and len(line) <= 80


def test_every_command_and_option_has_help():
    for name, command in main.commands.items():
        assert command.help and command.short_help, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{name} {param.opts}"


def completions(args: list[str], incomplete: str):
    return ShellComplete(main, {}, "ple4patch", "_PLE4PATCH_COMPLETE").get_completions(args, incomplete)


@pytest.mark.parametrize("args", [["apply"], ["status"], ["verify"], ["revert"], ["selftest"],
                                  ["apply", "--dry-run"], ["inspect"], ["inspect", "ckpt"],
                                  ["inspect", "ckpt", "--venv"]])
def test_venv_and_checkpoint_dir_complete_as_directories(args):
    items = completions(args, "/tm")
    assert [(i.type, i.value) for i in items] == [("dir", "/tm")]


def test_command_names_complete():
    assert [i.value for i in completions([], "s")] == ["status", "selftest"]
    assert [i.value for i in completions([], "re")] == ["revert"]


def test_bash_completion_end_to_end_says_dir():
    """What bash's completion function receives: `dir,<incomplete>` (it then completes paths)."""
    env = {**kit.cli_env(), "_PLE4PATCH_COMPLETE": "bash_complete", "COMP_WORDS": "ple4patch inspect /tm",
           "COMP_CWORD": "2"}
    proc = subprocess.run([sys.executable, "-c", "from ple4patch.cli import main; main(prog_name='ple4patch')"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["dir,/tm"]


@pytest.fixture
def standin_venv(wheelhouse, engine_venv):
    return engine_venv(wheelhouse.engine(kit.standin_bytes(), version="1.5.1"))


def test_inspect_names_the_venv_as_every_command_does(tmp_path, standin_venv):
    ckpt_factory = pytest.importorskip("ckpt_factory")
    ckpt = ckpt_factory.make(tmp_path / "ckpt", "nvfp4_rowpacked")
    env = {"PLE4PATCH_EXTRA_MANIFESTS": str(kit.TEST_MANIFEST)}
    runs = [["inspect", str(ckpt), str(standin_venv)], ["inspect", str(ckpt), "--venv", str(standin_venv)],
            ["inspect", "--venv", str(standin_venv), str(ckpt), str(standin_venv)]]
    engines = []
    for args in runs:
        res = CliRunner().invoke(main, [*args, "--json"], env=env)
        d = kit.validate(json.loads(res.stdout))
        engines.append((d["engine"]["venv"], d["engine"]["state"]))
    assert engines == [(str(standin_venv), "pristine")] * 3
    res = CliRunner().invoke(main, ["inspect", str(ckpt), str(standin_venv), "--venv", str(tmp_path)])
    assert res.exit_code == 2 and "two venvs given" in res.stderr


@pytest.mark.parametrize("option", ["--stat", "--no-pager"])
def test_dry_run_options_without_dry_run_are_refused_and_write_nothing(standin_venv, option):
    target = kit.target_of(standin_venv)
    before = target.read_bytes()
    env = {"PLE4PATCH_EXTRA_MANIFESTS": str(kit.TEST_MANIFEST)}
    res = CliRunner().invoke(main, ["apply", option, str(standin_venv)], env=env)
    assert res.exit_code == 2 and f"{option} goes with --dry-run" in res.stderr, res.output
    assert target.read_bytes() == before and not backup_path(target).exists()
    res = CliRunner().invoke(main, ["apply", option, "--dry-run", str(standin_venv)], env=env)
    assert res.exit_code == 0 and target.read_bytes() == before, res.output

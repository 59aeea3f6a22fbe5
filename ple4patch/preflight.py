"""``ple4patch inspect CHECKPOINT_DIR VENV``: will `vllm serve` start with this table in this venv?

Before a 100 GB model takes minutes to start, one verdict from what can be read in seconds:

- the checkpoint (``ckpt.inspect``: config, tensors, exact pinned bytes per rank and host
  against this host's MemAvailable, the host/VRAM split of the host budget);
- the patch state of every file of the engine's patch set (``fileset.assess_set``: the PLE
  layer, and the start-up policy file where the release has one);
- the explicit settings the NVFP4 table refuses, from this environment and the `vllm serve`
  options given (``--serve-args``), judged by the same rules the patched engine applies
  (``kernels.nvfp4_policy.PLE4_POLICY_RULES``);
- what the engine's automatic PLE placement will choose where the release has one: 1Cat-vLLM's
  ``vllm/platforms/runtime_defaults.py`` (1CatAI/1Cat-vLLM 51c0f97201a70a644a80ac21d292a15eff0dc4e6)
  sets ``VLLM_PLE_CPU_OFFLOAD=1`` and ``VLLM_PLE_DISK_OFFLOAD=1`` in
  ``_apply_sm70_qwen38_disk_ple_defaults`` (the SM70 Qwen3.8 dual-compile lane, unless one of
  ``VLLM_SM70_QWEN38_HYBRID_PLE``, ``VLLM_PLE_CPU_OFFLOAD``, ``VLLM_PLE_DISK_OFFLOAD`` is set
  explicitly) and admits the disk cascade in ``_qwen4exp_ple_cascade_requested``
  (``KernelConfig.ple_disk_cascade``, on by default). Either moves the table out of the GPU
  workers, and the patched loader then refuses to start. The patched policy file skips both
  for an NVFP4 request. Releases before the policy file place the table from
  ``vllm/config/vllm.py`` (``fileset.config_placement``; ChainZeaxion/1Cat-vLLM
  ebeb346a66d5d485d71fb2fc4079c8b891dd9250 there: ``_apply_sm70_qwen38_hybrid_ple_defaults``
  sets the three PLE variables to 1 unless one of them is in the environment at all, lines
  2127-2149), which ple4patch patches with the set: patched, it skips that default for an
  NVFP4 request; not patched, the start is judged from the environment given, and the change
  is ``ple4patch apply --allow-unknown VENV`` (where no pin of its bytes ships) or ``export
  VLLM_PLE_CPU_OFFLOAD=0``. Its own placement is all that module changes, so its not being
  patched is judged there, not as a file that blocks by itself.

An FP8 table is read by the engine as installed (stock reads FP8; the patched policy and loader
act on an NVFP4 request only): for it the patch state and the NVFP4 rules block nothing, and only
the memory and the checkpoint's own problems can.

Reads files only: no torch, no engine import. The environment is this process's (the shell
`vllm serve` will be started from), unless given.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Mapping

from . import engine as engine_mod
from . import manifest as manifest_mod
from . import serve_model, shell, write
from .ckpt.inspect import inspect_checkpoint
from .ckpt.layout import STOCK_ENGINE_READS
from .ckpt.memory import UPPER_BOUND_WHY, gib
from .ckpt.remedy import USE_A_READABLE_CHECKPOINT, change_of
from .ckpt.report import TEXT_WIDTH, body_lines
from .columns import fit_lines
from .errors import EXIT_CHECKPOINT, EXIT_OK, UsageError
from .fileset import ConfigPlacement, assess_set
from .kernels import nvfp4_policy as policy
from .paths import CONFIG_REL, POLICY_REL
from .policy_file import CASCADE_SWITCH, CONFIG_DEFAULTS, CONFIG_SKIP, CONFIG_SKIPPED_BY
from .result import Result
from .state import State

# The engine's automatic PLE placement, by the name of the function that applies it in the
# release's policy file (runtime_defaults.py at 1Cat-vLLM 51c0f972).
AUTO_DISK_DEFAULTS = "_apply_sm70_qwen38_disk_ple_defaults"
AUTO_CASCADE = "_qwen4exp_ple_cascade_requested"
AUTO_DISK_SKIPPED_BY = ("VLLM_SM70_QWEN38_HYBRID_PLE", "VLLM_PLE_CPU_OFFLOAD", "VLLM_PLE_DISK_OFFLOAD")
CASCADE_SETTING = policy.PLE4_POLICY_CASCADE


@dataclass
class Finding:
    """One thing the preflight looked at: `blocks` when `vllm serve` would refuse to start."""

    area: str  # files, environment, placement, memory, checkpoint
    message: str
    blocks: bool = False
    change: str | None = None  # what to do, when it blocks

    def to_json(self) -> dict:
        return {"area": self.area, "blocks": self.blocks, "message": self.message, "change": self.change}


@dataclass
class ServeOptions:
    """The `vllm serve` options the rules look at, as given with --serve-args."""

    settings: dict = field(default_factory=dict)  # names as in PLE4_POLICY_RULES
    cascade: bool | None = None  # --kernel-config ple_disk_cascade, when given
    tensor_parallel_size: int | None = None
    tp_option: str | None = None  # how it was given: "--tensor-parallel-size 4", "-tp 4"
    model: str | None = None  # the model the engine loads (`serve_model.model_of`); None: CHECKPOINT_DIR
    model_option: str | None = None
    environ: dict = field(default_factory=dict)  # NAME=VALUE words before the command (`env NAME=VALUE vllm ...`)


# The options the preflight reads, by their full names, and the short forms the engine defines
# for them (vllm/engine/arg_utils.py, 1CatAI/1Cat-vLLM ae13773a0: `"--quantization", "-q"`,
# `"--tensor-parallel-size", "-tp"`). The kernel config's own spellings are
# ``kernels.nvfp4_policy.ple4_policy_is_kernel_config``'s.
READ_OPTIONS = ("--tensor-parallel-size", "--quantization", "--load-format", "--model", "--config")
SHORT_OPTIONS = {"-tp": "--tensor-parallel-size", "-q": "--quantization"}


def _option(word: str, source: str | None) -> tuple[str | None, str | None]:
    """(the full name of a read option, its attached value or None) of one word, as argparse
    reads it: ``--name``, ``--name=VALUE``, ``-tp``, ``-tp=VALUE``, ``-q``, ``-q=VALUE``, ``-qVALUE``
    (argparse attaches a value with no ``=`` only to a one-letter option). A word that argparse
    would take as an abbreviation of a read option (vLLM's parser keeps ``allow_abbrev``) is a
    usage error: ple4patch does not know the engine's whole option list, so it cannot tell which
    option an abbreviation stands for. (None, None) for any other word."""
    where = f" (in --config {source})" if source else ""
    if word.startswith("--"):
        key, eq, value = word.partition("=")
        if key in READ_OPTIONS:
            return key, value if eq else None
        full = [name for name in READ_OPTIONS if len(key) > 2 and name.startswith(key)]
        if full and "." not in key:
            raise UsageError(f"--serve-args: {key}{where}: write {' or '.join(full)} in full; ple4patch does not "
                             "guess abbreviations")
        return None, None
    if not word.startswith("-") or len(word) < 2:
        return None, None
    for short, full_name in SHORT_OPTIONS.items():
        if word == short:
            return full_name, None
        if word.startswith(short + "="):
            return full_name, word[len(short) + 1:]
        if word.startswith(short):
            if len(short) == 2:  # -qgguf: a one-letter option takes the rest of the word
                return full_name, word[2:]
            raise UsageError(f"--serve-args: {word}{where}: vllm serve refuses it (argparse attaches a value "
                             f"only to a one-letter option): write {short} {word[len(short):]} or "
                             f"{short}={word[len(short):]}")
        if short.startswith(word):
            raise UsageError(f"--serve-args: {word}{where}: write {short} (or {full_name}) in full; ple4patch "
                             "does not guess abbreviations")
    return None, None


def parse_serve_args(text: str | None) -> ServeOptions:
    """The options of a `vllm serve` command line that decide where the PLE table goes, read as the
    engine's parser reads them: ``--config FILE.yaml`` stands for the options in that file (the
    command line wins), ``_`` and ``-`` are the same in a name, values are given as the next
    word or attached (`_option`), and the kernel config is merged by
    ``kernels.nvfp4_policy.ple4_policy_kernel_config``; the model is the one the engine loads
    (``serve_model.model_of``). A command line the engine's parser would refuse, one that loads
    the engine's default model, or an abbreviation of an option read here, is a usage error
    naming what to change."""
    out = ServeOptions()
    if not text:
        return out
    try:
        given = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--serve-args: cannot split {text!r} as a shell would ({exc})") from None
    given, out.environ, form, prefix = _options_of(given)
    _check_config_option(given)
    try:
        cascade = policy.ple4_policy_cli_cascade(given, read_config=_yaml_words)
        pairs = policy.ple4_policy_expand_config(given, read_config=_yaml_words)
    except ValueError as exc:
        raise UsageError(f"--serve-args: {exc}") from None
    if cascade is not None:
        out.cascade = cascade[0]
        if out.cascade:
            out.settings[CASCADE_SETTING] = ("explicit-true", policy.ple4_policy_cascade_shown(cascade[1]))
    pairs = [(policy._ple4_option_name(w) if w.startswith("--") else w, src) for w, src in pairs]
    i = 0
    while i < len(pairs):
        (word, source), i = pairs[i], i + 1
        name, value = _option(word, source)
        if name is None:
            if word.startswith("--") and policy.ple4_policy_is_kernel_config(word.split("=")[0].split(".")[0]):
                if "=" not in word:
                    if i >= len(pairs):
                        raise UsageError(f"--serve-args: {word} needs a value")
                    i += 1  # its value: read by ple4_policy_cli_cascade above
            continue
        spelled = next(s for s in (*SHORT_OPTIONS, name) if word.startswith(s))
        if value is None:
            if i >= len(pairs):
                raise UsageError(f"--serve-args: {word} needs a value")
            value, i = pairs[i][0], i + 1
        if name in ("--load-format", "--quantization"):
            out.settings[name] = value
        elif name == "--tensor-parallel-size":
            try:
                out.tensor_parallel_size = int(value)
            except ValueError:
                raise UsageError(f"--serve-args: {spelled} takes a number, got {value!r}") from None
            out.tp_option = f"{spelled} {value}"
    cli = [policy._ple4_option_name(w) if w.startswith("--") else w for w in given]
    from_file = [word for word, source in pairs if source is not None]
    out.model, out.model_option = serve_model.model_of(cli, from_file, form, _arity, prefix)
    return out


def _arity(word: str) -> str | None:
    """How an option the preflight reads takes its value (`serve_model.classify`): "next",
    "attached", or None for any other option."""
    name, value = _option(word, None)
    if name is None:
        if not (word.startswith("--") and policy.ple4_policy_is_kernel_config(word.split("=")[0].split(".")[0])):
            return None
        return "attached" if "=" in word else "next"
    return "next" if value is None else "attached"


# `NAME=VALUE` before a command: the shell's (and env's) way to set a variable for it alone.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# The module behind the `vllm` console script (its entry point): its first word is the subcommand.
CLI_MAIN_MODULE = "vllm.entrypoints.cli.main"


def _options_of(words: list[str]) -> tuple[list[str], dict[str, str], str, str]:
    """The words after the command that starts the server, when --serve-args begins with one,
    and the variables set for it alone (``NAME=VALUE`` words first, or ``env NAME=VALUE``, by
    any path): ``vllm serve`` (the console script, by any path; ``serve`` alone as in the
    engine's argv after the program name), ``python -m vllm.entrypoints.cli.main serve`` (the
    module behind the console script) or ``python -m vllm.entrypoints.openai.api_server`` (any
    other ``vllm.entrypoints`` module), the forms the patched engine reads its command line from
    (``kernels.nvfp4_policy._ple4_policy_command_line``). Another ``vllm`` subcommand, or an
    option of ``env``, is a usage error. Also how they were given (`serve_model.SERVE`,
    `serve_model.MODULE` or `serve_model.OPTIONS_ALONE`) and the command as written."""
    environ: dict[str, str] = {}
    while words:
        if _ASSIGNMENT.match(words[0]):
            name, _eq, value = words[0].partition("=")
            environ[name], words = value, words[1:]
        elif os.path.basename(words[0]) == "env":
            if len(words) > 1 and words[1].startswith("-"):
                raise UsageError(f"--serve-args: `env {words[1]}`: ple4patch reads only NAME=VALUE words after env; "
                                 "set the variables in the environment ple4patch runs in instead")
            words = words[1:]
        else:
            break
    if not words:
        return words, environ, serve_model.OPTIONS_ALONE, "vllm serve"
    program = os.path.basename(words[0])
    python_module = re.fullmatch(r"python[0-9.]*", program) and len(words) > 2 and words[1] == "-m"
    if program == "vllm" or (python_module and words[2] == CLI_MAIN_MODULE):
        at = 1 if program == "vllm" else 3
        if len(words) > at and words[at] == "serve":
            return words[at + 1:], environ, serve_model.SERVE, " ".join(words[:at + 1])
        sub = f"vllm {words[at]}" if len(words) > at else "vllm"
        raise UsageError(f"--serve-args: `{sub}` does not start the server: give the command line of "
                         "`vllm serve MODEL ...` (or its options alone)")
    if words[0] == "serve":
        return words[1:], environ, serve_model.SERVE, "vllm serve"
    if python_module and words[2].startswith("vllm.entrypoints."):
        return words[3:], environ, serve_model.MODULE, " ".join(words[:3])
    return words, environ, serve_model.OPTIONS_ALONE, "vllm serve"


CONFIG_FILE_SUFFIXES = (".yaml", ".yml")  # the engine's load_config_file takes only these


def _check_config_option(words: list[str]) -> None:
    """``--config`` as the engine's parser takes it: once, followed by a .yaml/.yml file."""
    count = words.count("--config")
    if count > 1:
        raise UsageError("--serve-args: --config is given more than once; vllm serve takes one config file")
    if count and words.index("--config") == len(words) - 1:
        raise UsageError("--serve-args: --config needs a file (vllm serve --config FILE.yaml)")
    if count:
        path = words[words.index("--config") + 1]
        if not path.lower().endswith(CONFIG_FILE_SUFFIXES):
            raise UsageError(f"--serve-args: --config {path}: vllm serve reads only a .yaml or .yml config file")


def _yaml_words(path: str) -> list[str]:
    """The options a `vllm serve --config FILE` stands for (read with pyyaml, as the engine does;
    a relative path from this directory, where the shell would start vllm serve)."""
    try:
        import yaml  # noqa: F401 (only whether it is there; libcst, which ple4patch needs, requires it)
    except ImportError:
        raise ValueError(f"--config {path} is a YAML file, and reading it needs pyyaml: "
                         "`pip install pyyaml` beside ple4patch, or give its options in --serve-args") from None
    if not os.path.lexists(path):
        raise ValueError(f"--config {path}: no such file (a relative path is read from this directory)")
    try:
        return policy._ple4_yaml_words(path, None)
    except ValueError as exc:
        raise ValueError(f"{exc}: give a regular YAML file of vllm serve options") from None
    except OSError as exc:
        raise ValueError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None


def reconcile(checkpoint: str | os.PathLike[str], tp: int | None, serve: ServeOptions) -> int | None:
    """The tensor-parallel size to judge: `--tp`, else --serve-args' --tensor-parallel-size (the
    last one given, as the engine's parser takes it), else None (not given: inspect judges one
    rank and says so). An option of inspect that
    --serve-args sets too must agree with it: `--tp` with --tensor-parallel-size, and
    CHECKPOINT_DIR with the model --serve-args names (`vllm serve DIR`, `DIR`, `--model DIR`:
    `_check_model`). A disagreement is a usage error naming both values and what to do."""
    if tp is not None and serve.tensor_parallel_size is not None and tp != serve.tensor_parallel_size:
        raise UsageError(
            f"--tp {tp} disagrees with {serve.tp_option} in --serve-args: the engine would start "
            f"{serve.tensor_parallel_size} ranks; give one of them, or the same number in both"
        )
    _check_model(checkpoint, serve.model)
    return tp if tp is not None else serve.tensor_parallel_size


def _looks_like_a_path(model: str) -> bool:
    """A model name that can only be a path: a Hugging Face repo id is NAME or ORG/NAME."""
    return (model in (".", "..") or model.startswith(("/", "./", "../", "~")) or model.count("/") > 1
            or os.sep != "/" and os.sep in model)


def _check_model(checkpoint: str | os.PathLike[str], model: str | None) -> None:
    """The model --serve-args names is CHECKPOINT_DIR: an existing path must be that directory,
    and a path that does not exist is a typo, not a Hugging Face repo id (a repo id is not
    compared: its download may be CHECKPOINT_DIR). A relative path is read from this directory,
    where the shell would start vllm serve."""
    if model is None:
        return
    path = os.path.expanduser(model)
    if os.path.exists(path):
        if os.path.realpath(path) != os.path.realpath(checkpoint):
            raise UsageError(f"--serve-args names the model {model}, but CHECKPOINT_DIR is {checkpoint}: "
                             "pass the same directory to both")
    elif _looks_like_a_path(model):
        raise UsageError(f"--serve-args names the model {model}, which does not exist (a path, not a Hugging "
                         f"Face repo id ORG/NAME): pass the directory vllm serve will load, the same as "
                         f"CHECKPOINT_DIR {checkpoint}")


def explicit_settings(environ: Mapping[str, str], serve: ServeOptions) -> dict:
    """The explicit settings the rules judge: the environment's PLE variables and the options."""
    names = [rule[0] for rule in policy.PLE4_POLICY_RULES]
    settings = {name: environ[name] for name in names if name.startswith("VLLM_") and name in environ}
    settings.update(serve.settings)
    return settings


# The states of a file the engine reads an FP8 table from as installed: the file as the engine
# ships it. A `modified` file (edited, patched by an unknown build, not even Python) may read
# nothing at all, whatever the table.
READS_FP8_AS_INSTALLED = (State.PRISTINE, State.UNPINNED)


def file_findings(venv: str | os.PathLike[str], needs_patch: bool = True) -> tuple[list[Finding], list[dict], object]:
    """The patch state of every file of the engine's set, and the set's assessment. With
    `needs_patch` False (every table is one the engine reads as installed: FP8) a file as the
    engine ships it blocks nothing: the patch is for an NVFP4 table. Any file that is neither
    as shipped nor as ple4patch made it blocks, with reinstalling the engine as the change."""
    eng = engine_mod.find_engine(venv)
    eng.require_target()
    s = assess_set(eng, write.with_local_pins(manifest_mod.load(), eng))
    findings, files = [], []
    # the apply that patches the whole set: one unpinned file makes it need the opt-in
    set_apply = shell.ple4patch("apply", *(["--allow-unknown"] if s.by_state(State.UNPINNED) else []), eng.venv)
    for a in s.files:
        rel = a.target.relative_to(eng.site_packages).as_posix()
        files.append({"path": rel, "state": a.state.value, "patch_id": a.patch_id})
        if a.state is State.PATCHED:
            findings.append(Finding("files", f"{rel}: patched"))
        elif a.state is State.PATCHED_OLDER:
            findings.append(Finding("files", f"{rel}: patched by an older ple4patch ({a.patch_id}); it starts, "
                                    f"`{set_apply}` updates it"))
        elif not needs_patch and a.state in READS_FP8_AS_INSTALLED:
            findings.append(Finding("files", f"{rel}: {a.state.value}, not patched: an FP8 table needs no patch "
                                    "(the engine reads it as installed)"))
        elif rel == CONFIG_REL and a.state is not State.MODIFIED:
            findings.append(Finding("files", f"{rel}: {a.state.value}, not patched: its automatic PLE placement "
                                    "applies (see placement)"))
        elif not needs_patch:
            findings.append(Finding("files", f"{rel}: {a.state.value}, not as the engine ships it: ple4patch "
                                    "cannot tell whether the engine reads an FP8 table with it", blocks=True,
                                    change=f"reinstall the engine ({engine_mod.reinstall_hint(eng)})"))
        else:
            fix = (a.pins_fix() if a.lost_pin() else
                   f"reinstall the engine ({engine_mod.reinstall_hint(eng)}), then `{set_apply}`"
                   if a.state is State.MODIFIED else set_apply)
            findings.append(Finding("files", f"{rel}: {a.state.value}, not patched", blocks=True, change=fix))
    return findings, files, s


def _apply_command(state: State | str | None, venv) -> str:
    """The apply that patches a file in this state: an unpinned one needs the opt-in."""
    if state is not None and State(state) is State.UNPINNED:
        return shell.ple4patch('apply', '--allow-unknown', venv)
    return shell.ple4patch('apply', venv)


def environment_findings(settings: dict, config: ConfigPlacement | None = None) -> list[Finding]:
    """Every explicit setting the NVFP4 table refuses (the rules of the patched engine). Where the
    release's ``vllm/config/vllm.py`` places the PLE table by itself and is not patched,
    unsetting one of `CONFIG_SKIPPED_BY` brings its default back, so the change is to set it to 0."""
    out = []
    for name, _conflicting, _why, change in policy.PLE4_POLICY_RULES:
        line = policy.ple4_policy_refusal(name, settings[name]) if name in settings else None
        if line is None:
            continue
        line = line.removesuffix(f": {change}")  # the engine's one-line refusal ends with what to change
        if config is not None and config.defaults and not config.patched and name in CONFIG_SKIPPED_BY:
            change = (f"set {name}=0, not unset: unset, {CONFIG_REL} turns the PLE offload on again "
                      f"({CONFIG_SKIP[0]}=1)")
        out.append(Finding("environment", line, blocks=True, change=change))
    return out


def config_placement_findings(config: ConfigPlacement | None, settings: dict) -> list[Finding]:
    """What ``vllm/config/vllm.py`` will choose for this start. Patched (a member of the set),
    it skips its default and declines its cascade for an NVFP4 request. Not patched, its default
    writes the PLE variables unless one of `CONFIG_SKIPPED_BY` is in the environment at all (a
    conflicting value there is an environment finding of its own), and the change is to patch it
    or to set the variable; its cascade does not take an NVFP4 table by itself (FP8 storage
    only, or only on `CASCADE_SWITCH`)."""
    if config is None:
        return []
    if config.unreadable is not None:
        return [Finding("placement", config.note())]
    fns = " and ".join(config.defaults)
    if config.patched:
        return [Finding("placement", f"{CONFIG_REL} is patched: for an NVFP4 request it skips its automatic "
                        f"PLE placement ({fns}) and declines the disk cascade; vllm serve needs no PLE variable")]
    out = []
    if config.defaults:
        skipped = [n for n in CONFIG_SKIPPED_BY if n in settings]
        if skipped:
            out.append(Finding("placement", f"the engine's SM70 Qwen3.8 PLE default ({fns} in {CONFIG_REL}) "
                               f"does not apply: {', '.join(skipped)} is set in the environment"))
        else:
            sets = "; ".join(", ".join(f"{k}={v}" for k, v in CONFIG_DEFAULTS[fn]) for fn in config.defaults)
            if config.member and config.state is not None and State(config.state) is State.MODIFIED:
                fix = config.pins_fix or f"reinstall the engine, then `{_apply_command(State.UNPINNED, config.venv)}`"
                where, change = (f"{CONFIG_REL}, modified",
                                 f"{fix}, or export {config.skip} in the shell that starts vllm serve")
            elif config.member:
                where, change = (f"{CONFIG_REL}, not patched",
                                 f"{_apply_command(config.state, config.venv)} (patches {CONFIG_REL} too), or "
                                 f"export {config.skip} in the shell that starts vllm serve")
            else:
                where, change = (f"{CONFIG_REL}, which ple4patch does not patch",
                                 f"export {config.skip} (in the shell that starts vllm serve)")
            out.append(Finding(
                "placement",
                f"on a V100 in the SM70 Qwen3.8 dual-compile lane the engine sets {sets} ({fns} in "
                f"{where}), and the patched loader refuses the offload process",
                blocks=True, change=change,
            ))
    if config.cascade == "storage":
        out.append(Finding("placement", f"the engine's disk cascade ({CONFIG_REL}) takes FP8 PLE storage "
                           "only: it declines the NVFP4 table"))
    elif config.cascade == "switch":
        out.append(Finding("placement", f"the engine's disk cascade ({CONFIG_REL}) runs only when "
                           f"{CASCADE_SWITCH}=1 asks for it"))
    elif config.cascade == "unknown":
        out.append(Finding("placement", f"the engine's disk cascade in {CONFIG_REL} is in a form ple4patch "
                           "does not know: check the engine log for the PLE placement it chose"))
    return out


def placement_findings(eng, policy_state: str | None, settings: dict, serve: ServeOptions,
                       config: ConfigPlacement | None = None) -> list[Finding]:
    """What the release's automatic PLE placement will choose for this start: its policy file's
    and its ``vllm/config/vllm.py``'s (each patched with the set where it is a member)."""
    from_config = config_placement_findings(config, settings)
    path = eng.site_packages / POLICY_REL
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        if from_config:
            return from_config
        return [Finding("placement", "this engine release has no start-up PLE placement policy "
                        f"({POLICY_REL} absent, and {CONFIG_REL} places no PLE table): the table stays "
                        "where the patched loader puts it")]
    return from_config + _policy_file_findings(eng, text, policy_state, settings, serve)


def _policy_file_findings(eng, text: str, policy_state: str | None, settings: dict,
                          serve: ServeOptions) -> list[Finding]:
    """What the release's start-up policy file (``vllm/platforms/runtime_defaults.py``) chooses."""
    has_disk, has_cascade = AUTO_DISK_DEFAULTS in text, AUTO_CASCADE in text
    if not (has_disk or has_cascade):
        return [Finding("placement", f"{POLICY_REL} chooses no PLE placement in this release")]
    if policy_state == State.PATCHED.value:
        return [Finding("placement", f"{POLICY_REL} is patched: for an NVFP4 request it skips the automatic "
                        "disk/CPU-offload placement and declines the disk cascade")]
    out = []
    fix_all = f"{shell.ple4patch('apply', eng.venv)} (patches {POLICY_REL} too)"
    if has_disk:
        if any(name in settings for name in AUTO_DISK_SKIPPED_BY):
            out.append(Finding("placement", "the engine's SM70 Qwen3.8 disk-PLE default does not apply: "
                               f"{', '.join(n for n in AUTO_DISK_SKIPPED_BY if n in settings)} is set explicitly"))
        else:
            out.append(Finding(
                "placement",
                "on a V100 in the SM70 Qwen3.8 dual-compile lane the engine sets VLLM_PLE_CPU_OFFLOAD=1 and "
                f"VLLM_PLE_DISK_OFFLOAD=1 ({AUTO_DISK_DEFAULTS} in {POLICY_REL}, unpatched), and the patched "
                "loader refuses the offload process",
                blocks=True, change=f"{fix_all}, or export VLLM_PLE_CPU_OFFLOAD=0",
            ))
    if has_cascade:
        if serve.cascade is False:
            out.append(Finding("placement", "the disk cascade is off (--kernel-config ple_disk_cascade false)"))
        else:
            out.append(Finding(
                "placement",
                "the engine admits the PLE disk cascade by default (KernelConfig.ple_disk_cascade, "
                f"{AUTO_CASCADE} in {POLICY_REL}, unpatched) when the checkpoint's storage qualifies, and the "
                "patched loader refuses the cascade",
                blocks=True,
                change=f"{fix_all}, or pass --kernel-config '{{\"ple_disk_cascade\": false}}' to vllm serve",
            ))
    return out


def memory_finding(memory: dict | None) -> Finding | None:
    if not memory:
        return None
    need, have = memory.get("pinned_bytes_per_host"), memory.get("host_mem_available")
    if need is None:
        return None
    upto = "up to " if memory.get("host_rows_upper_bound") else ""
    where = f"{upto}{need:,} B ({gib(need)}) pinned on this host for {memory.get('ranks_per_host')} rank(s)"
    if have is None:
        return Finding("memory", f"{where}; MemAvailable unknown (no /proc/meminfo)")
    if memory.get("fits") is False and upto:  # FP8, VRAM first: the engine may pin much less
        return Finding("memory", f"{where}, MemAvailable {gib(have)}: does not fit if the GPUs keep none of the "
                       f"table ({UPPER_BOUND_WHY}); set VLLM_QWEN4EXP_PLE_HOST_GIB to choose the host share")
    if memory.get("fits") is False:
        return Finding("memory", f"{where}, MemAvailable {gib(have)}: does not fit", blocks=True,
                       change="free host memory, run fewer ranks on this host, or set VLLM_QWEN4EXP_PLE_HOST_GIB "
                              "to send rows past the budget to VRAM")
    return Finding("memory", f"{where}, MemAvailable {gib(have)}: fits")


def run(
    checkpoint: str | os.PathLike[str],
    venv: str | os.PathLike[str],
    *,
    serve_args: str | None = None,
    environ: Mapping[str, str] | None = None,
    tp: int | None = None,
    **inspect_options,
) -> Result:
    """The preflight as a Result: exit 0 when `vllm serve` will start with this table, 10 when
    not. `tp` None: the --tensor-parallel-size of `serve_args`, else one rank, said in the output (`reconcile`)."""
    environ = os.environ if environ is None else environ
    serve = parse_serve_args(serve_args)
    if serve.environ:  # `env NAME=VALUE vllm serve ...`: the server starts with these set
        environ = {**environ, **serve.environ}
    tp = reconcile(checkpoint, tp, serve)
    report = inspect_checkpoint(checkpoint, venv=venv, environ=environ, tp=tp, **inspect_options)
    # An FP8 table is read by the engine as installed, patched or not: the patched policy and
    # loader act on an NVFP4 request only (kernels.nvfp4_policy.ple4_policy_requested,
    # kernels.nvfp4_loader), so the NVFP4 rules and the patch state decide nothing for it.
    needs_patch = not report.tables or any(t.layout not in STOCK_ENGINE_READS for t in report.tables)
    files, file_states, s = file_findings(venv, needs_patch)
    settings = explicit_settings(environ, serve)
    policy_state = next((f["state"] for f in file_states if f["path"] == POLICY_REL), None)
    if not report.ple_table:  # another model: the engine loads it as before, whatever the patch state
        rules = []
    elif needs_patch:
        rules = (environment_findings(settings, s.config)
                 + placement_findings(s.engine, policy_state, settings, serve, s.config))
    else:
        rules = [Finding("placement", "the engine places an FP8 table by its own rules, as stock 1Cat-vLLM "
                         "does: ple4patch changes nothing for it")]
    findings = (files + rules + [f for f in [memory_finding(report.memory)] if f is not None]
                if report.ple_table else [])
    # the checkpoint's own problems (the engine's patch state is the files' finding above)
    for p in report.problems:
        if p.code not in ("engine", "memory"):
            findings.append(Finding("checkpoint", p.line() if hasattr(p, "line") else p.message, blocks=True,
                                    change=change_of(p)))
    blockers = [f for f in findings if f.blocks]
    # A table no engine reads (BF16): no patch makes it readable, so its change comes first.
    blockers.sort(key=lambda f: f.change != USE_A_READABLE_CHECKPOINT)
    if blockers:
        n = len(blockers)
        verdict = f"WILL NOT START: {n} thing{'s' if n != 1 else ''} to change (marked ! above)"
        first = f"{verdict}; first: {blockers[0].change or blockers[0].message}"
        verdict = first if len(first) <= TEXT_WIDTH else verdict
    elif not report.ple_table:
        verdict = report.verdict
    else:
        layout = next((t.layout for t in report.tables), None)
        verdict = f"WILL START: `vllm serve` with the engine in {s.engine.venv} reads this table ({layout})"
    data = report.to_json()
    for key in ("schema_version", "ok"):
        data.pop(key, None)
    data["verdict"] = verdict  # one verdict: the preflight's, as in message and preflight.verdict
    data["preflight"] = {
        "will_start": not blockers,
        "verdict": verdict,
        "files": file_states,
        "settings": {k: (v if isinstance(v, (str, bool, int)) else str(v)) for k, v in settings.items()},
        "findings": [f.to_json() for f in findings],
        "blockers": [f.to_json() for f in blockers],
    }
    return Result("inspect", EXIT_CHECKPOINT if blockers else EXIT_OK, verdict, data,
                  output=fit_lines(body_lines(report) + preflight_lines(findings)) + "\n")


def preflight_lines(findings: list[Finding]) -> list[tuple[str, int]]:
    """The preflight's lines, after the checkpoint's: one per finding (`!` where it blocks, then
    what to change), in columns as inspect's, each with the indent of its continuation lines."""
    lines = []
    last = None
    for f in findings:
        head = f"{f.area:<11} " if f.area != last else " " * 12
        last = f.area
        mark = "! " if f.blocks else ""
        lines.append((f"{head}{mark}{f.message}", 12 + len(mark)))
        if f.blocks and f.change:
            lines.append((f"{'':14}change: {f.change}", 22))
    return lines

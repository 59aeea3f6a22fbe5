"""The NVFP4 PLE request against the engine's start-up PLE placement (injected verbatim into the engine).

With ``ple_embedding_dtype: "nvfp4_rowpacked"`` in the model config the PLE table is pinned in
host memory by each GPU worker (``ple4patch.kernels.nvfp4_loader``). The engine's start-up policy
(``vllm/platforms/runtime_defaults.py``, ``apply_runtime_policy_defaults``, 1CatAI/1Cat-vLLM
51c0f97201a70a644a80ac21d292a15eff0dc4e6) would place the table elsewhere on its own:

- ``_apply_sm70_qwen38_disk_ple_defaults`` sets ``VLLM_SM70_QWEN38_HYBRID_PLE=0``,
  ``VLLM_PLE_CPU_OFFLOAD=1`` and ``VLLM_PLE_DISK_OFFLOAD=1`` for the SM70 Qwen3.8 dual-compile
  lane unless one of the three is set explicitly;
- ``_qwen4exp_ple_cascade_requested`` admits the disk cascade (``KernelConfig.ple_disk_cascade``,
  on by default) when ``ple_storage_rejection`` accepts the storage.

Either way the GPU workers skip the embedding constructor.

Two facts of the engine decide what can be refused at start-up:

- ``KernelConfig.ple_disk_cascade`` is a plain ``bool = True`` (``vllm/config/kernel.py``,
  1CatAI/1Cat-vLLM 00da9a304615b7a470feaf7c04366669c2011575: no record of who set it), so in the
  config an explicit ``--kernel-config '{"ple_disk_cascade": true}'`` looks exactly like the
  default: the patched policy declines both and records why in ``ple_disk_cascade_reason``. The
  user's own words survive in the command line of the process that runs the policy (``vllm
  serve ...``, whose ``sys.argv`` a spawned engine process inherits), so the policy reads the
  kernel config from it as the engine's parser merges it (``ple4_policy_kernel_config``:
  ``--kernel-config JSON``, ``--kernel-config.KEY VALUE``, ``--config FILE.yaml``, an unambiguous
  prefix such as ``--kernel``; the dotted forms apply after every plain one) and refuses an
  explicit true there. ``LLM(kernel_config=...)`` in a script leaves
  no such trace: it is declined, not refused.
- ``EngineArgs.create_model_config`` (``vllm/engine/arg_utils.py``, 1CatAI/1Cat-vLLM
  ae13773a0deebf583022613c4508e5072cedef91) sets ``quantization`` and ``load_format`` to
  ``"gguf"`` when ``is_gguf(model)`` (a local ``.gguf`` file, a file with the GGUF magic, or a
  ``repo:QUANT`` name), so a GGUF model served with ``--load-format auto`` reaches this policy as
  ``load_format == "gguf"``; the refusal then names the model, not an option the user never passed. The patched policy skips both for an
NVFP4 request (``ple4_policy_skips_auto_placement``, ``ple4_policy_declines_cascade``) and refuses,
before the engine allocates anything, an explicit setting that would move the table
(``ple4_policy_check``). The rules are data (``PLE4_POLICY_RULES``) and
``ple4_policy_conflicts(settings)`` is a plain function of explicit settings, so a tool that runs
before the engine (ple4patch's preflight) applies the same rules without vllm or torch.

Everything here is plain Python (no torch, no imports at module level): this module is injected
as it is into the policy file and into ``ple_layer.py`` (whose loader refuses in a GPU worker the
cascade forced on in the command line, for releases without the policy file), and ``ple4patch``
imports it too.
"""

PLE4_POLICY_DTYPE = "nvfp4_rowpacked"

# (setting, what makes it conflict, why, what to change). A setting is an environment variable
# or an engine option, spelled as the user spells it. Values are compared as text, lower case.
PLE4_POLICY_RULES = (
    (
        "VLLM_PLE_CPU_OFFLOAD",
        ("1", "true", "yes", "on"),
        "the CPU-offload process keeps the PLE table out of the GPU workers",
        "set VLLM_PLE_CPU_OFFLOAD=0",
    ),
    (
        "VLLM_PLE_DISK_OFFLOAD",
        ("1", "true", "yes", "on"),
        "the disk-mmap lane reads the PLE table from the checkpoint files",
        "set VLLM_PLE_DISK_OFFLOAD=0",
    ),
    (
        "VLLM_SM70_QWEN38_HYBRID_PLE",
        ("1", "true", "yes", "on"),
        "the hybrid PLE mode splits the table between the GPU and the offload process",
        "set VLLM_SM70_QWEN38_HYBRID_PLE=0",
    ),
    (
        "VLLM_QWEN4EXP_PLE_DISK",
        ("1", "true", "yes", "on"),
        "the PLE disk cascade reads the rows beyond the GPU and host tiers from the checkpoint files",
        "set VLLM_QWEN4EXP_PLE_DISK=0",
    ),
    (
        "--kernel-config ple_disk_cascade",
        ("explicit-true",),
        "the disk cascade spills the PLE table to mapped checkpoint storage",
        "drop ple_disk_cascade from the kernel config (or pass --kernel-config '{\"ple_disk_cascade\": false}')",
    ),
    (
        "--model",
        ("gguf-model",),
        "a GGUF checkpoint carries its own PLE table format",
        "serve the NVFP4 safetensors checkpoint directory, not a GGUF model",
    ),
    (
        "--load-format",
        ("gguf",),
        "a GGUF checkpoint carries its own PLE table format",
        "serve the NVFP4 safetensors checkpoint (drop --load-format gguf)",
    ),
    (
        "--quantization",
        ("gguf",),
        "a GGUF checkpoint carries its own PLE table format",
        "serve the NVFP4 safetensors checkpoint (drop --quantization gguf)",
    ),
)


def ple4_policy_refusal(setting: str, value: object) -> str | None:
    """The one-line refusal for `setting` = `value`, or None when it does not conflict."""
    for name, conflicting, why, change in PLE4_POLICY_RULES:
        if name != setting:
            continue
        if isinstance(value, tuple):  # (what the rule matches, what the user sees)
            text, shown = value
        else:
            text = "explicit-true" if value is True and "explicit-true" in conflicting else str(value).strip().lower()
            shown = "true" if text == "explicit-true" else str(value)
        if text in conflicting:
            return (
                f"ple_embedding_dtype={PLE4_POLICY_DTYPE!r} pins the PLE table in each GPU worker, "
                f"but {setting}={shown} is set ({why}): {change}"
            )
    return None


def ple4_policy_conflicts(settings) -> list:
    """The refusal lines for the explicit `settings` ({setting name: value}, names as in
    ``PLE4_POLICY_RULES``), in the order of the rules."""
    out = []
    for name, _conflicting, _why, _change in PLE4_POLICY_RULES:
        if name in settings:
            line = ple4_policy_refusal(name, settings[name])
            if line is not None:
                out.append(line)
    return out


def ple4_policy_requested(cfg) -> bool:
    """Whether the model config asks for the NVFP4 row-packed table (``ple_embedding_dtype``
    on the text config, where the engine's own policy reads ``ple_layer_ids``)."""
    model = getattr(cfg, "model_config", None)
    for config in (getattr(model, "hf_text_config", None), getattr(model, "hf_config", None)):
        dtype = getattr(config, "ple_embedding_dtype", None)
        if dtype is not None:
            return str(dtype).removeprefix("torch.") == PLE4_POLICY_DTYPE
    return False


def _ple4_policy_explicit(name, defaults, environ) -> tuple:
    """(set explicitly?, its value): through the engine's PolicyDefaults when there is one
    (``name in defaults`` is an explicit typed or environment setting), else the environment."""
    if defaults is not None:
        try:
            if name in defaults:
                return True, defaults.get(name)
            return False, None
        except Exception:  # an engine whose defaults object does not know the name
            pass
    if name in environ:
        return True, environ[name]
    return False, None


def _ple4_policy_gguf_model(cfg) -> str | None:
    """The model name when the engine resolved it as GGUF (``load_format`` set to ``"gguf"`` by
    ``create_model_config`` for a ``.gguf`` file, a file with the GGUF magic, or ``repo:QUANT``)."""
    load_format = getattr(getattr(cfg, "load_config", None), "load_format", None)
    if str(getattr(load_format, "value", load_format)).lower() != "gguf":
        return None
    model = getattr(getattr(cfg, "model_config", None), "model", None)
    if model is None:
        return None
    name = str(model)
    if name.lower().endswith(".gguf"):
        return name
    import os

    try:
        if os.path.isfile(name):  # a regular file only (never opens a FIFO or a device)
            with open(name, "rb") as f:
                if f.read(4) == b"GGUF":
                    return name
    except OSError:
        pass
    head, sep, quant = name.rpartition(":")
    if sep and "/" in head and quant and all(c.isalnum() or c in "_+-" for c in quant):
        return name
    return None


PLE4_POLICY_CASCADE = "--kernel-config ple_disk_cascade"
PLE4_POLICY_CASCADE_KEY = "ple_disk_cascade"

# How pydantic reads a bool field from text (lax mode), lower case: KernelConfig.ple_disk_cascade
# is a pydantic dataclass field, so the engine takes "yes" or 1 as true.
_PLE4_TRUE_WORDS = ("1", "on", "t", "true", "y", "yes")
_PLE4_FALSE_WORDS = ("0", "off", "f", "false", "n", "no")


def ple4_policy_bool(value):
    """`value` as the engine's config reads a bool (True, False), or None when it reads none."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _PLE4_TRUE_WORDS:
            return True
        if word in _PLE4_FALSE_WORDS:
            return False
    return None


def _ple4_option_name(word: str) -> str:
    """An option as the engine's parser spells it: ``_`` becomes ``-`` up to the first ``.`` (in
    ``--key=value``, in the key only)
    (``FlexibleArgumentParser.parse_args``, vllm/utils/argparse_utils.py, 1CatAI/1Cat-vLLM
    92a785cb21e2b2acbd4be1dfd87e799c9c632a37)."""
    key, eq, value = word.partition("=")
    head, dot, tail = key.partition(".")
    return head.replace("_", "-") + dot + tail + eq + value


PLE4_POLICY_CONFIG_FILE_LIMIT = 1 << 20  # bytes of a --config YAML file the policy reads


def _ple4_yaml_words(path, read_config) -> list:
    """The words ``--config FILE`` stands for, as the engine's ``load_config_file`` makes them
    (a dict value becomes JSON, a true bool a bare flag, a false bool nothing). Without
    `read_config` only a regular file of at most PLE4_POLICY_CONFIG_FILE_LIMIT bytes is read
    (never a FIFO: the engine's parser has read it already); anything else raises ValueError."""
    if read_config is not None:
        return list(read_config(path))
    import json
    import os
    import stat

    import yaml  # the engine depends on pyyaml (and so does libcst, under ple4patch)

    with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"--config {path} is not a regular file")
        if info.st_size > PLE4_POLICY_CONFIG_FILE_LIMIT:
            raise ValueError(f"--config {path} is larger than {PLE4_POLICY_CONFIG_FILE_LIMIT} bytes")
        raw = f.read(PLE4_POLICY_CONFIG_FILE_LIMIT + 1)
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"--config {path} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--config {path} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: a YAML mapping of options is expected")
    words = []
    for key, value in data.items():
        if isinstance(value, bool):
            if value:
                words.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                words.append(f"--{key}")
                words.extend(str(item) for item in value)
        elif isinstance(value, dict):
            words += [f"--{key}", json.dumps(value)]
        else:
            words += [f"--{key}", str(value)]
    return words


def _ple4_merge(into: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _ple4_merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + value
        else:
            into[key] = value


def ple4_policy_expand_config(args, read_config=None) -> list:
    """The words of a vLLM command line with ``--config FILE`` replaced by the options of that YAML
    file, placed before the others so that the command line wins (the engine's
    ``_pull_args_from_config``), as (word, the file it came from or None)."""
    words = [(str(w), None) for w in args]
    plain = [w for w, _ in words]
    if "--config" in plain:
        at = plain.index("--config")
        if at + 1 < len(words):
            path = plain[at + 1]
            from_file = [(w, path) for w in _ple4_yaml_words(path, read_config)]
            words = from_file + words[:at] + words[at + 2 :]
    return words


_PLE4_KERNEL_CONFIG = "kernel-config"


def ple4_policy_is_kernel_config(option: str) -> bool:
    """Whether an option (as the engine's parser spells it, without any ``.KEY``) is
    ``--kernel-config``: argparse takes an unambiguous prefix for the whole name (vLLM's parser
    keeps ``allow_abbrev``), and ``--ke`` is where the name stops being shared (``--kv-...``)."""
    name = option[2:] if option.startswith("--") else ""
    return len(name) >= 2 and _PLE4_KERNEL_CONFIG.startswith(name)


def ple4_policy_kernel_config(args, read_config=None) -> tuple:
    """(keys, given by) of the kernel config a vLLM command line sets, merged as the engine's parser
    merges them, or ({}, None) when it sets none.

    `args` are the words after the program name (``serve MODEL --kernel-config '{...}'``).
    ``--config FILE`` is replaced by the options of that YAML file, before the other options so
    that these win (`read_config(path)` gives its words; None reads it with pyyaml). Of the plain
    ``--kernel-config JSON`` (``=JSON``, or an unambiguous prefix such as ``--kernel``) the last
    wins. ``--kernel-config.KEY VALUE`` pairs (``=VALUE``; ``KEY+`` for a list) merge into one JSON
    value per spelling of the option, which the engine's parser appends after every other option,
    in the order the spellings first appear: the last of those replaces everything before it.
    A plain value that is not a JSON object raises ValueError naming the option.
    """
    import json

    words = ple4_policy_expand_config(args, read_config)
    plain, plain_from, dotted = None, None, {}  # dotted: spelling -> [keys, {top key: source}]
    i = 0
    while i < len(words):
        (word, source), i = words[i], i + 1
        if not word.startswith("--"):
            continue
        key, eq, value = _ple4_option_name(word).partition("=")
        head, dot, rest = key.partition(".")
        if not ple4_policy_is_kernel_config(head):
            continue
        if not eq:
            if i >= len(words):
                break  # the engine's parser reports the missing value
            value, i = words[i][0], i + 1
        if not dot:
            plain, plain_from = value, source
            continue
        path_keys = rest.split(".")
        if path_keys[-1].endswith("+"):
            path_keys[-1] = path_keys[-1][:-1]
            value = json.dumps(value.split(","))
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        for part in reversed(path_keys):
            parsed = {part: parsed}
        entry = dotted.setdefault(head, [{}, {}])
        _ple4_merge(entry[0], parsed)
        entry[1][path_keys[0]] = source
    if dotted:
        head, (keys, sources) = list(dotted.items())[-1]
        given_by = f"{head}.{PLE4_POLICY_CASCADE_KEY}"
        if sources.get(PLE4_POLICY_CASCADE_KEY) is not None:
            given_by += f" in --config {sources[PLE4_POLICY_CASCADE_KEY]}"
        return keys, given_by
    if plain is None:
        return {}, None
    try:
        keys = json.loads(plain)
    except ValueError:
        keys = None
    if not isinstance(keys, dict):
        raise ValueError(
            f"--kernel-config takes one JSON object, got {plain!r}: quote it for the shell, "
            "as in --kernel-config '{\"ple_disk_cascade\": false}'"
        )
    return keys, "--kernel-config" if plain_from is None else f"kernel-config in --config {plain_from}"


def ple4_policy_cli_cascade(args, read_config=None):
    """What a vLLM command line sets ``KernelConfig.ple_disk_cascade`` to: (True or False, given by),
    or None when it does not set it (or sets a value the engine's config would refuse)."""
    keys, given_by = ple4_policy_kernel_config(args, read_config)
    if PLE4_POLICY_CASCADE_KEY not in keys:
        return None
    value = ple4_policy_bool(keys[PLE4_POLICY_CASCADE_KEY])
    return None if value is None else (value, given_by)


def ple4_policy_cascade_shown(given_by: str) -> str:
    """How a refusal shows an explicit true cascade: with where it came from unless plain."""
    return "true" if given_by == "--kernel-config" else f"true (given by {given_by})"


def _ple4_policy_command_line():
    """The words after the program name when this process runs a vLLM command line (the
    ``vllm`` console script, ``python -m vllm.entrypoints...``), else None: a script that builds
    an engine in Python has its own arguments, which are not the engine's."""
    import os
    import sys

    argv = list(getattr(sys, "argv", None) or [])
    if not argv:
        return None
    program = str(argv[0]).replace(os.sep, "/")
    if os.path.basename(program) == "vllm" or "/vllm/entrypoints/" in "/" + program:
        return argv[1:]
    return None


def ple4_policy_settings(cfg, defaults=None, environ=None, args=None) -> dict:
    """The explicit settings of an engine config that the rules look at; `args` is the vLLM
    command line (None: this process's, when it runs one)."""
    if environ is None:
        import os

        environ = os.environ
    settings = {}
    for name, _conflicting, _why, _change in PLE4_POLICY_RULES:
        if name.startswith("VLLM_"):
            explicit, value = _ple4_policy_explicit(name, defaults, environ)
            if explicit:
                settings[name] = value
    try:
        if args is None:
            args = _ple4_policy_command_line()
        cascade = None if args is None else ple4_policy_cli_cascade(args)
    except Exception:  # the engine's own parser has accepted these words; judge nothing more
        cascade = None
    if cascade is not None and cascade[0]:
        settings[PLE4_POLICY_CASCADE] = ("explicit-true", ple4_policy_cascade_shown(cascade[1]))
    gguf_model = _ple4_policy_gguf_model(cfg)
    if gguf_model is not None:  # the engine set --load-format/--quantization gguf from the model
        settings["--model"] = ("gguf-model", gguf_model)
        return settings
    load_format = getattr(getattr(cfg, "load_config", None), "load_format", None)
    if load_format is not None:
        settings["--load-format"] = getattr(load_format, "value", load_format)
    quantization = getattr(getattr(cfg, "model_config", None), "quantization", None)
    if quantization is not None:
        settings["--quantization"] = quantization
    return settings


def ple4_policy_one_line(lines) -> str:
    """The refusal lines of several conflicting settings as one line: the first whole, each
    further one from its setting on (``; and X=1 is set (why): change``), so one failed start
    names every change."""
    out = lines[0]
    for line in lines[1:]:
        out += "; and " + line.split(", but ", 1)[-1]
    return out


def ple4_policy_check(cfg, defaults=None) -> None:
    """Refuse (ValueError, one line naming every conflict) the explicit settings that conflict
    with an NVFP4 request."""
    if not ple4_policy_requested(cfg):
        return
    lines = ple4_policy_conflicts(ple4_policy_settings(cfg, defaults))
    if lines:
        raise ValueError(ple4_policy_one_line(lines))


def ple4_policy_skips_auto_placement(cfg) -> bool:
    """True when the engine's automatic PLE placement must not apply (an NVFP4 request)."""
    return ple4_policy_requested(cfg)


def ple4_policy_declines_cascade(cfg) -> bool:
    """For an NVFP4 request: record why the disk cascade is not admitted and return True."""
    if not ple4_policy_requested(cfg):
        return False
    kernel = cfg.kernel_config
    kernel.ple_disk_cascade_active = False
    kernel.ple_disk_cascade_reason = (
        f"ple_embedding_dtype={PLE4_POLICY_DTYPE!r} pins the PLE table in each GPU worker"
    )
    return True

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

- ``KernelConfig.ple_disk_cascade`` is a plain ``bool = True`` (``vllm/config/kernel.py``, no
  record of who set it), so an explicit ``--kernel-config '{"ple_disk_cascade": true}'`` looks
  exactly like the default: the patched policy declines both and records why in
  ``ple_disk_cascade_reason``. Only a tool that reads the user's own arguments (ple4patch's
  preflight, ``--serve-args``) can refuse the explicit form.
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
as it is into the policy file, and ``ple4patch`` imports it too.
"""

PLE4_POLICY_DTYPE = "nvfp4_rowpacked"

# (setting, what makes it conflict, why, what to change). A setting is an environment variable
# or an engine option, spelled as the user spells it. Values are compared as text, lower case.
PLE4_POLICY_RULES = (
    (
        "VLLM_PLE_CPU_OFFLOAD",
        ("1", "true", "yes", "on"),
        "the CPU-offload process keeps the PLE table out of the GPU workers",
        "unset VLLM_PLE_CPU_OFFLOAD (or set VLLM_PLE_CPU_OFFLOAD=0)",
    ),
    (
        "VLLM_PLE_DISK_OFFLOAD",
        ("1", "true", "yes", "on"),
        "the disk-mmap lane reads the PLE table from the checkpoint files",
        "unset VLLM_PLE_DISK_OFFLOAD (or set VLLM_PLE_DISK_OFFLOAD=0)",
    ),
    (
        "VLLM_SM70_QWEN38_HYBRID_PLE",
        ("1", "true", "yes", "on"),
        "the hybrid PLE mode splits the table between the GPU and the offload process",
        "unset VLLM_SM70_QWEN38_HYBRID_PLE (or set VLLM_SM70_QWEN38_HYBRID_PLE=0)",
    ),
    (
        "VLLM_QWEN4EXP_PLE_DISK",
        ("1", "true", "yes", "on"),
        "the PLE disk cascade reads the rows beyond the GPU and host tiers from the checkpoint files",
        "unset VLLM_QWEN4EXP_PLE_DISK (or set VLLM_QWEN4EXP_PLE_DISK=0)",
    ),
    (
        "--kernel-config ple_disk_cascade",
        ("explicit-true",),
        "the disk cascade spills the PLE table to mapped checkpoint storage",
        "drop ple_disk_cascade from --kernel-config (or pass --kernel-config '{\"ple_disk_cascade\": false}')",
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


def ple4_policy_settings(cfg, defaults=None, environ=None) -> dict:
    """The explicit settings of an engine config that the rules look at."""
    if environ is None:
        import os

        environ = os.environ
    settings = {}
    for name, _conflicting, _why, _change in PLE4_POLICY_RULES:
        if name.startswith("VLLM_"):
            explicit, value = _ple4_policy_explicit(name, defaults, environ)
            if explicit:
                settings[name] = value
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


def ple4_policy_check(cfg, defaults=None) -> None:
    """Refuse (ValueError, one line) an explicit setting that conflicts with an NVFP4 request."""
    if not ple4_policy_requested(cfg):
        return
    lines = ple4_policy_conflicts(ple4_policy_settings(cfg, defaults))
    if lines:
        raise ValueError(lines[0])


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

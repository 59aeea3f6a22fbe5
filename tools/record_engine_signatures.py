#!/usr/bin/env python3
"""Record the real signatures of every engine name the patched files and the injected code use.

The names: every ``from vllm... import NAME`` (and relative import) of the real ``ple_layer.py``
files (../shared/engines and those of tests/data/engines that the transform patches) and of the injected modules
(ple4patch/kernels/nvfp4_loader.py, nvfp4_gather.py), plus the helpers the injected loader looks
up at run time. Each is looked up in real 1Cat-vLLM sources:

- a git directory of 1CatAI/1Cat-vLLM (``--git-dir``, commit ``--commit``; a mirror of the
  public repository), for the modules that exist there;
- the real files stored in tests/data/engines (by the module path INDEX.md gives them);
- ``MANUAL`` below, for the few helpers read from the public index as excerpts, and for the
  names only a fork's file imports, read from that fork's own repository in the public index
  (at the file's commit where the index holds it, else at the commit named in ``source``).

For a function it records the parameters (name, kind, has default); for a class, its own
``__init__`` (or that it defines none); for anything else the kind of binding. Names whose
source is not available (1Cat-vLLM modules added after the mirrored commit, lazy or star
re-exports) are recorded with ``"source": null``. The result,
tests/data/engine_signatures.json, is test data: tests/e2e/test_standin_signatures.py compares
the stand-in ``vllm`` against it.

    python tools/record_engine_signatures.py --git-dir /path/to/1Cat-vLLM.git
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools import engine_corpus  # noqa: E402
from tools import engine_files  # noqa: E402

OUT = REPO / "tests" / "data" / "engine_signatures.json"
NGRAM_PACKAGE = "vllm.models.qwen4_exp.nvidia"
INJECTED = ("ple4patch/kernels/nvfp4_loader.py", "ple4patch/kernels/nvfp4_gather.py")
# Helpers the injected loader imports lazily or looks up in ple_layer.py at run time.
RUNTIME_LOOKUPS = (
    ("vllm.model_executor.layers.ple_offload_layer", "ple_offload_enabled"),
    ("vllm.model_executor.kernels.ple.gguf_pinned", "pinned_decode_active"),
    ("vllm.models.qwen4_exp.common.ple", "ple_cascade_configured"),
)
# Real files of tests/data/engines by the module they are.
STORED_MODULES = {"ple_offload_layer.py": "vllm.model_executor.layers.ple_offload_layer"}
_MAIN_22AB = "1CatAI/1Cat-vLLM@22ab8e0743c277d1418aa62de274cfac27252d04:"
GATE = _MAIN_22AB + "vllm/models/qwen4_exp/nvidia/ops/ple_prefill_gate.py"
CONV = _MAIN_22AB + "vllm/models/qwen4_exp/nvidia/ops/ple_prefill_conv.py"
# Read from the public index as excerpts (no whole file here); source says where.
MANUAL = {
    # Every real ple_layer.py calls VocabParallelEmbedding(..., quant_method=...), which the mirrored
    # commit (2026-08-22, before Qwen4Exp) does not take yet; the public index holds the later
    # constructor with a keyword-only quant_method (vocab_parallel_embedding.py, 48692 characters).
    ("vllm.model_executor.layers.vocab_parallel_embedding", "VocabParallelEmbedding"): {
        "kind": "class",
        "init": [
            ["num_embeddings", "POSITIONAL_OR_KEYWORD", False],
            ["embedding_dim", "POSITIONAL_OR_KEYWORD", False],
            ["params_dtype", "POSITIONAL_OR_KEYWORD", True],
            ["org_num_embeddings", "POSITIONAL_OR_KEYWORD", True],
            ["padding_size", "POSITIONAL_OR_KEYWORD", True],
            ["quant_config", "POSITIONAL_OR_KEYWORD", True],
            ["prefix", "POSITIONAL_OR_KEYWORD", True],
            ["quant_method", "KEYWORD_ONLY", True],
        ],
        "source": "vllm/model_executor/layers/vocab_parallel_embedding.py as the public index holds it "
        "(48692 characters), the constructor every real ple_layer.py calls with quant_method=",
    },
    ("vllm.model_executor.kernels.ple.gguf_pinned", "pinned_decode_active"): {
        "kind": "function",
        "params": [["config", "POSITIONAL_OR_KEYWORD", True]],
        "source": "1CatAI/1Cat-vLLM vllm/model_executor/kernels/ple/gguf_pinned.py (public index "
        "versions of 4514 and 6492 characters; the path is held at 69e0780a82cb19f71237d818ba5ad8ae491af5ff)",
    },
    # D-G-Dimitrov/vllm 337d3f5ddc8a5b85de8907adfe49c9d9e685703a's ple_layer.py imports it; that
    # fork's common/ple.py is not in the public index, every public copy read defines it the same
    # way: a VocabParallelEmbedding subclass with no __init__ of its own and a row-shard weight_loader.
    ("vllm.models.qwen4_exp.common.ple", "PLEVocabParallelEmbedding"): {
        "kind": "class",
        "init": None,
        "source": "vllm-project/vllm@1a3108917e623445d7504c9aecfef3001b5ba287:vllm/models/qwen4_exp/common/ple.py "
        "(public index; PLEVocabParallelEmbedding(VocabParallelEmbedding) defines weight_loader(self, param, "
        "loaded_weight, checkpoint_start=None) and no __init__)",
    },
    # vllm-project/vllm's ple_layer.py at 020a97c7 imports it; that repository's modelopt.py (held
    # at 00155cde, not at 020a97c7) has one more parameter than 1CatAI/1Cat-vLLM's at ae13773a.
    ("vllm.model_executor.layers.quantization.modelopt", "ModelOptNvFp4Config"): {
        "kind": "class",
        "init": [
            ["quant_method", "POSITIONAL_OR_KEYWORD", True],
            ["is_checkpoint_nvfp4_serialized", "POSITIONAL_OR_KEYWORD", True],
            ["kv_cache_quant_algo", "POSITIONAL_OR_KEYWORD", True],
            ["exclude_modules", "POSITIONAL_OR_KEYWORD", True],
            ["group_size", "POSITIONAL_OR_KEYWORD", True],
            ["nvfp4_embed", "POSITIONAL_OR_KEYWORD", True],
        ],
        "source": "vllm-project/vllm@00155cdecca722d98e34234c3d172725b7720b7d:"
        "vllm/model_executor/layers/quantization/modelopt.py (public index; not held at 020a97c7)",
    },
    # Qixiao02/1Cat-vLLM's ple_layer.py at 0aac941e: from .exact_pin import allocate_host_table.
    ("vllm.models.qwen4_exp.nvidia.exact_pin", "allocate_host_table"): {
        "kind": "function",
        "params": [["shape", "POSITIONAL_OR_KEYWORD", False], ["dtype", "POSITIONAL_OR_KEYWORD", False]],
        "source": "Qixiao02/1Cat-vLLM@34c1e6c92b146587353c232a948381063a8ee0d6:"
        "vllm/models/qwen4_exp/nvidia/exact_pin.py (public index; not held at 0aac941e)",
    },
    # cookys/1Cat-vLLM's ple_layer.py at 1b5731f9: from ..common.ple_host_startup import ...
    ("vllm.models.qwen4_exp.common.ple_host_startup", "PinStartupOptions"): {
        "kind": "class",
        "init": None,  # a frozen dataclass: no __init__ in the source
        "source": "cookys/1Cat-vLLM@3e1030cd1c50a7b5fc2dff24088395328fe5adbe:"
        "vllm/models/qwen4_exp/common/ple_host_startup.py (public index; not held at 1b5731f9)",
    },
    ("vllm.models.qwen4_exp.common.ple_host_startup", "pin_startup_guard"): {
        "kind": "function",
        "params": [["options", "POSITIONAL_OR_KEYWORD", False], ["model_path", "POSITIONAL_OR_KEYWORD", False]],
        "source": "cookys/1Cat-vLLM@3e1030cd1c50a7b5fc2dff24088395328fe5adbe:"
        "vllm/models/qwen4_exp/common/ple_host_startup.py (public index; not held at 1b5731f9)",
    },
    # areslp/1Cat-vLLM's ple_layer.py at 1af83d81: the execution policies and the SM70 fusions.
    ("vllm.config.execution_policy", "layer_policy"): {
        "kind": "function",
        "params": [["cfg", "POSITIONAL_OR_KEYWORD", True]],
        "source": "areslp/1Cat-vLLM@48b2e9a6b96aecae1c04c5086ebbca5d15e3abb3:"
        "vllm/config/execution_policy.py (public index; not held at 1af83d81)",
    },
    ("vllm.config.execution_policy", "ple_policy"): {
        "kind": "function",
        "params": [["cfg", "POSITIONAL_OR_KEYWORD", True]],
        "source": "areslp/1Cat-vLLM@48b2e9a6b96aecae1c04c5086ebbca5d15e3abb3:"
        "vllm/config/execution_policy.py (public index; not held at 1af83d81)",
    },
    # Qixiao02/1Cat-vLLM's ple_layer.py at 7ee70bdc: from vllm.compilation import sx_compile_cache
    # (its compile_cache_enabled() and register_baked_constant(name, value): the stand-in's docstring).
    ("vllm.compilation", "sx_compile_cache"): {
        "kind": "module",
        "source": "Qixiao02/1Cat-vLLM@7ee70bdc854c712eba2581a3dcbf4b1429fc6379:"
        "vllm/compilation/sx_compile_cache.py (public index)",
    },
    ("vllm.model_executor.layers", "sm70_fuse47"): {
        "kind": "module",
        "source": "areslp/1Cat-vLLM@1af83d8143de5286c13a60ecbdd3024f9f07fa42:"
        "vllm/model_executor/layers/sm70_fuse47.py (public index)",
    },
    # 1CatAI main 22ab8e07's and 6d7071b6's ple_layer.py: use_sm70_decode_graph_semantics(). The index
    # holds no 1CatAI copy of the module; rapatel0's reads the same vllm.envs switch those commits do.
    ("vllm.compilation.sm70_decode_graph", "use_sm70_decode_graph_semantics"): {
        "kind": "function",
        "params": [],
        "source": "rapatel0/1Cat-vLLM@a223f04653180aa0fb119c7bfead0dc7dfe6dbc2:"
        "vllm/compilation/sm70_decode_graph.py (public index; no 1CatAI/1Cat-vLLM copy held)",
    },
    # 1CatAI main 22ab8e07's and 6d7071b6's ple_layer.py call it with no argument; no public copy of
    # its definition is in the index (1CatAI's forward_context.py there, ee0bc6a8, predates it).
    ("vllm.forward_context", "get_forward_kernel_config_or_none"): {
        "kind": "unknown",
        "source": None,
        "note": "definition not in the public index; 1CatAI/1Cat-vLLM@22ab8e0743c277d1418aa62de274cfac27252d04:"
        "vllm/models/qwen4_exp/nvidia/ple_layer.py calls it with no argument",
    },
    # 1CatAI main 22ab8e07's ple_layer.py: from .ops.ple_prefill_gate import ... (6d7071b6's imports
    # all but report_prefill_gate_fallback, which its module, held at 6d7071b6, does not define).
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_gate", "prefill_gate_reason"): {
        "kind": "function",
        "params": [[name, "POSITIONAL_OR_KEYWORD", False] for name in ("key", "query", "value", "norms", "groups")],
        "source": GATE + " (public index; the same at 6d7071b64dc557be0c18982c4f480e8f147c31a1)",
    },
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_gate", "prepare_prefill_gate"): {
        "kind": "function",
        "params": [[name, "POSITIONAL_OR_KEYWORD", False]
                   for name in ("key", "query", "value", "norms", "groups", "eps")],
        "source": GATE + " (public index; the same at 6d7071b64dc557be0c18982c4f480e8f147c31a1)",
    },
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_gate", "finish_prefill_gate"): {
        "kind": "function",
        "params": [["output", "POSITIONAL_OR_KEYWORD", False], ["value", "POSITIONAL_OR_KEYWORD", False],
                   ["gates", "POSITIONAL_OR_KEYWORD", False], ["residual", "POSITIONAL_OR_KEYWORD", True]],
        "source": GATE + " (public index; the same at 6d7071b64dc557be0c18982c4f480e8f147c31a1)",
    },
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_gate", "report_prefill_gate_fallback"): {
        "kind": "function",
        "params": [["reason", "POSITIONAL_OR_KEYWORD", False]],
        "source": GATE + " (public index; not in the module at 6d7071b6)",
    },
    # Imported lazily in the short-conv prefill of 732e6477, 78602753, 22ab8e07 and 6d7071b6; the
    # later three pass output= as an eighth argument, which the 22ab8e07 module takes (732e6477's not).
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_conv", "prefill_conv_reason"): {
        "kind": "function",
        "params": [[name, "POSITIONAL_OR_KEYWORD", False]
                   for name in ("x", "state", "weight", "requests", "dilation")],
        "source": CONV + " (public index; the same at 732e6477b2abe3074f03672d7503cac94801a9d6)",
    },
    ("vllm.models.qwen4_exp.nvidia.ops.ple_prefill_conv", "prefill_conv"): {
        "kind": "function",
        "params": [*([name, "POSITIONAL_OR_KEYWORD", False]
                     for name in ("x", "state", "weight", "starts", "states", "has_initial", "dilation")),
                   ["output", "POSITIONAL_OR_KEYWORD", True]],
        "source": CONV + " (public index; 732e6477b2abe3074f03672d7503cac94801a9d6's has no output)",
    },
    ("vllm.models.qwen4_exp.common.ple", "ple_cascade_configured"): {
        "kind": "function",
        "params": [],
        "source": "1CatAI/1Cat-vLLM vllm/models/qwen4_exp/common/ple.py (public index version of 20105 characters)",
    },
}


def imported_names(text: str, package: str) -> set[tuple[str, str]]:
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative to the importing module ``package``
                base = package.split(".")[: len(package.split(".")) - node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith("vllm"):
                out.update((module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update((alias.name, "") for alias in node.names if alias.name.startswith("vllm"))
    return out


def engine_texts() -> list[str]:
    """The real ple_layer.py texts that get imported against the stand-in `vllm`: those of
    ../shared/engines and the stored files the transform patches (a refused file is never
    imported, so the names only it imports need no stand-in)."""
    from ple4patch.errors import TransformError
    from ple4patch.transform import patch_source

    texts = [row.path.read_text(encoding="utf-8") for row in engine_files.shared_engines()]
    for row in engine_corpus.corpus_files("ple_layer.py"):
        text = engine_corpus.check(row).decode("utf-8")
        try:
            patch_source(text)
        except TransformError:
            continue
        texts.append(text)
    return texts


def _params(args: ast.arguments, drop_first: bool) -> list[list]:
    out = []
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append([arg.arg, kind, default is not None])
    if args.vararg:
        out.append([args.vararg.arg, "VAR_POSITIONAL", False])
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append([arg.arg, "KEYWORD_ONLY", default is not None])
    if args.kwarg:
        out.append([args.kwarg.arg, "VAR_KEYWORD", False])
    return out[1:] if drop_first and out else out


class Sources:
    def __init__(self, git_dir: Path | None, commit: str) -> None:
        self.git_dir, self.commit = git_dir, commit
        self.stored = {}
        for name, module in STORED_MODULES.items():
            for row in engine_corpus.corpus_files(name):
                self.stored[module] = (engine_corpus.check(row).decode("utf-8"),
                                       f"{row.repository}@{row.commit}:{module.replace('.', '/')}.py")

    def module_text(self, module: str) -> tuple[str, str] | None:
        if module in self.stored:
            return self.stored[module]
        if self.git_dir is None:
            return None
        base = module.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            proc = subprocess.run(["git", f"--git-dir={self.git_dir}", "show", f"{self.commit}:{path}"],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                return proc.stdout, f"1CatAI/1Cat-vLLM@{self.commit}:{path}"
        return None

    def lookup(self, module: str, name: str, depth: int = 0) -> dict | None:
        found = self.module_text(module)
        if found is None:
            return None
        text, where = found
        tree = ast.parse(text)
        if not name:
            return {"kind": "module", "source": where}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return {"kind": "function", "params": _params(node.args, False), "source": where}
            if isinstance(node, ast.ClassDef) and node.name == name:
                init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
                entry = {"kind": "class", "source": where}
                entry["init"] = _params(init.args, True) if init is not None else None
                return entry
        for node in tree.body:  # re-exports: from .x import name
            if isinstance(node, ast.ImportFrom) and depth < 3:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = node.module or ""
                        if node.level:
                            parts = module.split(".")
                            if not where.endswith("__init__.py"):
                                parts = parts[:-1]
                            parts = parts[: len(parts) - node.level + 1]
                            target = ".".join(parts + ([node.module] if node.module else []))
                        return self.lookup(target, alias.name, depth + 1)
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            if name in targets:
                return {"kind": "assignment", "source": where}
        # Not bound at the top of that file (a lazy or star re-export, or added after that commit).
        return {"kind": "unknown", "source": None, "note": f"not a top-level binding of {where}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", type=Path, help="git directory of 1CatAI/1Cat-vLLM")
    ap.add_argument("--commit", default="ae13773a0deebf583022613c4508e5072cedef91")
    args = ap.parse_args(argv)
    names: set[tuple[str, str]] = set()
    for text in engine_texts():
        names |= imported_names(text, f"{NGRAM_PACKAGE}.ple_layer")
    for rel in INJECTED:
        names |= imported_names((REPO / rel).read_text(encoding="utf-8"), "ple4patch.kernels." + Path(rel).stem)
    names |= set(RUNTIME_LOOKUPS)
    sources = Sources(args.git_dir, args.commit)
    entries = []
    for module, name in sorted(names):
        entry = MANUAL.get((module, name)) or sources.lookup(module, name) or {"kind": "unknown", "source": None}
        entries.append({"module": module, "name": name, **entry})
    OUT.write_text(json.dumps({"commit": args.commit, "names": entries}, indent=1) + "\n", encoding="utf-8")
    unknown = [f"{e['module']}.{e['name']}" for e in entries if e["source"] is None]
    print(f"recorded {len(entries)} names into {OUT.relative_to(REPO)}; no real source for {len(unknown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

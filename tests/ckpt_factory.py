"""Small synthetic Qwen3.8-Flash-Next checkpoints for the `inspect` tests.

Real names (`model.language_model.layers.<L>.ple.ple_embedding.ngram_embedding.*`),
real config keys, tiny sizes. Written with `safetensors.torch` (torch is the
only writer with F8_E4M3). Row counts are computed here independently of
ple4patch.ckpt (trial-division primes), so the tests check the library
against a second derivation.
"""

from __future__ import annotations

import json
from pathlib import Path

torch = __import__("pytest").importorskip("torch")
save_file = __import__("pytest").importorskip("safetensors.torch").save_file

PREFIX = "model.language_model"
#: ple_embedding_dtype that makes the (patched) engine read each layout
LAYOUT_DTYPE = {"nvfp4_rowpacked": "nvfp4_rowpacked", "nvfp4_split": "nvfp4_rowpacked",
                "fp8": "float8_e4m3fn", "bf16": None}


def _primes_from(start: int, count: int) -> list[int]:
    out, n = [], start
    while len(out) < count:
        if n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1)):
            out.append(n)
        n += 1
    return out


def table_rows(base: int, divisor: int, heads: int, dense: int = 0) -> int:
    """Rows the engine builds for the dense-th PLE layer (primes >= base, padded)."""
    primes = _primes_from(base, heads * (dense + 1))
    total = sum(primes[dense * heads : (dense + 1) * heads])
    return -(-total // divisor) * divisor


def config(
    *,
    head_dim: int = 32,
    ngram_size: int = 3,
    heads_per_ngram: int = 2,
    base: int = 17,
    divisor: int = 4,
    parts: int = 5,
    ple_layer_ids: list[int] | None = None,
    dtype: str | None = "nvfp4_rowpacked",
    text_config: bool = True,
) -> dict:
    text = {
        "model_type": "qwen3_8_flash_next_text",
        "ple_layer_ids": ple_layer_ids or [2],
        "ple_embed_dim": head_dim * (ngram_size - 1) * heads_per_ngram,
        "ngram_size": ngram_size,
        "heads_per_ngram": heads_per_ngram,
        "ngram_vocab_size_base": base,
        "make_ngram_vocab_size_divisible_by": divisor,
        "split_ngram_parts": parts,
        "vocab_size": 1000,
    }
    if dtype is not None:
        text["ple_embedding_dtype"] = dtype
    if text_config:
        return {"architectures": ["Qwen4ExpForConditionalGeneration"], "model_type": "qwen4_exp",
                "text_config": text}
    return dict(text, architectures=["Qwen4ExpForCausalLM"])


def table_prefix(layer: int) -> str:
    return f"{PREFIX}.layers.{layer}.ple.ple_embedding.ngram_embedding"


def _scales(gen, rows: int, cols: int):
    # valid E4M3 block scales: non-negative, finite (0x00..0x7E)
    return torch.randint(0, 0x7F, (rows, cols), generator=gen, dtype=torch.uint8)


def table_tensors(
    cfg: dict,
    layout: str = "nvfp4_rowpacked",
    *,
    layer: int | None = None,
    global_scale: str = "table",
    seed: int = 0,
) -> dict:
    """name -> tensor for one PLE table in `layout` (nvfp4_rowpacked, nvfp4_split, fp8, bf16)."""
    text = cfg.get("text_config", cfg)
    d = text["ple_embed_dim"] // ((text["ngram_size"] - 1) * text["heads_per_ngram"])
    ids = sorted(text["ple_layer_ids"])
    layer = ids[0] - 1 if layer is None else layer
    dense = ids.index(layer + 1) if layer + 1 in ids else 0
    total = table_rows(text["ngram_vocab_size_base"], text["make_ngram_vocab_size_divisible_by"],
                       (text["ngram_size"] - 1) * text["heads_per_ngram"], dense)
    parts = text["split_ngram_parts"]
    size = -(-total // parts)
    gen = torch.Generator().manual_seed(seed)
    pre = table_prefix(layer)
    out = {}
    for i in range(parts):
        rows = max(0, min(size, total - i * size))
        codes = torch.randint(0, 256, (rows, d // 2), generator=gen, dtype=torch.uint8)
        if layout == "nvfp4_rowpacked":
            out[f"{pre}.shard_{i}.weight"] = torch.cat([codes, _scales(gen, rows, d // 16)], dim=1).contiguous()
        elif layout == "nvfp4_split":
            out[f"{pre}.shard_{i}.weight"] = codes
            out[f"{pre}.shard_{i}.weight_scale"] = _scales(gen, rows, d // 16).view(torch.float8_e4m3fn)
        elif layout == "fp8":
            mag = torch.randint(0, 0x7F, (rows, d), generator=gen, dtype=torch.uint8)
            sign = torch.randint(0, 2, (rows, d), generator=gen, dtype=torch.uint8) << 7
            out[f"{pre}.shard_{i}.weight"] = (mag | sign).view(torch.float8_e4m3fn)
        elif layout == "bf16":
            out[f"{pre}.shard_{i}.weight"] = torch.randn(rows, d, generator=gen).to(torch.bfloat16)
        else:
            raise ValueError(layout)
        if layout.startswith("nvfp4") and global_scale == "per_shard":
            out[f"{pre}.shard_{i}.weight_scale_2"] = torch.tensor([0.0125], dtype=torch.float32)
    if layout.startswith("nvfp4") and global_scale == "table":
        out[f"{pre}.weight_scale_2"] = torch.tensor([0.0125], dtype=torch.float32)
    if layout == "fp8":
        out[f"{pre}.weight_scale"] = torch.tensor([0.02], dtype=torch.bfloat16)
    return out


def other_tensors() -> dict:
    """A few non-PLE tensors, as in the real checkpoint."""
    return {
        f"{PREFIX}.embed_tokens.weight": torch.zeros(8, 4, dtype=torch.bfloat16),
        f"{PREFIX}.layers.1.ple.ple_embedding.ngram_heads_offsets": torch.arange(4, dtype=torch.int64),
        "lm_head.weight": torch.zeros(8, 4, dtype=torch.bfloat16),
    }


def write(
    root: Path,
    cfg: dict,
    tensors: dict,
    *,
    files: int = 3,
    index: bool = True,
    duplicate: tuple[str, ...] = (),
) -> Path:
    """Write config.json and the tensors over `files` files (+ index).

    Each name in `duplicate` is also written into the file after its own (the index
    still names its own file), as a botched re-export leaves it.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(cfg, indent=2))
    names = sorted(tensors)
    if not index:
        save_file({n: tensors[n].contiguous() for n in names}, str(root / "model.safetensors"))
        return root
    groups: dict[str, dict] = {}
    weight_map = {}
    for k, name in enumerate(names):
        fname = f"model-{k % files + 1:05d}-of-{files:05d}.safetensors"
        groups.setdefault(fname, {})[name] = tensors[name].contiguous()
        weight_map[name] = fname
    for name in duplicate:
        fname = f"model-{(names.index(name) + 1) % files + 1:05d}-of-{files:05d}.safetensors"
        groups.setdefault(fname, {})[name] = tensors[name].contiguous()
    for fname, group in groups.items():
        save_file(group, str(root / fname))
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}, indent=2)
    )
    return root


def make(root: Path, layout: str = "nvfp4_rowpacked", *, dtype: str | None = "auto", **kw) -> Path:
    """A complete, loadable checkpoint in `layout`."""
    if dtype == "auto":
        dtype = LAYOUT_DTYPE[layout]
    cfg_kw = {k: kw.pop(k) for k in list(kw) if k in config.__code__.co_varnames}
    cfg = config(dtype=dtype, **cfg_kw)
    tensors = table_tensors(cfg, layout, **{k: kw.pop(k) for k in list(kw) if k in ("global_scale", "seed")})
    tensors.update(other_tensors())
    return write(root, cfg, tensors, **kw)


def main(argv: list[str] | None = None) -> None:
    """`python tests/ckpt_factory.py OUT [LAYOUT]`: a checkpoint shaped like the real model in
    names and config (head_dim 160, 128 shards, PLE layer 2: ple_layer_ids [2], its tensors under
    layers.1), tiny in size (the README's example)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python tests/ckpt_factory.py", description=main.__doc__.split("`: ", 1)[1])
    parser.add_argument("out", metavar="OUT", help="the checkpoint directory to write (must not exist)")
    parser.add_argument("layout", metavar="LAYOUT", nargs="?", default="nvfp4_rowpacked", choices=sorted(LAYOUT_DTYPE),
                        help="the PLE table's layout (default nvfp4_rowpacked)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        parser.error(f"{out} exists: give a new directory")
    make(out, args.layout, head_dim=160, heads_per_ngram=8, base=1000, divisor=128, parts=128, files=4)
    print(out)


if __name__ == "__main__":
    main()

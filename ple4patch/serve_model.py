"""The model a `vllm serve` command line loads, as the engine's parser takes it.

What this follows (1CatAI/1Cat-vLLM ae13773a0deebf583022613c4508e5072cedef91):

- ``vllm/entrypoints/openai/cli_args.py`` ``make_arg_parser``: one optional positional
  ``model_tag`` (``nargs="?"``), before the options in the usage (``vllm serve [model_tag]
  [options]``) but found by argparse between them too; a second positional is refused as an
  unrecognized argument;
- ``vllm/utils/argparse_utils.py`` ``FlexibleArgumentParser.parse_args``: for ``serve``, the first
  ``--model X`` (or ``--model=X``) is moved in front as the positional, so a positional besides it
  is a second one; ``--served-model-name`` with an option first and no ``--config`` is refused
  ("`model` should be provided as the first positional argument"); ``_pull_args_from_config``
  refuses a ``--config`` file when neither the word after ``serve`` is a model nor the file
  has ``model:`` ("No model specified!");
- ``vllm/entrypoints/cli/serve.py`` ``ServeSubcommand.cmd``: the positional, when given, is the
  model; else ``--model`` (the file's); else ``ModelConfig.model``'s default,
  ``Qwen/Qwen3-0.6B`` (``vllm/config/model.py``);
- ``vllm/entrypoints/openai/api_server.py`` ``__main__``: the same parser, but no ``serve``
  handling, and ``run_server`` loads ``args.model``: a positional there is parsed and ignored.

ple4patch does not know the engine's whole option list, so after an option it does not know,
a bare word may be that option's value or a model (`Words.unsure`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import UsageError

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # ModelConfig.model at ae13773a (vllm/config/model.py)

# How the words were given: after `vllm serve` (or `serve`, or the CLI module's `serve`); after
# `python -m vllm.entrypoints.<module>` (api_server); the options alone (read as the words after
# `vllm serve CHECKPOINT_DIR` when they name no model).
SERVE, MODULE, OPTIONS_ALONE = "serve", "module", "options"

_MODEL = re.compile(r"^--model(=.+|$)")  # as parse_args finds it: this spelling only
_CONFIG = re.compile(r"^--config(=.+|$)")
_SERVED_NAME = re.compile(r"^--served[-_]model[-_]name(=.+|$)")


@dataclass
class Words:
    """The bare words of a command line by what they are to argparse."""

    positionals: list[str] = field(default_factory=list)  # certainly positionals (models)
    unsure: list[tuple[str, str]] = field(default_factory=list)  # (word, the unknown option before it)


def classify(words: list[str], arity) -> Words:
    """Which bare words are positionals: the first word, one after a positional, after an
    option's attached value (``--name=VALUE``: argparse takes no more for it), after the value of
    an option `arity` knows (``arity(word)``: "next" when its value is the next word, "attached"
    when it is in the word, None for an option it does not know), or after the value of a dotted
    ``--name.key VALUE`` (the engine's parser takes exactly that one). After any other option a
    bare word is unsure."""
    out = Words()
    expect, option = "positional", None  # what the next bare word is
    for word in words:
        if word.startswith("-") and len(word) > 1:
            kind = arity(word)
            if "=" in word or kind == "attached":
                expect = "positional"
            elif kind == "next" or (word.startswith("--") and "." in word):
                expect = "value"
            else:
                expect, option = "unsure", word
        elif expect == "value":
            expect = "positional"
        elif expect == "positional":
            out.positionals.append(word)
        else:
            out.unsure.append((word, option))
    return out


def _cli_model(words: list[str]) -> tuple[str, str] | None:
    """(value, as given) of the first ``--model`` parse_args moves in front, or None."""
    for i, word in enumerate(words):
        if _MODEL.match(word):
            if word == "--model":
                return (words[i + 1], f"--model {words[i + 1]}") if i + 1 < len(words) else None
            return word[len("--model="):], word
    return None


def model_of(words: list[str], config_words: list[str], form: str, arity,
             prefix: str = "vllm serve") -> tuple[str | None, str | None]:
    """(model, how it was given) the engine loads for these words (after the launch prefix;
    `config_words`: the ``--config`` file's options), or (None, None) for options alone that
    name none (then the model is CHECKPOINT_DIR). A command line the engine refuses, or one
    that loads the engine's default model, is a usage error naming what to change."""
    bare = classify(words, arity)
    if form == MODULE:
        return _module_model(words, config_words, bare, prefix)
    cli, in_file = _cli_model(words), _cli_model(config_words)
    if cli is not None and bare.positionals:
        raise UsageError(f"--serve-args: vllm serve takes one model, and this names two ({cli[1]} and "
                         f"{bare.positionals[0]}): vllm serve puts --model's value first and would refuse "
                         f"{bare.positionals[0]} as an unrecognized argument; give the one model the server loads")
    if len(bare.positionals) > 1:
        first, second = bare.positionals[:2]
        raise UsageError(f"--serve-args: vllm serve takes one model, and this names two ({first} and "
                         f"{second}): vllm serve would refuse {second} as an unrecognized argument; give "
                         "the one model the server loads")
    if form == OPTIONS_ALONE:  # read after `vllm serve CHECKPOINT_DIR`: its checks pass
        if cli is not None:
            return cli
        if bare.positionals:
            return bare.positionals[0], bare.positionals[0]
        return (in_file[0], f"--model {in_file[0]}") if in_file else (None, None)
    first = cli[0] if cli is not None else (words[0] if words else None)
    model_first = first is not None and not first.startswith("-")
    if (first is not None and not model_first and not any(_CONFIG.match(w) for w in words)
            and any(_SERVED_NAME.match(w) for w in words)):
        raise UsageError(f"--serve-args: {prefix} refuses --served-model-name unless the model comes first "
                         f"(`model` should be provided as the first positional argument): write `{prefix} "
                         "CHECKPOINT_DIR --served-model-name ...`")
    if "--config" in words and not model_first and in_file is None:
        at = words.index("--config")
        name = words[at + 1] if at + 1 < len(words) else "FILE"
        raise UsageError(f"--serve-args: {prefix} refuses --config {name} with no model right after serve and "
                         f"none in the file (\"No model specified!\"): write `{prefix} CHECKPOINT_DIR "
                         f"--config {name} ...`")
    if cli is not None:
        return cli
    if bare.positionals:
        return bare.positionals[0], bare.positionals[0]
    if bare.unsure:
        word, option = bare.unsure[0]
        raise UsageError(f"--serve-args: ple4patch cannot tell whether {word} is the value of {option} or the "
                         f"model {prefix} loads (it does not know the engine's whole option list): put the "
                         f"model right after serve, as vllm serve's usage writes it (`{prefix} CHECKPOINT_DIR "
                         "[options]`)")
    if in_file is not None:
        return in_file[0], f"--model {in_file[0]}"
    raise UsageError(f"--serve-args: `{prefix}` here names no model, so it would load its default model "
                     f"{DEFAULT_MODEL}, not CHECKPOINT_DIR: write `{prefix} CHECKPOINT_DIR [options]`")


def _module_model(words: list[str], config_words: list[str], bare: Words, prefix: str) -> tuple[str, str]:
    """``python -m vllm.entrypoints.openai.api_server``: the last ``--model`` (the file's options
    come before the command line's), never a positional."""
    if bare.positionals:
        word = bare.positionals[0]
        raise UsageError(f"--serve-args: {prefix} does not load a positional model ({word}): only vllm serve "
                         f"takes one, and this loads --model (else {DEFAULT_MODEL}): write --model {word}")
    found = None
    for group in (config_words, words):
        for i, word in enumerate(group):
            if word == "--model" and i + 1 < len(group):
                found = group[i + 1], f"--model {group[i + 1]}"
            elif word.startswith("--model="):
                found = word[len("--model="):], word
    if found is None:
        raise UsageError(f"--serve-args: `{prefix}` here names no --model, so it would load its default model "
                         f"{DEFAULT_MODEL}, not CHECKPOINT_DIR: write `{prefix} --model CHECKPOINT_DIR [options]`")
    return found

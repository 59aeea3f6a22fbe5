"""Text for people in 100 columns: prose wrapped under its label, commands kept copy-pasteable.

- `fit(text)` wraps every line longer than WIDTH with a hanging indent: under its label's text
  (`note:    `, `next:    `, `engine:  `: a label of at most 12 columns), under its own indent
  for an indented line, two columns in for any other line (an error line, `ple4patch apply:
  error: ...`). A word is never broken: a path longer than a line stands alone on its own line,
  the one exception to WIDTH.
- A suggested command -- a span in backticks, or `ple4patch COMMAND [--options] [ARG]` and
  `[VENV/bin/python -m] pip install [--options] [ARG]` as messages write them (`shell` quotes
  their words) -- moves whole to the next line when it does not fit the rest of this one; a
  quoted word in it (`'/tmp/my engine'`) is one word. Longer than a line, it goes on as a shell does: ` \\` at the end,
  the rest two columns further in, so that it pastes into a shell as printed. A single-quoted
  span (`'1cat-vllm==1.5.1'`, `'{"ple_disk_cascade": false}'`) is never split.
- `fit_lines([(line, hang), ...])` does both for a report laid out in columns (`inspect`).
- `relative_to_site(text)` names the files under one site-packages directory relative to it,
  and that directory once, after the first of them: `cannot revert
  vllm/models/qwen4_exp/nvidia/ple_layer.py (in /opt/engine/lib/python3.12/site-packages): ...`.
  Text for people uses it; `--verbose` and `--json` keep every path whole, and so does a text
  whose site-packages has a space or a quote in its path (where a path ends is then not
  known from the text: it is shown whole).

Pure functions of strings: no reads, no writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WIDTH = 100  # text lines fit this many columns
MAX_LABEL = 12  # a label this wide or narrower (`engine:  `) is hung under; a wider one is not
CONTINUATION = " \\"  # ends a line of a command that goes on on the next line

_LABEL = re.compile(r"^([a-z][a-z0-9 ]*:) +(?=\S)")
_COMMAND = re.compile(
    r"`[^`]*`"  # anything in backticks
    r"|\bple4patch (?:apply|status|verify|revert|inspect|selftest)\b(?!:)(?: --?[a-z][a-z-]*)*"
    r"(?: (?![(-])(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s`'\"])+)?"  # [ARG], shell-quoted
    r"|(?:(?:'(?:[^'\n]|'\"'\"')*/bin/python[0-9.]*'|(?<![^\s(])[^\s`'(]*/bin/python[0-9.]*) -m )?"  # the venv's own pip
    r"\bpip install(?: --?[a-z][a-z-]*)*(?: '[^']*'| (?![(-])[^\s`]+)?"
)
_QUOTED = re.compile(r"(?<![^\s(=])'[^'\n]*'(?=[\s)`,.;:]|$)")  # a quote opens a word (not "engine's")


@dataclass
class _Word:
    text: str
    command: int | None  # the command it belongs to (its index in the line), or None: prose


def _spans(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def _words(body: str) -> list[_Word]:
    """The words of `body`: split at spaces, never inside a single-quoted span; each word
    tagged with the command span it overlaps, if any."""
    commands = _spans(_COMMAND, body)
    quoted = _spans(_QUOTED, body)
    out: list[_Word] = []
    i, n = 0, len(body)
    while i < n:
        if body[i] == " ":
            i += 1
            continue
        j = i
        while j < n and body[j] != " ":
            inside = next((e for s, e in quoted if s <= j < e), None)
            if body[j] in "'\"" and any(s <= j < e for s, e in commands):  # a command's quoted part: one word
                close = body.find(body[j], j + 1)
                inside = close + 1 if close > j else None
            j = inside if inside is not None and inside > j else j + 1
        cmd = next((k for k, (s, e) in enumerate(commands) if s < j and i < e), None)
        out.append(_Word(body[i:j], cmd))
        i = j
    return out


def _hang(line: str) -> tuple[str, int]:
    """(the line's first-line prefix, the indent of its continuation lines)."""
    lead = len(line) - len(line.lstrip(" "))
    if lead:
        return line[:lead], lead
    m = _LABEL.match(line)
    if m and len(m.group(0)) <= MAX_LABEL:
        return m.group(0), len(m.group(0))
    return "", 2


def _is_one_token(line: str) -> bool:
    """A line that is one word (a path longer than a line), or one word of a command and its
    continuation mark: already as narrow as it can be."""
    body = line.strip()
    return " " not in body.removesuffix(CONTINUATION)


def wrap(line: str, width: int = WIDTH, hang: int | None = None) -> str:
    """One line wrapped at `width` columns (see the module's docstring). `hang` sets the indent
    of the continuation lines; where the line's value starts at that column (`pinned      TP4:
    ...`, `              change: ...`), what comes before it is kept as it is."""
    if len(line) <= width or _is_one_token(line):
        return line
    prefix, indent = _hang(line)
    if hang is not None:
        indent = hang
        if line[:hang].endswith(" ") and line[hang:hang + 1] not in ("", " "):  # a column's value starts there
            prefix = line[:hang]
    words = _words(line[len(prefix):])
    lines: list[str] = []
    cur, bare = prefix, True  # bare: the current line holds only its prefix or indent
    cmd_indent = indent + 2
    for k, w in enumerate(words):
        more = w.command is not None and k + 1 < len(words) and words[k + 1].command == w.command
        first = w.command is not None and (k == 0 or words[k - 1].command != w.command)
        if first:
            whole = len(" ".join(x.text for x in words if x.command == w.command))
            if not bare and len(cur) + 1 + whole > width:  # the command moves whole to a new line
                lines.append(cur)
                cur, bare = " " * indent, True
            cmd_indent = len(cur) + 2  # its continuation lines: two columns in from where it starts
        need = len(w.text) + (len(CONTINUATION) if more else 0)
        if bare and cur.strip() and len(cur) + need > width:  # a label, then a word too long for it
            lines.append(cur.rstrip())
            cur = " " * indent
        if bare or len(cur) + 1 + need <= width:
            cur = cur + w.text if bare else f"{cur} {w.text}"
            bare = False
            continue
        if w.command is not None and not first:  # inside a command: continue it shell-style
            lines.append(cur + CONTINUATION)
            cur = " " * cmd_indent + w.text
        else:
            lines.append(cur)
            cur = " " * indent + w.text
    lines.append(cur)
    return "\n".join(lines)


def fit(text: str, width: int = WIDTH) -> str:
    """Every line of `text` wrapped at `width` columns (`wrap`)."""
    return "\n".join(wrap(line, width) for line in text.split("\n"))


_SITE = re.compile(r"(?<![^\s(`'\"])([^\s(`'\"]*/lib(?:64)?/python\d+\.\d+/site-packages)(?=/|[\s)`'\":;,.]|$)")
_PATH_END = re.compile(r"[^\s()`'\":;,]*[^\s()`'\":;,.]")


def _mid_word(text: str, at: int) -> bool:
    """Whether a path found at `at` follows a quote, backtick or parenthesis that is itself inside
    a word (`/tmp/o'/v/lib/...`): then what was found is the tail of a path with that character in
    a directory name, not a whole path."""
    return at >= 2 and text[at - 1] in "(`'\"" and not (text[at - 2].isspace() or text[at - 2] in "(`'\"")


def relative_to_site(text: str) -> str:
    """`text` with every path under its site-packages directory named relative to it, outside
    commands, and that directory named once: after the first such path, `(in DIR)`, unless the
    text names the directory by itself. Text naming no or several site-packages is returned as
    it is."""
    found = list(_SITE.finditer(text))
    sites = {m.group(1) for m in found}
    if len(sites) != 1 or not next(iter(sites)).startswith("/") or any(_mid_word(text, m.start(1)) for m in found):
        return text  # several, or the tail of a path with a space or quote in it: every path whole
    site = sites.pop()
    named = re.search(re.escape(site) + r"(?!/)", text) is not None
    out: list[str] = []
    for line in text.split("\n"):
        commands = _spans(_COMMAND, line)
        pieces, last = [], 0
        for m in re.finditer(re.escape(site) + "/", line):
            if any(s <= m.start() < e for s, e in commands):
                continue
            rest = _PATH_END.match(line, m.end())
            if rest is None:
                continue
            pieces.append(line[last:m.start()] + rest.group(0))
            if not named:
                pieces.append(f" (in {site})")
                named = True
            last = rest.end()
        out.append("".join(pieces) + line[last:])
    return "\n".join(out)


def fit_lines(lines: list[tuple[str, int]], width: int = WIDTH) -> str:
    """A report's lines, each with the indent of its continuation lines (`inspect`'s columns):
    files relative to site-packages (`relative_to_site`, over all of them), then each wrapped."""
    if any("\n" in line for line, _ in lines):
        # a path with a newline in it: each line as it is, the newline shown as an escape, so
        # that no line of the report is lost or shifted (and every path stays whole)
        texts = [line.replace("\n", "\\n") for line, _ in lines]
    else:
        texts = relative_to_site("\n".join(line for line, _ in lines)).split("\n")
    return "\n".join(wrap(text, width, hang) for text, (_, hang) in zip(texts, lines, strict=True))


def for_people(text: str, verbose: bool = False) -> str:
    """`text` as a terminal shows it: paths relative to site-packages unless `verbose`, lines fit
    WIDTH."""
    return fit(text if verbose else relative_to_site(text))

"""One finding about a checkpoint: a problem (it will not load) or a warning (it may)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing that keeps the checkpoint from loading (or, as a warning, may)."""

    code: str  # short machine-readable kind: missing_shard, dtype, shape, ...
    message: str  # one line: what is wrong and what to do
    tensor: str | None = None
    expected: str | None = None
    file: str | None = None
    says_expected: bool = False  # the message itself says what is expected: line() does not repeat it

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in ("code", "tensor", "file", "message", "expected")}

    def line(self) -> str:
        where = self.tensor or self.file
        text = f"{where}: {self.message}" if where else self.message
        if self.expected and not self.says_expected:
            text += f" (expected {self.expected})"
        return text

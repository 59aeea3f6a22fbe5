"""Stand-in."""

import enum


class MambaAttentionBackendEnum(enum.Enum):
    SHORT_CONV = "short_conv"

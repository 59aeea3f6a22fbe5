"""Stand-in."""

NULL_BLOCK_ID = 0

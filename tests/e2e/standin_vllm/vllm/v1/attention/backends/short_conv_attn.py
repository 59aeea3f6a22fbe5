"""Stand-in."""


class PleShortConvAttentionBackend:
    pass


class PleShortConvAttentionMetadata:
    pass

"""Stand-in."""


class MambaBase:
    pass

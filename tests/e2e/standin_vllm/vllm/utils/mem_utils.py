"""Stand-in."""


def format_gib(num_bytes: int) -> str:
    return f"{num_bytes / 2**30:.2f} GiB"

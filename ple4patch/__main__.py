"""`python -m ple4patch ...` is the same as the `ple4patch` command."""

from .cli import main

main(prog_name="ple4patch")

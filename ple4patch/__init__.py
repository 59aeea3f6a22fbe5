"""ple4patch: make an installed 1Cat-vLLM read the NVFP4 row-packed PLE table."""

__version__ = "0.2.0"

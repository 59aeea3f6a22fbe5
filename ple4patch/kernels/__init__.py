"""NVFP4 PLE kernels: the format, the CPU reference, the Triton gather, the injected loader."""

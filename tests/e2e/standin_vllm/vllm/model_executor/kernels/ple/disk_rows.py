"""Stand-in: the mapped-row disk reader is not part of these tests."""


class MappedRowGatherKernel:
    pass


def prepare_mapped_row_gather(**kwargs):
    raise NotImplementedError("the stand-in engine has no disk row reader")

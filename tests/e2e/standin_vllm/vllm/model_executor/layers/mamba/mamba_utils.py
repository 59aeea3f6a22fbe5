"""Stand-in."""


class MambaStateDtypeCalculator:
    pass


class MambaStateShapeCalculator:
    pass


def is_conv_state_dim_first() -> bool:
    return False

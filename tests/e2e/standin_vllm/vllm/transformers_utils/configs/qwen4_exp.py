"""Stand-in Qwen4Exp text config: keyword arguments become attributes."""


class Qwen4ExpTextConfig:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

"""Stand-in vllm.logger."""

import logging


class _Logger(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return msg, kwargs

    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args, **kwargs)


def init_logger(name: str):
    return _Logger(logging.getLogger(name), {})

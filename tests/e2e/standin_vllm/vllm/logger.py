"""Stand-in vllm.logger.

Mirrors vllm/logger.py of 1CatAI/1Cat-vLLM at ae13773a0deebf583022613c4508e5072cedef91.
"""

import logging


class _Logger(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return msg, kwargs

    def debug_once(self, msg, *args, **kwargs):
        self.debug(msg, *args, **kwargs)

    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args, **kwargs)


def init_logger(name: str):
    return _Logger(logging.getLogger(name), {})

"""Helpers of the hostile-environment tests: a time bound, another user, ownership."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

import kit
from ple4patch import fsio

NOBODY = 65534
TIME_BOUND = 20  # seconds: any one command; a FIFO or device must never make it wait


class Bound(Exception):
    pass


@contextlib.contextmanager
def time_bound(seconds: int = TIME_BOUND):
    def fire(signum, frame):
        raise Bound(f"no answer within {seconds} s: blocked")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, files in os.walk(path):
        for n in dirnames + files:
            os.chown(os.path.join(dirpath, n), uid, uid, follow_symlinks=False)


def as_user(uid: int, *args, manifests=(), env=None, timeout: float = TIME_BOUND) -> subprocess.CompletedProcess:
    """The real CLI (fake transform) run as `uid` in a child process (setpriv)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover
        pytest.skip("setpriv is not installed: cannot run as another user")
    e = kit.env_with(list(manifests), **{fsio.LOCK_TIMEOUT_ENV: "2"}, **(env or {}))
    e["HOME"] = "/tmp"
    cmd = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *kit.fake_cmd(*args)]
    return subprocess.run(cmd, capture_output=True, text=True, errors="surrogateescape", env=e, timeout=timeout,
                          cwd="/tmp")



"""Safe writes beside the target: lock, backup, atomic replace, set aside, remove.

Every write goes to a temp file in the same directory, is fsync'ed, takes the
mode of the file it replaces, and lands with `os.replace` followed by an fsync
of the directory: at every instant a path holds either its old or its new
bytes. Writes never follow a symlinked target, and a hard-linked target gets a
new inode (the other links keep their bytes).

Test-only fault points: with `PLE4PATCH_FAULT=<point>` the process SIGKILLs
itself when it reaches that point (see `FAULT_POINTS`); the reliability tests
use them to kill apply/revert after each writing step.

`identity_of` and `atomic_write(before_replace=...)` let a caller make sure, right before
the rename, that the file it replaces is still the one it read (another program, pip or an
editor, may write it while ple4patch works: the venv lock keeps out only ple4patch).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import secrets
import signal
import stat
import time
from pathlib import Path
from typing import Callable, Iterator

from . import columns, readfile, shell
from .errors import LockTimeout, ModifiedFile, NotWritable, UsageError
from .paths import lock_path, stale_name as stale_path, temp_name

LOCK_TIMEOUT_ENV = "PLE4PATCH_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 30.0
FAULT_ENV = "PLE4PATCH_FAULT"
FAULT_POINTS = (
    "after-lock",  # the lock is held, nothing written yet
    "after-backup",  # apply: the backup is in place, the target untouched
    "after-pins",  # apply --allow-unknown: the local pins are written
    "after-temp",  # the new target bytes are in a fsync'ed temp file, not yet renamed
    "after-replace",  # the target holds its new bytes (backup not yet removed on revert)
    "after-backup-removed",  # revert: the backup is gone, bytecode not yet cleaned
    "after-pycache",  # stale bytecode removed; the command is about to finish
)
# The points each command passes through (in order).
APPLY_FAULT_POINTS = ("after-lock", "after-backup", "after-pins", "after-temp", "after-replace", "after-pycache")
REVERT_FAULT_POINTS = ("after-lock", "after-temp", "after-replace", "after-backup-removed", "after-pycache")
# Only where a set of more than one file is written (see `write.write_set`, `write.restore_set`).
SET_FAULT_POINTS = (
    "after-journal",  # every backup is in place (apply) and the journal names the set
    "between-replaces",  # the first file holds its new bytes, the others not yet
)
SET_APPLY_FAULT_POINTS = ("after-lock", "after-backup", "after-pins", "after-journal", "after-temp",
                          "between-replaces", "after-replace", "after-pycache")
SET_REVERT_FAULT_POINTS = ("after-lock", "after-journal", "after-temp", "between-replaces", "after-replace",
                           "after-backup-removed", "after-pycache")


FAULT_RUN_ENV = "PLE4PATCH_FAULT_RUN"


def fault(point: str) -> None:
    """SIGKILL this process if $PLE4PATCH_FAULT names `point` (tests only).

    `$PLE4PATCH_FAULT=sleep:<point>` sleeps there instead (`$PLE4PATCH_FAULT_SLEEP` seconds,
    default 30) after a line on stderr, so a test can send a signal (Ctrl-C) at that step.
    `$PLE4PATCH_FAULT=run:<point>` runs the shell command `$PLE4PATCH_FAULT_RUN` there and goes
    on, so a test can play another program (pip, an editor) writing a file at that step.
    """
    assert point in FAULT_POINTS or point in SET_FAULT_POINTS, point
    value = os.environ.get(FAULT_ENV)
    if value == point:
        os.kill(os.getpid(), signal.SIGKILL)
    elif value == f"sleep:{point}":
        os.write(2, f"ple4patch: test fault point {point}: sleeping\n".encode())
        time.sleep(float(os.environ.get("PLE4PATCH_FAULT_SLEEP", "30")))
    elif value == f"run:{point}":
        import subprocess

        subprocess.run(os.environ.get(FAULT_RUN_ENV, "true"), shell=True, check=True)


Identity = tuple  # (st_dev, st_ino, st_size, st_mtime_ns) of a path, not following a symlink


def identity_of(path: Path) -> Identity | None:
    """The file at `path` as the file system knows it (device, inode, size, mtime in ns): any
    write by another program changes one of them. None when nothing is there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _not_writable(path: Path, exc: OSError, doing: str) -> NotWritable:
    reason = exc.strerror or str(exc)
    hint = {
        errno.EACCES: "run as the venv's owner (or with sudo)",
        errno.EPERM: "run as the venv's owner (or with sudo)",
        errno.EROFS: "the file system is read-only: patch the image at build time",
        errno.ENOSPC: "free some disk space",
    }.get(exc.errno or 0, "check the venv's permissions and disk")
    return NotWritable(f"cannot {doing} {path}: {reason}; {hint}")


def lock_timeout_from_env(default: float = DEFAULT_LOCK_TIMEOUT) -> float:
    """`$PLE4PATCH_LOCK_TIMEOUT` in seconds (unset or empty: `default`); anything but a finite,
    non-negative number is a usage error, before the lock is touched."""
    value = os.environ.get(LOCK_TIMEOUT_ENV)
    if value is None or not value.strip():
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(f"${LOCK_TIMEOUT_ENV} must be a number of seconds, 0 or more, got {value!r}: "
                         f"set it to one (0: do not wait), or unset it for the default {default:g} s")
    return seconds


LOCK_NOTICE_AFTER = 1.0  # seconds of waiting for the lock before saying so, once, on stderr


def lock_holder(fd: int) -> str | None:
    """Who holds the flock on the file open at `fd`, from /proc/locks: `pid N (its command)`,
    or None where that is not known (no /proc, another namespace)."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            rows = [line.split() for line in f.read(1 << 20).splitlines()]
    except OSError:
        return None
    for row in rows:
        fields = [x for x in row if x != "->"]
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == dev and fields[4].isdigit():
            pid = fields[4]
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = [os.fsdecode(a) for a in f.read(4096).split(b"\0") if a]
            except OSError:
                return f"pid {pid}"
            shown = " ".join(" ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv[:4])).split())
            return f"pid {pid} ({shown[:60]})" if shown else f"pid {pid}"
    return None


def _say_on_stderr(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (columns.for_people(line) + "\n").encode("utf-8", "surrogateescape"))


@contextlib.contextmanager
def locked(directory: Path, timeout: float | None = None,
           on_wait: Callable[[str], None] = _say_on_stderr) -> Iterator[Path]:
    """Hold an exclusive fcntl lock on `<directory>/.ple4patch.lock`.

    `directory` is the root of the venv's site-packages (`Engine.state_dir`), never the
    engine's package: pip uninstall would leave the file there, keeping `vllm/` alive.
    The lock file is left in place (unlinking lock files races); the lock dies
    with the process, so a killed run never leaves the venv locked. After LOCK_NOTICE_AFTER
    seconds of waiting, `on_wait` gets one line saying so (the CLI: on stderr, never in
    --json's stdout): the lock, who holds it where known, and for how long it may wait.
    """
    timeout = lock_timeout_from_env() if timeout is None else timeout
    path = lock_path(directory)
    fd = _open_lock(path)
    try:
        start = time.monotonic()
        deadline = start + timeout
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = lock_holder(fd)
                    raise LockTimeout(
                        f"another process holds {path}" + (f" ({holder})" if holder else "")
                        + f" (waited {timeout:g} s): wait for it to finish, or wait longer by "
                        f"setting ${LOCK_TIMEOUT_ENV} (seconds) before the command, e.g. "
                        f"{LOCK_TIMEOUT_ENV}=120"
                    ) from None
                if not said and time.monotonic() - start >= LOCK_NOTICE_AFTER:
                    said = True
                    holder = lock_holder(fd)
                    on_wait(f"ple4patch: waiting for the lock {path}" + (f", held by {holder}" if holder else "")
                            + f", for up to {timeout:g} s (${LOCK_TIMEOUT_ENV})")
                time.sleep(0.05)
        fault("after-lock")
        yield path
    finally:
        os.close(fd)  # closing releases the flock


def _not_our_lock(path: Path, found: str) -> NotWritable:
    return NotWritable(
        f"{path} is {found}, not the empty lock file ple4patch keeps there: nothing written; "
        f"ple4patch did not make it and leaves it alone: move it away, then run again"
    )


def _open_lock(path: Path) -> int:
    """Open (or create) the lock file without blocking and without following a symlink.

    Made by root (a `sudo` run), it is handed to the owner of site-packages, like the backup;
    one left by another user that this user cannot write is opened read-only, which locks
    just as well (flock needs no write access): a sudo run never locks the owner out.
    """
    flags = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError as denied:
        try:
            fd = os.open(path, flags | os.O_RDONLY)
        except OSError:
            raise _lock_unopenable(path, denied) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _not_our_lock(path, "a symlink") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            raise _not_our_lock(path, readfile.what_is(path) or "not a regular file") from None
        raise _not_writable(path, exc, "create the lock file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_our_lock(path, readfile.kind_of(st.st_mode))
        if os.geteuid() == 0 and st.st_uid == 0 and st.st_nlink == 1:  # never a file linked elsewhere
            _give_to_dir_owner(fd, path.parent)
        if st.st_uid == os.geteuid() and st.st_mode & 0o444 != 0o444:
            # made under a strict umask (077): readable by all, so that another user of a shared
            # venv can open it to lock (flock needs no write access); it is always empty
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o444)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock_unopenable(path: Path, denied: OSError) -> NotWritable:
    """The lock file cannot be opened: not there and not creatable here, or there and unreadable
    to this user (made by another one under a strict umask by an older ple4patch)."""
    try:
        st = os.lstat(path)
    except OSError:
        return _not_writable(path, denied, "create the lock file")
    return NotWritable(
        f"cannot open the lock file {path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}): "
        f"{denied.strerror or denied}; it is empty: its owner can make it readable "
        f"(`chmod a+r {shell.quote(path)}`) or remove it, or run as that user"
    )


def _give_to_dir_owner(fd: int, directory: Path) -> None:
    """As root, hand a file ple4patch made to the owner of the directory it lies in."""
    with contextlib.suppress(OSError):
        d = os.stat(directory)
        if d.st_uid != 0 or d.st_gid != 0:
            os.fchown(fd, d.st_uid, d.st_gid)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refuse_symlink(path: Path, fix: str | None = None) -> None:
    """ModifiedFile when `path` is a symlink; `fix` says what to do (default: reinstall the
    engine with its own venv's pip, whose command the caller knows: `engine.reinstall_hint`)."""
    if os.path.islink(path):
        raise ModifiedFile(
            f"{path} is a symlink (to {os.readlink(path)}): ple4patch does not write through "
            f"symlinks; {fix or 'install the engine normally (with the pip of its own venv)'}"
        )


def copy_xattrs(src: Path, fd: int) -> list[str]:
    """Copy `src`'s extended attributes (its POSIX ACL, `system.posix_acl_access`, included)
    onto the open file `fd`, as `cp -a` does. Returns the names that could not be copied (a
    namespace the user may not write, such as `trusted.*` or `security.*` without privileges,
    or a file system that does not take them); none when `src` has none or the file system
    has no extended attributes at all."""
    try:
        names = os.listxattr(src, follow_symlinks=False)
    except OSError:  # no xattr support here (ENOTSUP), or src gone: nothing to copy
        return []
    dropped = []
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(src, name, follow_symlinks=False))
        except OSError as exc:
            if exc.errno == errno.ENODATA:  # removed meanwhile: nothing to copy
                continue
            dropped.append(name)
    return dropped


def atomic_write(
    path: Path, data: bytes, *, mode: int | None = None, like: Path | None = None, fault_temp: bool = False,
    before_replace: Callable[[], None] | None = None,
) -> list[str]:
    """Write `data` to `path` through a fsync'ed temp file and `os.replace`.

    `mode`: the permission bits of the result; default those of `like` (or of
    `path` if it exists), else 0o644. Owner/group are copied when possible, and the
    extended attributes (ACLs too) of `like` (or of `path`): returns the names of those that
    could not be copied (`copy_xattrs`).
    `fault_temp`: hit the `after-temp` fault point before the rename.
    `before_replace`: called last before the rename (the temp file is whole); whatever it
    raises stops the write, the temp file is removed and `path` keeps its bytes.
    """
    refuse_symlink(path)
    directory = path.parent
    ref = like if like is not None else path
    st = None
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(ref, follow_symlinks=False)
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o644
    tmp = temp_name(path, f"{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fchmod(fd, mode)
            if st is not None and os.geteuid() == 0:
                with contextlib.suppress(OSError):
                    os.fchown(fd, st.st_uid, st.st_gid)
            elif os.geteuid() == 0:  # a new file (the local pins): the directory's owner gets it
                _give_to_dir_owner(fd, directory)
            dropped = copy_xattrs(ref, fd) if st is not None else []  # after fchown, which clears some
            os.fsync(fd)
        finally:
            os.close(fd)
        if fault_temp:
            fault("after-temp")
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
        fsync_dir(directory)
    except BaseException as exc:  # OSError, and Ctrl-C: never leave the temp file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _not_writable(path, exc, "write") from None
        raise
    return dropped


def keep_aside(path: Path) -> Path:
    """Keep `path`'s current bytes under a temp name beside it (a hard link, else a copy), so
    a failed run can put them back with a rename, which needs no disk space. A leftover is a
    temp file like any other: status names it, the next apply/revert removes it."""
    keep = temp_name(path, f"keep-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.link(path, keep, follow_symlinks=False)
    except OSError:  # no hard links here: a copy (made before anything changes)
        try:
            data = readfile.read_regular(path, follow=False)
        except OSError as exc:
            raise _not_writable(path, exc, "read") from None
        atomic_write(keep, data, like=path)
        return keep
    fsync_dir(path.parent)
    return keep


def read_if_exists(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist (any other failure raises OSError:
    `readfile.NotRegular` for a FIFO, device, socket or directory; never blocks)."""
    return readfile.read_if_regular(path)


def write_backup(backup: Path, data: bytes, *, like: Path) -> bool:
    """Make `backup` hold `data`. Returns False when it already did.

    Never overwrites a backup with different content: the caller sets such a
    backup aside first (`set_aside`), or this raises ModifiedFile.
    """
    refuse_symlink(backup)
    try:
        have = read_if_exists(backup)
    except OSError as exc:
        raise _not_writable(backup, exc, "read") from None
    if have == data:
        return False
    if have is not None:
        raise ModifiedFile(
            f"{backup} exists with other bytes; it is not overwritten: nothing written. It may be "
            f"yours: move it away, then run ple4patch apply again"
        )
    atomic_write(backup, data, like=like)
    return True


def stale_name(path: Path, sha256: str | None) -> Path:
    """A free name `<path>.stale-<sha12>[-n]` to set a stale/corrupt backup aside under."""
    tag = (sha256 or "unreadable")[:12]
    n = 0
    while os.path.lexists(dest := stale_path(path, tag, n)):
        n += 1
    return dest


def set_aside(path: Path, sha256: str | None, *, dest: Path | None = None) -> Path:
    """Rename a stale/corrupt backup to `dest` (default `stale_name`) so it is never restored."""
    dest = dest if dest is not None else stale_name(path, sha256)
    try:
        os.rename(path, dest)
        fsync_dir(path.parent)
    except OSError as exc:
        raise _not_writable(path, exc, "set aside") from None
    return dest


def remove(path: Path) -> bool:
    """Unlink `path` (no error if absent) and fsync its directory."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _not_writable(path, exc, "remove") from None
    fsync_dir(path.parent)
    return True


def unlink_all(paths: list[Path]) -> list[Path]:
    """Unlink each of `paths` (absent ones are skipped); the ones removed."""
    removed = []
    for path in paths:
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _not_writable(path, exc, "remove") from None
    return removed


def remove_temp_leftovers(paths: list[Path]) -> list[Path]:
    """Remove the temp files killed runs left (regular files with the temp prefix); anything
    else under such a name (a directory, a FIFO, a symlink) was not made by ple4patch and
    stays, and a leftover that cannot be removed stays too: the run goes on (status names it)."""
    removed = []
    for p in paths:
        if readfile.what_is(p) != "a regular file":
            continue
        try:
            if remove(p):
                removed.append(p)
        except NotWritable:
            pass
    return removed


def check_writable(directory: Path) -> None:
    """Fail early (before the lock) when the target's directory cannot take new files."""
    if not os.access(directory, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        if read_only:  # sudo would not help: say so
            raise _not_writable(directory, OSError(errno.EROFS, os.strerror(errno.EROFS)), "write in")
        raise NotWritable(
            f"cannot write in {directory}: permission denied; run as the venv's owner (or with sudo)"
        )

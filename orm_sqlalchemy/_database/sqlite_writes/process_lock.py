"""The SQLite write lock between processes: an advisory lock on a file beside the database.

SQLite's own lock is no queue: a writer that finds it taken sleeps in the busy handler (1, 2, 5
... 100 ms) and tries again, so across processes a waiting writer sleeps past the moment the
lock is free (measured: the relay and runner in a worker process beside 10 producers, commit to
handler p99 0.4-2.5 s; 65-91 ms on this lock). ``flock`` on
``<database>-neverlost-writer.lock`` is a lock the kernel hands over: a process blocked on it
is woken when the holder lets go, and the kernel lets go for a process that dies. The standard
library has no lock of that kind that asyncio can wait for: ``fcntl.flock`` blocks, so a writer
tries it without blocking first (no thread when nobody holds it) and else waits in a thread of
its own (``ProcessWriterLock``).

``flock`` rather than ``fcntl.lockf``: POSIX record locks belong to the process (two engines
of one process would not exclude each other, and closing any descriptor of the file drops
them), ``flock`` locks to the open file, so each event loop's gate has its own. The file is
never removed: a writer could lock the old one while another locks a new one. POSIX only; on
Windows (no ``fcntl``) writers of different processes meet in SQLite's busy handler, as before.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import weakref

from sqlalchemy.engine import URL

from ..._sqlite_files import database_path

__all__ = ["LOCK_SUFFIX", "ProcessWriterLock", "writer_lock_path"]

LOCK_SUFFIX = "-neverlost-writer.lock"

if sys.platform != "win32":
    import fcntl


def writer_lock_path(url: URL) -> str | None:
    """The lock file of the SQLite database at ``url``; None for an in-memory database, or
    where ``flock`` is missing (Windows)."""
    if sys.platform == "win32":
        return None
    database = database_path(url)
    return None if database is None else database + LOCK_SUFFIX


class ProcessWriterLock:
    """An exclusive ``flock`` on the lock file, for one event loop's writer turns.

    At most one waits at a time (the in-process turn is taken first), so at most one thread
    blocks in ``flock``; a wait given up (timeout, cancel) leaves that thread blocked, the next
    writer waits for the same thread, and a lock it gets when nobody waits any more is let go
    at once. The descriptor is opened at the first use in a process (a forked child opens its
    own: an inherited one is the parent's lock) and closed by ``close`` (the engine's
    ``dispose()``) or when the object goes.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._pid = 0
        self._blocked = False
        self._waiter: asyncio.Future[None] | None = None
        self._closer: weakref.finalize[[int], ProcessWriterLock] | None = None

    @property
    def waiting(self) -> bool:
        return self._waiter is not None and not self._waiter.done()

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False if another holds it (or a thread waits for it)."""
        fd = self._descriptor()
        if self._blocked:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    async def acquire(self, timeout_s: float) -> None:
        """Wait for the lock in a thread (after ``try_acquire`` said no); TimeoutError after
        ``timeout_s``."""
        loop = asyncio.get_running_loop()
        fd = self._descriptor()
        if not self._blocked:
            self._blocked = True
            threading.Thread(
                target=self._wait, args=(loop, fd), name="neverlost sqlite writer lock", daemon=True
            ).start()
        waiter = self._waiter = loop.create_future()
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # granted as the wait ended
            raise
        finally:
            if self._waiter is waiter:
                self._waiter = None

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close this process's descriptor (the next use opens it again), unless a thread
        still blocks on it: that one is closed when the object goes."""
        if self._pid != os.getpid() or self._blocked:
            return
        if self._closer is not None:
            self._closer()  # closes it, once
            self._closer = None
        self._fd, self._pid = -1, 0

    def _wait(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        """In the thread: block until the lock is ours, then tell the loop."""
        error: OSError | None = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            error = exc
        try:
            loop.call_soon_threadsafe(self._granted, error)
        except RuntimeError:  # the loop is closed: nobody is left to hand it to
            if error is None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _granted(self, error: OSError | None) -> None:
        self._blocked = False
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            if error is None:
                self.release()
        elif error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(None)

    def _descriptor(self) -> int:
        pid = os.getpid()
        if self._pid != pid:
            # O_RDONLY is enough for flock: any user who can read the database can queue.
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._pid = pid
            self._blocked, self._waiter = False, None
            if self._closer is not None:
                self._closer.detach()  # the parent's descriptor: left to the parent
            self._closer = weakref.finalize(self, os.close, self._fd)
        return self._fd

"""Exercise 2's zoo: each plausible wrong solution loses the check named after it.

Exercise 2 is about a lock that lets one instance run. Each entry overrides one or two
functions of the reference solution with a classic mistake; the check named after its
mistake must catch it, in process for every entry and, for a sample, through ``labkit
grade`` in the sandbox (``zoograding``), saying what ``SAYS`` gives. ``test_zoo.py``
checks the zoo as a whole.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex02",
        # The folder read as the cells ran: a caller's relative path names a file there,
        # not in the folder the caller is in, and another holder's lock is never met.
        "a relative path joined to the folder read at import (os.getcwd())",
        "the_lock_is_the_file_at_the_path_given",
        """
        _BASE = os.getcwd()


        @contextmanager
        def single_instance(path):
            fh = open(os.path.join(_BASE, path), "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "pidfile with O_EXCL goes stale after kill -9",
        "survives_holder_kill_9",
        """
        @contextmanager
        def single_instance(path):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                raise AlreadyRunning(f"locked by pid {open(path).read()}") from None
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            try:
                yield
            finally:
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "refusal without the holder's pid",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning("another instance is running") from None
                yield
    """,
    ),
    (
        "ex02",
        "lock kept when the block raises",
        "released_on_error",
        """
        HELD = []
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                raise AlreadyRunning(f"pid {fh.read()}") from None
            fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
            HELD.append(fh)
            yield
            HELD.remove(fh)
            fh.close()
    """,
    ),
    (
        "ex02",
        "open(path, 'w') wipes the holder before locking",
        "refused_attempt_keeps_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "w+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"pid {fh.read() or 'unknown'}") from None
                fh.write(str(os.getpid())); fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "pidfile that appends the pid instead of replacing it",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked (pid {fh.read().strip()})") from None
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "lock by checking the file exists, then creating it",
        "two_instances_started_together",
        """
        @contextmanager
        def single_instance(path):
            if os.path.exists(path):
                with open(path) as fh:
                    raise AlreadyRunning(f"already running (pid {fh.read().strip()})")
            with open(path, "w") as fh:
                fh.write(str(os.getpid()))
            try:
                yield
            finally:
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "a refused attempt deletes the holder's lock file",
        "refusal_leaves_the_lock_alone",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked (pid {fh.read().strip()})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                os.unlink(path)
    """,
    ),
    (
        "ex02",
        "a refused attempt removes the 'stale' lock file it could not take",
        "refusal_leaves_the_lock_alone",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip()
                    os.unlink(path)
                    raise AlreadyRunning(f"locked (pid {holder}); removed the stale file") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "lockf (a per-process record lock) instead of flock",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.lockf(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked by pid {fh.read().strip()}") from None
                fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder deletes the lock file when it is done",
        "release_keeps_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked by pid {fh.read().strip()}") from None
                fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
                try:
                    yield
                finally:
                    os.unlink(path)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "an error inside the with block swallowed",
        "error_inside_the_block_comes_out",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked by pid {fh.read().strip()}") from None
                fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
                try:
                    yield
                except Exception as exc:
                    print("job failed:", exc)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a dead holder's pidfile taken over in steps (O_EXCL)",
        "takeover_after_kill_admits_one",
        """
        @contextmanager
        def single_instance(path):
            while True:
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    break
                except FileExistsError:
                    try:
                        pid = int(open(path).read().strip() or 0)
                    except (OSError, ValueError):
                        pid = 0
                    alive = False
                    if pid:
                        try:
                            os.kill(pid, 0)
                            alive = True
                        except ProcessLookupError:
                            alive = False
                        except PermissionError:
                            alive = True
                    if alive:
                        raise AlreadyRunning(f"locked by pid {pid}") from None
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            try:
                yield
            finally:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
    """,
    ),
    (
        "ex02",
        "the job's own BlockingIOError reported as AlreadyRunning",
        "error_inside_the_block_comes_out",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()
                yield
            except OSError:
                fh.seek(0)
                raise AlreadyRunning(f"locked by pid {fh.read().strip()}") from None
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid written over the old text, not truncated (os.write at offset 0)",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.read(fd, 64).decode().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, str(os.getpid()).encode())
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        "the pid written atomically (a temporary file renamed over the locked one)",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"locked by pid {fh.read().strip()}") from None
                with open(path + ".tmp", "w") as out:
                    out.write(str(os.getpid()))
                os.replace(path + ".tmp", path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid appended before taking the lock (a refused attempt leaves its pid in the file)",
        "refused_attempt_keeps_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fh.write(f"\\n{os.getpid()}")
                fh.flush()
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "any OSError reported as AlreadyRunning (a missing folder looks like a holder)",
        "a_broken_lock_path_is_not_already_running",
        """
        @contextmanager
        def single_instance(path):
            try:
                fh = open(path, "a+")
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = "unknown"
                try:
                    with open(path) as other:
                        holder = other.read().strip() or "unknown"
                except OSError:
                    pass
                raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
            try:
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused attempt waits for the lock (LOCK_NB in a retry loop for 2 s)",
        "second_holder_is_refused",
        """
        import time as _time
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                give_up = _time.monotonic() + 2.0
                while True:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if _time.monotonic() >= give_up:
                            fh.seek(0)
                            holder = fh.read().strip() or "unknown"
                            raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                        _time.sleep(0.05)
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose file is over an hour old deleted as stale and taken",
        "a_held_lock_is_never_stale",
        """
        import time as _time

        STALE_S = 3600


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if _time.time() - os.path.getmtime(path) > STALE_S:
                        fh.close()
                        os.unlink(path)
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    else:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        message = f"{path} is locked by another instance (pid {holder})"
                        raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid read with int() (a ValueError when the file is empty)",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = int(fh.read().strip())
                    message = f"{path} is locked by another instance (pid {holder})"
                    raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the locked file kept in a module-level global (a second lock releases the first)",
        "a_second_lock_keeps_the_first",
        """
        _HELD = None


        @contextmanager
        def single_instance(path):
            global _HELD
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                message = f"{path} is locked by another instance (pid {holder})"
                raise AlreadyRunning(message) from None
            _HELD = fh
            del fh
            try:
                _HELD.seek(0)
                _HELD.truncate()
                _HELD.write(str(os.getpid()))
                _HELD.flush()
                yield
            finally:
                if _HELD is not None:
                    _HELD.close()
                    _HELD = None
    """,
    ),
    (
        "ex02",
        "a lock's age from utcnow() minus a local fromtimestamp(mtime) (stale west of UTC)",
        "a_held_lock_is_never_stale",
        """
        import datetime as _dt


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    age = _dt.datetime.utcnow() - _dt.datetime.fromtimestamp(os.path.getmtime(path))
                    if age > _dt.timedelta(hours=1):
                        fh.close()
                        os.unlink(path)
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    else:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        message = f"{path} is locked by another instance (pid {holder})"
                        raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused attempt tries flock once more after 50 ms",
        "second_holder_is_refused",
        """
        import time as _time


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    _time.sleep(0.05)
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        message = f"{path} is locked by another instance (pid {holder})"
                        raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a PermissionError opening the lock file reported as AlreadyRunning",
        "a_broken_lock_path_is_not_already_running",
        """
        import errno as _errno


        class _Skip(Exception):
            pass


        @contextmanager
        def single_instance(path):
            try:
                fh = open(path, "a+")
            except PermissionError:
                raise AlreadyRunning(f"{path}: cannot open the lock file (pid unknown)") from None
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    message = f"{path} is locked by another instance (pid {holder})"
                    raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the refusal names the refused process's own pid (os.getpid()), not the holder's",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(f"{path} is locked; I am pid {os.getpid()}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid read without seek(0) ('a+' reads from the end: always 'unknown')",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid written but never flushed (the file is empty while held)",
        "file_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    message = f"{path} is locked by another instance (pid {holder})"
                    raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "os.open's fd unlocked with LOCK_UN but never closed",
        "no_file_left_open_after_a_run",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode().strip() or "unknown"
                raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    """,
    ),
    (
        "ex02",
        "a refused attempt leaves its os.open fd open",
        "no_file_left_open_after_a_run",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode().strip() or "unknown"
                raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        "flock on open(path).fileno() with the file object dropped (closed at once)",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fd = open(path, "a+").fileno()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise AlreadyRunning(f"{path} is locked by another instance") from None
            yield
    """,
    ),
    (
        "ex02",
        "LOCK_SH instead of LOCK_EX (every copy gets a shared lock)",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    message = f"{path} is locked by another instance (pid {holder})"
                    raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose pid is not alive here deleted as stale and taken",
        "a_held_lock_is_never_stale",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    try:
                        os.kill(int(holder), 0)
                    except (ValueError, ProcessLookupError):
                        # the holder is gone: its lock is stale, start afresh
                        fh.close()
                        os.unlink(path)
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    else:
                        message = f"{path} is locked by another instance (pid {holder})"
                        raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a lock directory made with os.mkdir (stays after kill -9)",
        "survives_holder_kill_9",
        """
        @contextmanager
        def single_instance(path):
            try:
                os.mkdir(path + ".d")
            except FileExistsError:
                raise AlreadyRunning(f"{path} is locked by another instance") from None
            with open(path, "a+") as fh:
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
            try:
                yield
            finally:
                os.rmdir(path + ".d")
    """,
    ),
    (
        "ex02",
        "a busy lock whose file is over a day old deleted as stale and taken",
        "a_held_lock_is_never_stale",
        """
        import time as _time

        STALE_S = 24 * 3600  # a nightly job never runs a day


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if _time.time() - os.path.getmtime(path) > STALE_S:
                        fh.close()
                        os.unlink(path)
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    else:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        message = f"{path} is locked by another instance (pid {holder})"
                        raise AlreadyRunning(message) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "one open file per path reused from a module-level dict (every attempt shares it)",
        "second_holder_is_refused",
        """
        _OPEN = {}


        @contextmanager
        def single_instance(path):
            fh = _OPEN.get(path)
            if fh is None or fh.closed:
                fh = _OPEN[path] = open(path, "a+")  # one open file per lock, reused
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                message = f"{path} is locked by another instance (pid {holder})"
                raise AlreadyRunning(message) from None
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    """,
    ),
    (
        "ex02",
        "the lock file emptied after the lock is released (a newcomer's pid wiped)",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            held = False
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                held = True
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                if held:
                    open(path, "w").close()
    """,
    ),
    (
        "ex02",
        "refused when the pid in the file is alive (os.kill(pid, 0)), before trying flock",
        "survives_holder_kill_9",
        """
        @contextmanager
        def single_instance(path):
            try:
                with open(path) as f:
                    old = int(f.read().strip() or 0)
            except (OSError, ValueError):
                old = 0
            if old and old != os.getpid():
                try:
                    os.kill(old, 0)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    raise AlreadyRunning(f"{path} is locked by pid {old}") from None
                else:
                    raise AlreadyRunning(f"{path} is locked by pid {old}")
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the parent's pid (os.getppid()) written to the lock file",
        "file_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getppid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock taken on path + '.lck', the pid written to path",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(f"{path}.lck", "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    try:
                        with open(path) as f:
                            holder = f.read().strip() or "unknown"
                    except OSError:
                        holder = "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid written when the with block ends, not when the lock is taken",
        "file_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                yield
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a KeyboardInterrupt inside the with block swallowed (Ctrl-C ends the block quietly)",
        "error_inside_the_block_comes_out",
        """
        import signal
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except KeyboardInterrupt:
                    return
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid read once at import (a forked worker writes its parent's pid)",
        "file_names_the_holder",
        """
        MY_PID = os.getpid()
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(MY_PID))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose file names this process's own pid entered again (re-entrant)",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    if holder == str(os.getpid()):
                        yield  # our own process already holds it: re-entrant
                        return
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid read with fh.read(5) (a 7-digit pid cut to 5)",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read(5).strip() or "unknown"  # pid_max is 32768: 5 digits
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a class whose __exit__ keeps the file: the lock goes only when the object is collected",
        "released_after_exit",
        """
        class single_instance:
            def __init__(self, path):
                self.path = path
                self.fh = None

            def __enter__(self):
                self.fh = open(self.path, "a+")
                try:
                    fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self.fh.seek(0)
                    holder = self.fh.read().strip() or "unknown"
                    self.fh.close()
                    raise AlreadyRunning(f"{self.path} is locked (pid {holder})") from None
                self.fh.seek(0)
                self.fh.truncate()
                self.fh.write(str(os.getpid()))
                self.fh.flush()
                return self

            def __exit__(self, *exc):
                return False  # the file (and its lock) goes when this object is collected

            def __del__(self):
                if self.fh is not None:
                    self.fh.close()
    """,
    ),
    (
        "ex02",
        "the lock released with flock(LOCK_UN) (a worker forked in the block unlocks the parent)",
        "a_forked_worker_leaving_keeps_the_lock",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)  # release explicitly, then close
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid kept from the first refusal in a module-level dict",
        "refusal_names_the_current_holder",
        """
        _HOLDERS = {}
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _HOLDERS.get(path)
                    if holder is None:  # read the file once per path
                        fh.seek(0)
                        holder = _HOLDERS[path] = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the file opened 'r+', or 'w+' when missing (a run that also found none empties the pid)",
        "a_late_starter_leaves_the_holders_pid",
        """
        @contextmanager
        def single_instance(path):
            try:
                fh = open(path, "r+")  # keep the holder's pid
            except FileNotFoundError:
                fh = open(path, "w+")  # first run: create it
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file emptied by name (os.truncate) once the with block's file is closed",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
            os.truncate(path, 0)
    """,
    ),
    (
        "ex02",
        "a SystemExit inside the with block swallowed (sys.exit(3) in the job ends it quietly)",
        "error_inside_the_block_comes_out",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except SystemExit:
                    pass
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit with atexit (a newcomer locks the deleted file)",
        "release_keeps_the_lock_file",
        """
        import atexit

        def _remove(p):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                atexit.register(_remove, path)
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by `from atexit import register` (a newcomer locks it)",
        "release_keeps_the_lock_file",
        """
        from atexit import register

        def _remove(p):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                register(_remove, path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted by a SIGTERM handler (a newcomer locks the deleted file)",
        "release_keeps_the_lock_file",
        """
        import signal, sys
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                def on_term(signum, frame):
                    os.unlink(path)
                    sys.exit(143)
                signal.signal(signal.SIGTERM, on_term)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog threading.Timer lets go of the lock (LOCK_UN) after 3 s",
        "the_lock_lasts_the_whole_block",
        """
        import threading

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                # a hung job must not block every later run: let go after 3 s
                watchdog = threading.Timer(3.0, fcntl.flock, (fh.fileno(), fcntl.LOCK_UN))
                watchdog.daemon = True
                watchdog.start()
                try:
                    yield
                finally:
                    watchdog.cancel()
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog signal.alarm lets go of the lock (LOCK_UN) after 3 s",
        "the_lock_lasts_the_whole_block",
        """
        import signal
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.signal(signal.SIGALRM, lambda *a: fcntl.flock(fh.fileno(), fcntl.LOCK_UN))
                signal.alarm(3)
                try:
                    yield
                finally:
                    signal.alarm(0)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog thread closes the lock file after 10 s (from time import sleep, monotonic)",
        "the_lock_lasts_the_whole_block",
        """
        import threading
        from time import sleep, monotonic
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                done = threading.Event()
                def watchdog():
                    deadline = monotonic() + 10
                    while monotonic() < deadline and not done.is_set():
                        sleep(0.5)
                    if not done.is_set():
                        fh.close()
                threading.Thread(target=watchdog, daemon=True).start()
                try:
                    yield
                finally:
                    done.set()
            finally:
                if not fh.closed:
                    fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog threading.Timer deletes the lock file after an hour",
        "the_lock_lasts_the_whole_block",
        """
        import threading
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                t = threading.Timer(3600, os.unlink, (path,))
                t.daemon = True
                t.start()
                try:
                    yield
                finally:
                    t.cancel()
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused attempt tries flock again when the holder's pid is not alive here",
        "second_holder_is_refused",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    try:
                        os.kill(int(holder), 0)
                    except (ValueError, ProcessLookupError):
                        # the pid is gone: the lock must be about to be released, try once more
                        try:
                            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        except BlockingIOError:
                            raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                    else:
                        raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by an atexit handler registered when the cell ran",
        "release_keeps_the_lock_file",
        """
        import atexit
        _HELD_PATHS = []
        def _remove_lock_files():
            for held in _HELD_PATHS:
                try:
                    os.unlink(held)
                except OSError:
                    pass
        atexit.register(_remove_lock_files)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _HELD_PATHS.append(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by a lambda given to atexit when the cell ran",
        "release_keeps_the_lock_file",
        """
        import atexit
        _LOCK_FILES = set()
        atexit.register(lambda: [os.path.exists(p) and os.remove(p) for p in list(_LOCK_FILES)])

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _LOCK_FILES.add(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted by a SIGTERM handler installed when the cell ran",
        "release_keeps_the_lock_file",
        """
        import signal, sys
        _HELD_PATHS = []
        def _on_sigterm(signum, frame):
            for held in _HELD_PATHS:
                try:
                    os.unlink(held)
                except OSError:
                    pass
            sys.exit(143)
        signal.signal(signal.SIGTERM, _on_sigterm)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _HELD_PATHS.append(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog thread looks at the clock every 5 s and deletes the lock file after an hour",
        "the_lock_lasts_the_whole_block",
        """
        import threading, time

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                stop = threading.Event()
                def watchdog():
                    start = time.monotonic()
                    while not stop.wait(5):
                        if time.monotonic() - start > 3600:
                            try:
                                os.unlink(path)
                            except OSError:
                                pass
                            return
                threading.Thread(target=watchdog, daemon=True).start()
                try:
                    yield
                finally:
                    stop.set()
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog thread looks at the clock every second and lets go (LOCK_UN) after 2 hours",
        "the_lock_lasts_the_whole_block",
        """
        import threading, time

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                running = {"done": False}
                def watchdog():
                    began = time.time()
                    while not running["done"]:
                        time.sleep(1)
                        if time.time() - began > 7200:
                            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
                            return
                threading.Thread(target=watchdog, daemon=True).start()
                try:
                    yield
                finally:
                    running["done"] = True
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock taken on a file of the same name in the shared temporary folder",
        "the_lock_is_the_file_at_the_path_given",
        """
        import tempfile

        @contextmanager
        def single_instance(path):
            shared = os.path.join(tempfile.gettempdir(), os.path.basename(path))
            fh = open(shared, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                with open(path, "w") as record:
                    record.write(str(os.getpid()))
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock taken on a file in /tmp named from hash(path) (another per interpreter)",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            shared = f"/tmp/labkit-lock-{hash(path) & 0xffffffff:x}"
            fh = open(shared, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    with open(path) as record:
                        holder = record.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                with open(path, "w") as record:
                    record.write(str(os.getpid()))
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused attempt tries flock once more when the file is empty (no pid written yet)",
        "second_holder_is_refused",
        """
        import time

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                for tries in range(2):
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip()
                        if holder or tries:
                            raise AlreadyRunning(
                                f"{path} is locked by another instance (pid {holder or 'unknown'})"
                            ) from None
                        time.sleep(0.05)  # the holder may not have written its pid yet
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by a handler given its list of paths when the cell ran",
        "release_keeps_the_lock_file",
        """
        import atexit

        _HELD = []

        def _remove(paths):
            for held in paths:
                try:
                    os.unlink(held)
                except OSError:
                    pass

        atexit.register(_remove, _HELD)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _HELD.append(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted when the job raises (except Exception: unlink, raise)",
        "release_keeps_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except Exception:
                    os.unlink(path)  # a failed run leaves no lock behind
                    raise
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted on Ctrl-C (except KeyboardInterrupt: unlink, raise)",
        "release_keeps_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except KeyboardInterrupt:
                    os.unlink(path)
                    raise
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted by a SIGINT handler (Ctrl-C)",
        "release_keeps_the_lock_file",
        """
        import signal, sys

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                def on_interrupt(signum, frame):
                    os.unlink(path)
                    sys.exit(130)
                signal.signal(signal.SIGINT, on_interrupt)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted by a SIGHUP handler (its terminal closed)",
        "release_keeps_the_lock_file",
        """
        import signal, sys

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                def on_hangup(signum, frame):
                    os.unlink(path)
                    sys.exit(129)
                signal.signal(signal.SIGHUP, on_hangup)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted by a callable SIGTERM handler object set when the cell ran",
        "release_keeps_the_lock_file",
        """
        import signal, sys

        class _Cleanup:
            def __init__(self):
                self.paths = []

            def __call__(self, signum, frame):
                for held in self.paths:
                    try:
                        os.unlink(held)
                    except OSError:
                        pass
                sys.exit(143)

        _CLEANUP = _Cleanup()
        signal.signal(signal.SIGTERM, _CLEANUP)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _CLEANUP.paths.append(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by a callable object given to atexit when the cell ran",
        "release_keeps_the_lock_file",
        """
        import atexit

        class _Cleanup:
            def __init__(self):
                self.paths = []

            def __call__(self):
                for held in self.paths:
                    try:
                        os.unlink(held)
                    except OSError:
                        pass

        _CLEANUP = _Cleanup()
        atexit.register(_CLEANUP)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _CLEANUP.paths.append(path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by a module-level ExitStack whose close atexit runs",
        "release_keeps_the_lock_file",
        """
        import atexit, contextlib

        _CLEANUP = contextlib.ExitStack()
        atexit.register(_CLEANUP.close)

        def _remove(held):
            with contextlib.suppress(OSError):
                os.unlink(held)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _CLEANUP.callback(_remove, path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the path lowercased before opening (Report/job.lock taken as report/job.lock)",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path.lower(), "a+")  # one spelling for every lock name
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a heartbeat thread writes each lock's pid every minute, the path never dropped at release",
        "pidfile_names_only_the_current_holder",
        """
        import threading, time

        _HELD = {}  # path -> pid, kept fresh by one heartbeat thread per process
        _BEAT = [None]

        def _heartbeat():
            while True:
                time.sleep(60.0)
                for held, pid in list(_HELD.items()):
                    try:
                        with open(held, "w") as out:
                            out.write(str(pid))
                    except OSError:
                        _HELD.pop(held, None)  # its folder is gone

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                _HELD[path] = os.getpid()
                if _BEAT[0] is None or not _BEAT[0].is_alive():
                    _BEAT[0] = threading.Thread(target=_heartbeat, daemon=True)
                    _BEAT[0].start()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock file deleted at exit by weakref.finalize(single_instance, _remove, path)",
        "release_keeps_the_lock_file",
        """
        import contextlib, weakref

        def _remove(held):
            with contextlib.suppress(OSError):
                os.unlink(held)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                # cleaned up when the process exits (finalize runs at exit, like atexit)
                weakref.finalize(single_instance, _remove, path)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid read before flock (the message names whoever was in the file then)",
        "the_pid_is_read_after_the_refusal",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"  # who holds it, for the message
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the holder's pid read with Path.read_text() before the lock file is opened",
        "the_pid_is_read_after_the_refusal",
        """
        from pathlib import Path

        @contextmanager
        def single_instance(path):
            try:
                holder = Path(path).read_text().strip() or "unknown"
            except FileNotFoundError:
                holder = "unknown"
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(f"already running (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
    """,
    ),
    (
        "ex02",
        "the holder's pid read with os.read right after os.open, before flock",
        "the_pid_is_read_after_the_refusal",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                holder = os.read(fd, 32).decode().strip() or "unknown"
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(f"already running (pid {holder})") from None
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, str(os.getpid()).encode())
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        "the old pid read before flock, read again after a refusal only when it was empty",
        "the_pid_is_read_after_the_refusal",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fh.seek(0)
                previous = fh.read().strip()  # the last run's pid, to log a takeover
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if not previous:  # nothing yet: the holder may have written it now
                        fh.seek(0)
                        previous = fh.read().strip()
                    raise AlreadyRunning(f"already running (pid {previous or 'unknown'})") from None
                if previous:
                    print(f"taking over from pid {previous}")
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the pid read before flock, with flock imported by name (from fcntl import flock)",
        "the_pid_is_read_after_the_refusal",
        """
        from fcntl import flock, LOCK_EX, LOCK_NB

        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                fh.seek(0)
                current = fh.read().strip()
                try:
                    flock(fh, LOCK_EX | LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(f"already running (pid {current or 'unknown'})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
    """,
    ),
    (
        "ex02",
        "every OSError of flock taken as AlreadyRunning (ENOLCK on an NFS lock folder)",
        "a_broken_lock_path_is_not_already_running",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # EWOULDBLOCK, EAGAIN: someone holds it
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "`except IOError` around flock (Python 2's name, every OSError today)",
        "a_broken_lock_path_is_not_already_running",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except IOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "`except Exception` around flock, to be safe",
        "a_broken_lock_path_is_not_already_running",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except Exception:  # whatever went wrong, do not run twice
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The worker's `except AlreadyRunning` (labkit's) does not catch it.
        "AlreadyRunning written again in the notebook, a RuntimeError of its own",
        "refusal_is_labkits_exception",
        """
        class AlreadyRunning(RuntimeError):  # another copy holds the lock
            pass

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The holder lives on after SIGTERM, in its block, while the next run takes the lock.
        "a SIGTERM handler that lets go of the lock (LOCK_UN) and returns",
        "release_keeps_the_lock_file",
        """
        import signal
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                def _release(signum, frame):
                    # let the next run start as soon as we are asked to stop
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
                previous = signal.signal(signal.SIGTERM, _release)
                try:
                    yield
                finally:
                    signal.signal(signal.SIGTERM, previous)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog thread lets go of the lock after 2 h, timed with time.monotonic_ns()",
        "the_lock_lasts_the_whole_block",
        """
        import threading
        import time

        #: A hung job must not block every later run for ever: let go after two hours.
        MAX_HOLD_NS = 2 * 3600 * 10**9

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            stop = threading.Event()
            watchdog = None
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                started = time.monotonic_ns()

                def watch():
                    while not stop.wait(1):
                        if time.monotonic_ns() - started > MAX_HOLD_NS:
                            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)  # the job hangs: free the slot
                            return

                watchdog = threading.Thread(target=watch, daemon=True)
                watchdog.start()
                yield
            finally:
                stop.set()
                if watchdog is not None:
                    watchdog.join()
                fh.close()
    """,
    ),
    (
        "ex02",
        "a watchdog thread lets go of the lock after 2 h, timed with datetime.now()",
        "the_lock_lasts_the_whole_block",
        """
        import threading
        from datetime import datetime, timedelta

        #: A hung job must not block every later run for ever: let go after two hours.
        MAX_HOLD = timedelta(hours=2)

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            stop = threading.Event()
            watchdog = None
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                started = datetime.now()

                def watch():
                    while not stop.wait(5):
                        if datetime.now() - started > MAX_HOLD:
                            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)  # the job hangs: free the slot
                            return

                watchdog = threading.Thread(target=watch, daemon=True)
                watchdog.start()
                yield
            finally:
                stop.set()
                if watchdog is not None:
                    watchdog.join()
                fh.close()
    """,
    ),
    (
        "ex02",
        "a module-level threading.RLock makes the process's threads take turns at the lock",
        "a_thread_of_the_holders_process_is_refused",
        """
        import threading

        #: flock belongs to the open file, and threads share a process: make this process's
        #: threads take turns at the lock first (re-entrant, so a nested attempt is still refused).
        _THREADS = threading.RLock()

        @contextmanager
        def single_instance(path):
            with _THREADS:
                fh = open(path, "a+")
                try:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                    yield
                finally:
                    fh.close()
    """,
    ),
    (
        "ex02",
        "a new (empty) lock file given our pid before the flock, so it never names nobody",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fh.seek(0)
                if not fh.read().strip():
                    # A new (empty) lock file: say who we are at once, so it never names nobody.
                    fh.write(str(os.getpid()))
                    fh.flush()
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A "safe" file name: the holder locks the path as given, spaces and all, and
        # this code locks a file next to it that nobody holds.
        "the path's spaces replaced with '_' before opening (a 'safe' file name)",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            path = path.replace(" ", "_")
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the path made ASCII before opening (its accents turned to '?')",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path.encode("ascii", "replace").decode("ascii"), "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The holder runs in another container: its pid is not alive here, and the
        # refused attempt wipes the one thing that names it.
        "a refused attempt empties the file when the holder's pid is not alive here",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    if holder.isdigit():
                        try:
                            os.kill(int(holder), 0)
                        except ProcessLookupError:
                            fh.truncate(0)  # a stale pid: clean it up
                        except PermissionError:
                            pass
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused attempt empties the file when it holds no bare pid (a 'corrupt' file)",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    if not holder.isdigit():
                        fh.truncate(0)  # not a pid: a corrupt file, clean it up
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # Guarded against the empty file only: text that is no bare pid still meets int().
        "the holder's pid read with int() when the file is not empty (a ValueError on 'pid=...')",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    text = fh.read().strip()
                    holder = int(text) if text else "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # "Unlock at once on an error": a worker forked in the block fails, and its
        # LOCK_UN lets go of the lock the parent (same open file) still holds.
        "the lock let go with flock(LOCK_UN) when the block raises (a failing forked worker)",
        "a_forked_worker_leaving_keeps_the_lock",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
            try:
                yield
            except Exception:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)  # an error: unlock at once
                fh.close()
                raise
            else:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the lock let go with flock(LOCK_UN) on Ctrl-C (a forked worker's interrupt)",
        "a_forked_worker_leaving_keeps_the_lock",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except KeyboardInterrupt:
                    fcntl.flock(fh, fcntl.LOCK_UN)  # Ctrl-C: let the next run in at once
                    raise
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # An empty file read as "a run is still starting": once a run killed between
        # emptying the file and writing its pid (or a deploy's touch) leaves it empty and
        # free, every later run is refused and the job never runs again.
        "an existing empty lock file refused as a run still starting, without trying flock",
        "a_free_lock_is_taken_whatever_its_file_says",
        """
        @contextmanager
        def single_instance(path):
            if os.path.exists(path) and os.path.getsize(path) == 0:
                raise AlreadyRunning(f"{path}: another run is starting (pid unknown)")
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A short wait answers in time while the holder stays, but a holder that leaves
        # meanwhile hands the lock to the waiting thread: the job runs again right after.
        "a per-path threading.Lock acquired with a 50 ms timeout before the flock",
        "a_thread_of_the_holders_process_is_refused",
        """
        import threading
        _GUARDS = {}
        _MAKING = threading.Lock()

        @contextmanager
        def single_instance(path):
            with _MAKING:
                guard = _GUARDS.setdefault(os.path.realpath(path), threading.Lock())
            if not guard.acquire(timeout=0.05):
                raise AlreadyRunning(f"{path} is held by another thread of pid {os.getpid()}")
            try:
                with open(path, "a+") as fh:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                    yield
            finally:
                guard.release()
    """,
    ),
    (
        "ex02",
        # "Make sure it is a lock file": a pidfile's path (report.pid) becomes report.lock,
        # a file the holder of the path given does not hold.
        "'.lock' appended to a path that does not end with it",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            if not str(path).endswith(".lock"):
                path = f"{path}.lock"
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A daemon's habit: SIGHUP "reopens" its files. Closing the lock file lets go of the
        # lock; for the half second before it is taken again, another run gets in.
        "a SIGHUP handler that reopens the lock file (closes it, then flocks it again)",
        "release_keeps_the_lock_file",
        """
        import signal
        import time

        @contextmanager
        def single_instance(path):
            box = [open(path, "a+")]
            try:
                try:
                    fcntl.flock(box[0].fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    box[0].seek(0)
                    holder = box[0].read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                box[0].seek(0)
                box[0].truncate()
                box[0].write(str(os.getpid()))
                box[0].flush()

                def reopen(*_):
                    box[0].close()
                    time.sleep(0.5)
                    box[0] = open(path, "a+")
                    fcntl.flock(box[0].fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

                before = signal.signal(signal.SIGHUP, reopen)
                try:
                    yield
                finally:
                    signal.signal(signal.SIGHUP, before)
            finally:
                box[0].close()
    """,
    ),
    (
        "ex02",
        # Both runs find no file on a fresh folder: the later one's temporary file,
        # renamed to the path, replaces the file the first run has already locked.
        "the lock file created when missing as a temporary file renamed to the path",
        "two_instances_started_together",
        """
        import tempfile

        @contextmanager
        def single_instance(path):
            if not os.path.exists(path):
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
                os.close(fd)
                os.replace(tmp, path)
            fh = open(path, "r+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The path pasted into the text before it is formatted: a '%' in a folder's name
        # is read as a placeholder, and the refusal becomes a ValueError.
        "the refusal's message formatted with % after the path was pasted into it",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    message = "lock " + str(path) + " held by pid %s"
                    raise AlreadyRunning(message % holder) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "the refusal's message formatted with .format after the path was pasted into it",
        "message_names_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    message = "lock " + str(path) + " held by pid {}"
                    raise AlreadyRunning(message.format(holder)) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A mode written as a decimal number: 644 is 0o1204, and the owner may not read
        # the file it created. Root opens it anyway; the job's own user, at the next run, not.
        "os.open's mode written in decimal (644 is 0o1204: the owner may not read the file)",
        "the_next_run_can_open_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        "the lock file made read-only once taken (os.fchmod 0o444, 'so nobody edits it')",
        "the_next_run_can_open_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                os.fchmod(fh.fileno(), 0o444)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a refused process takes over after 3 refusals in a row (the holder 'must be stuck')",
        "a_held_lock_is_never_stale",
        """
        _REFUSED = {}

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    _REFUSED[path] = _REFUSED.get(path, 0) + 1
                    if _REFUSED[path] >= 3:
                        _REFUSED[path] = 0
                        os.unlink(path)
                        fh.close()
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        fh.write(str(os.getpid()))
                        fh.flush()
                        yield
                        return
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose file holds no bare pid deleted as corrupt and taken",
        "a_held_lock_is_never_stale",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    text = fh.read().strip()
                    if text and not text.isdigit():
                        os.unlink(path)
                        fh.close()
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        fh.write(str(os.getpid()))
                        fh.flush()
                        yield
                        return
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose file is dated in the future deleted as bogus (clock skew)",
        "a_held_lock_is_never_stale",
        """
        import time

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if os.path.getmtime(path) > time.time() + 60:
                        os.unlink(path)
                        fh.close()
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        fh.write(str(os.getpid()))
                        fh.flush()
                        yield
                        return
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a busy lock whose file is over 60 days old deleted as stale",
        "a_held_lock_is_never_stale",
        """
        import time

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.time() - os.path.getmtime(path) > 60 * 86400:
                        os.unlink(path)
                        fh.close()
                        fh = open(path, "a+")
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                        fh.write(str(os.getpid()))
                        fh.flush()
                        yield
                        return
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "flock's other errors (ENOLCK on NFS) warned about, the job run without the lock",
        "no_run_without_the_lock",
        """
        import errno

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                except OSError as exc:
                    if exc.errno not in (errno.ENOLCK, errno.EINVAL):
                        raise
                    print(f"warning: no locks on {path} ({exc}), running anyway")
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a lock file that cannot be opened warned about, the job run without the lock",
        "no_run_without_the_lock",
        """
        @contextmanager
        def single_instance(path):
            try:
                fh = open(path, "a+")
            except PermissionError:
                print(f"warning: cannot open {path}, running without a lock")
                yield
                return
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        "a lock file io.FileIO cannot open warned about, the job run without the lock",
        "no_run_without_the_lock",
        """
        import io


        @contextmanager
        def single_instance(path):
            try:
                raw = io.FileIO(path, "a+")
            except PermissionError:
                print(f"warning: cannot open {path}, running without a lock")
                yield
                return
            try:
                try:
                    fcntl.flock(raw.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raw.seek(0)
                    holder = raw.read().decode().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                raw.truncate(0)
                raw.write(str(os.getpid()).encode())
                yield
            finally:
                raw.close()
    """,
    ),
    (
        "ex02",
        "the holder named as pid 0 when the file holds no pid (int() of an empty file made 0)",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    text = fh.read().strip()
                    holder = int(text) if text.isdigit() else 0
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A holder that has just taken the lock has not written its pid yet: the last pid a
        # refusal read for this path names the holder before it, long gone.
        "the holder named from the last refusal for this path when the file is empty",
        "refusal_when_the_file_names_nobody",
        """
        _SEEN = {}


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or _SEEN.get(path, "unknown")
                    _SEEN[path] = holder
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The same, with one module-level fallback for every lock file.
        "the holder named from the last pid any refusal read when the file is empty",
        "refusal_when_the_file_names_nobody",
        """
        _LAST_HOLDER = ["unknown"]


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip()
                    if holder:
                        _LAST_HOLDER[0] = holder
                    else:
                        holder = _LAST_HOLDER[0]
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The holder's text pasted into the message, then formatted with %: a '%' in what
        # another version of the job wrote turns the refusal into a TypeError.
        "the holder's text pasted into the message before formatting it with % and the path",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(("locked by pid " + holder + " (%s)") % path) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The process moved to the lock's folder to open the file by its name, for good: the
        # job in the block, and all the process runs after, read relative paths from there.
        "os.chdir to the lock's folder to open the file by name, never changed back",
        "the_process_is_left_as_it_was",
        """
        @contextmanager
        def single_instance(path):
            folder, name = os.path.split(path)
            if folder:
                os.chdir(folder)
            fh = open(name, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A private umask for the lock file, kept for the whole with block: every file the
        # job writes there (its report) is unreadable to anyone but its owner.
        "os.umask(0o077) for the with block (the job's files made private), put back after",
        "the_process_is_left_as_it_was",
        """
        @contextmanager
        def single_instance(path):
            old_mask = os.umask(0o077)
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                os.umask(old_mask)
    """,
    ),
    (
        "ex02",
        # Read as ASCII, the file of a holder whose text has an accent raises
        # UnicodeDecodeError, not the AlreadyRunning the caller catches.
        "the lock file opened with encoding='ascii' (a holder's accented text raises)",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+", encoding="ascii")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The same with os.open: the bytes decoded as ASCII.
        "the holder's text decoded as ASCII (os.pread(fd, 64, 0).decode('ascii'))",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode("ascii").strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        # A SIGTERM handler so that the finally runs when the job is stopped, never put
        # back: the program's own graceful stop is gone for good once the block ended.
        "a SIGTERM handler set for the block (raise SystemExit) and never put back",
        "the_process_is_left_as_it_was",
        """
        import signal


        def _stopped(signum, frame):
            raise SystemExit(128 + signum)


        @contextmanager
        def single_instance(path):
            signal.signal(signal.SIGTERM, _stopped)
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # Put back after the yield, not in a finally: a job that raises leaves it set.
        "the SIGTERM handler put back after the yield, not in a finally",
        "the_process_is_left_as_it_was",
        """
        import signal
        import sys


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                old = signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
                yield
                signal.signal(signal.SIGTERM, old)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # 'Put back' as the default, not as what was found: the program's own handler
        # (its graceful stop) is dropped.
        "the SIGTERM handler 'put back' as SIG_DFL in the finally, not the one found",
        "the_process_is_left_as_it_was",
        """
        import signal
        import sys


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
                try:
                    yield
                finally:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # Ctrl-C ignored so that the job is not cut in half, and never let through again:
        # the program can no longer be stopped from its terminal.
        "Ctrl-C ignored for the block (SIGINT set to SIG_IGN) and never let through again",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A refusal of the job's own lock on another file swallowed by the outer lock: the
        # job ends quietly, and the scheduler counts a job that did not run as done.
        "an AlreadyRunning raised inside the with block swallowed (a nested lock's)",
        "error_inside_the_block_comes_out",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                except AlreadyRunning as exc:
                    print(f"skipped: {exc}")
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A relative path made absolute once and kept: a caller that moved to another
        # folder since locks the file of the folder it was in the first time.
        "a relative path's absolute path cached per path (a later caller's folder ignored)",
        "the_lock_is_the_file_at_the_path_given",
        """
        _ABSOLUTE = {}


        @contextmanager
        def single_instance(path):
            fh = open(_ABSOLUTE.setdefault(path, os.path.abspath(path)), "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The lock file made readable by all with the usual umask, set for good: the
        # program's own (stricter) umask is gone for every file it creates after.
        "os.umask(0o022) set before opening the lock file, never put back",
        "the_process_is_left_as_it_was",
        """
        @contextmanager
        def single_instance(path):
            os.umask(0o022)
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # SIGUSR1 (a 'reload' some tools send) ignored so it cannot kill the job, never let
        # through again: the program's own handler for it is gone for good.
        "SIGUSR1 set to SIG_IGN for the block and never put back",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.signal(signal.SIGUSR1, signal.SIG_IGN)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # An hour of refusals by a scheduler trying every minute: the holder "must be
        # stuck". It only runs long; the takeover runs the job beside it.
        "a refused process takes over after 60 refusals in a row (an hour of a minutely cron)",
        "a_held_lock_is_never_stale",
        """
        _REFUSED = {}

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    _REFUSED[path] = _REFUSED.get(path, 0) + 1
                    if _REFUSED[path] < 60:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    del _REFUSED[path]
                    fh.close()
                    os.unlink(path)
                    fh = open(path, "a+")
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                _REFUSED.pop(path, None)
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # Refused for two hours since the first refusal, by this process's own clock:
        # the holder "must be hung". A job that runs three hours is not.
        "a refused process takes over once refused for 2 hours (time.monotonic() since its first)",
        "a_held_lock_is_never_stale",
        """
        import time

        _FIRST_REFUSAL = {}

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    first = _FIRST_REFUSAL.setdefault(path, time.monotonic())
                    if time.monotonic() - first < 2 * 3600:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    fh.close()
                    os.unlink(path)
                    fh = open(path, "a+")
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                _FIRST_REFUSAL.pop(path, None)
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # One guard for the whole module, taken without waiting (so a thread of the
        # holder's process is refused at once): another job's thread, on another file,
        # is refused too, and that job does not run while the first one does.
        "one module-level RLock, taken without waiting, guards every path (another job refused)",
        "another_jobs_lock_is_free_to_another_thread",
        """
        import threading

        _GUARD = threading.RLock()

        @contextmanager
        def single_instance(path):
            if not _GUARD.acquire(blocking=False):
                raise AlreadyRunning(f"{path} is locked by another thread (pid {os.getpid()})")
            try:
                with open(path, "a+") as fh:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                    yield
            finally:
                _GUARD.release()
    """,
    ),
    (
        "ex02",
        # The file is closed by a finally around the yield alone: when writing the pid
        # fails (a full disk), the open file stays with the error, and a scheduler that
        # keeps the error keeps the lock, refusing every later run.
        "the try/finally begins at the yield (a failed pid write leaves the lock held)",
        "a_failed_start_lets_go_of_the_lock",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
            try:
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # os.open's descriptor is closed on a refusal and at the block's end, not when
        # writing the pid raises: nothing closes it then, and the lock stays held as long
        # as the process lives.
        "os.open's fd left open when writing the pid raises (closed on refusal and at the end)",
        "a_failed_start_lets_go_of_the_lock",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "ex02",
        # Closed in the refusal, and once more in the finally "in case": the error of the
        # second close is ignored, and what it closed was another thread's new file.
        "os.open's fd closed on refusal and again in the finally (its EBADF ignored)",
        "a_closed_descriptor_is_closed_once",
        """
        from contextlib import suppress

        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                yield
            finally:
                with suppress(OSError):
                    os.close(fd)
    """,
    ),
    (
        "ex02",
        # The file object's descriptor closed by hand, then the object closed too (its
        # error ignored): the object closes the number a second time.
        "os.close(fh.fileno()) to release, then fh.close() with its OSError ignored",
        "a_closed_descriptor_is_closed_once",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                os.close(fh.fileno())
                try:
                    fh.close()
                except OSError:
                    pass
    """,
    ),
    (
        "ex02",
        # The first file closed before the second is flocked: between the two flocks the
        # lock is free, another process takes it, and the 'w' erases what it writes.
        "the lock let go to reopen the file with 'w' and flock it again (others get in between)",
        "refused_attempt_keeps_the_holder",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                fh.close()
                raise AlreadyRunning(f"{path} is held by pid {holder}") from None
            fh.close()
            fh = open(path, "w")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AlreadyRunning(f"{path} is held by another instance") from None
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # SIGTERM and Ctrl-C held back while the job holds the lock, let through again only
        # after the yield: a job that raises leaves them blocked, the process deaf to both.
        "SIGTERM and SIGINT blocked for the block (pthread_sigmask), unblocked after the yield",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
                yield
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The mask never undone: after the first run SIGTERM no longer stops the process.
        "SIGTERM blocked once the lock is taken (pthread_sigmask) and never unblocked",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # A watchdog alarm for a hung job, cancelled after the yield only: a job that raises
        # leaves it set, and SIGALRM ends the process an hour later, whatever it runs then.
        "a watchdog signal.alarm(3600) for the block, cancelled after the yield, not in a finally",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.alarm(3600)
                yield
                signal.alarm(0)
            finally:
                fh.close()
    """,
    ),
    (
        "ex02",
        # The same with an interval timer: setitimer's alarm outlives a failed block too.
        "a watchdog setitimer(ITIMER_REAL, 3600) for the block, cancelled after the yield only",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.setitimer(signal.ITIMER_REAL, 3600.0)
                yield
                signal.setitimer(signal.ITIMER_REAL, 0)
            finally:
                fh.close()
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "os.open's mode written in decimal (644 is 0o1204: the owner may not read the file)": (
        "readable and writable by its owner"
    ),
    "the lock file made read-only once taken (os.fchmod 0o444, 'so nobody edits it')": (
        "readable and writable by its owner"
    ),
    "the lock file created when missing as a temporary file renamed to the path": (
        "exactly one of 2 processes started together on a folder with no lock file yet"
    ),
    "the refusal's message formatted with % after the path was pasted into it": (
        "for a lock file in a folder named"
    ),
    "the refusal's message formatted with .format after the path was pasted into it": (
        "for a lock file in a folder named"
    ),
    "a relative path joined to the folder read at import (os.getcwd())": (
        "AlreadyRunning for the relative path 'report.lock'"
    ),
    "AlreadyRunning written again in the notebook, a RuntimeError of its own": (
        "labkit.errors.AlreadyRunning for a second attempt"
    ),
    "a SIGTERM handler that lets go of the lock (LOCK_UN) and returns": (
        "still running 2 s after the signal, still holding the lock"
    ),
    "pidfile with O_EXCL goes stale after kill -9": "killed with SIGKILL",
    "refusal without the holder's pid": "naming the holder's pid",
    "lock kept when the block raises": "after an error inside the block",
    "open(path, 'w') wipes the holder before locking": "still naming the holder",
    "pidfile that appends the pid instead of replacing it": "only the last holder's pid",
    "lock by checking the file exists, then creating it": "exactly one of 3 processes",
    "a refused attempt deletes the holder's lock file": "a third process refused too",
    "a refused attempt removes the 'stale' lock file it could not take": (
        "a third process refused too"
    ),
    "lockf (a per-process record lock) instead of flock": "AlreadyRunning while another holder",
    "the holder deletes the lock file when it is done": "exactly one of a newcomer",
    "an error inside the with block swallowed": "to come out of it",
    "a dead holder's pidfile taken over in steps (O_EXCL)": "killed with SIGKILL: exactly one",
    "the job's own BlockingIOError reported as AlreadyRunning": "BlockingIOError raised inside",
    "the pid written over the old text, not truncated (os.write at offset 0)": (
        "left in it by a run long gone"
    ),
    "the pid written atomically (a temporary file renamed over the locked one)": (
        "AlreadyRunning while another holder"
    ),
    "the pid appended before taking the lock (a refused attempt leaves its pid in the file)": (
        "a refused attempt writes nothing"
    ),
    "any OSError reported as AlreadyRunning (a missing folder looks like a holder)": (
        "not AlreadyRunning, for a lock file in a"
    ),
    "a refused attempt waits for the lock (LOCK_NB in a retry loop for 2 s)": (
        "AlreadyRunning at once"
    ),
    "a busy lock whose file is over an hour old deleted as stale and taken": (
        "took the lock 3 hours ago"
    ),
    "the holder's pid read with int() (a ValueError when the file is empty)": (
        "has not written its pid yet"
    ),
    "the locked file kept in a module-level global (a second lock releases the first)": (
        "also holds billing.lock"
    ),
    "a lock's age from utcnow() minus a local fromtimestamp(mtime) (stale west of UTC)": (
        "no lock for two attempts"
    ),
    "a refused attempt tries flock once more after 50 ms": "let go right after",
    "a PermissionError opening the lock file reported as AlreadyRunning": "(PermissionError)",
    "the refusal names the refused process's own pid (os.getpid()), not the holder's": (
        "when the holder is another process"
    ),
    "the holder's pid read without seek(0) ('a+' reads from the end: always 'unknown')": (
        "a message naming the holder's pid"
    ),
    "the pid written but never flushed (the file is empty while held)": "in the lock file",
    "os.open's fd unlocked with LOCK_UN but never closed": "no file left open by 50 runs",
    "a refused attempt leaves its os.open fd open": "no file left open by 50 runs",
    "flock on open(path).fileno() with the file object dropped (closed at once)": (
        "the with block to run and end"
    ),
    "LOCK_SH instead of LOCK_EX (every copy gets a shared lock)": (
        "AlreadyRunning while another holder has the lock"
    ),
    "a busy lock whose pid is not alive here deleted as stale and taken": (
        "no lock for two attempts"
    ),
    "a lock directory made with os.mkdir (stays after kill -9)": "killed with SIGKILL",
    "a busy lock whose file is over a day old deleted as stale and taken": "40 days ago",
    "one open file per path reused from a module-level dict (every attempt shares it)": (
        "AlreadyRunning while another holder has the lock"
    ),
    "the lock file emptied after the lock is released (a newcomer's pid wiped)": (
        "the moment the holder let go"
    ),
    "refused when the pid in the file is alive (os.kill(pid, 0)), before trying flock": (
        "the child process to take the lock"
    ),
    "the parent's pid (os.getppid()) written to the lock file": "in the lock file",
    "the lock taken on path + '.lck', the pid written to path": "whose flock found the lock busy",
    "the pid written when the with block ends, not when the lock is taken": "in the lock file",
    "a KeyboardInterrupt inside the with block swallowed (Ctrl-C ends the block quietly)": (
        "the KeyboardInterrupt raised inside"
    ),
    # Under labkit grade each check runs in a process forked after the cells ran, so the
    # first case already holds another pid than the one read at import.
    "the pid read once at import (a forked worker writes its parent's pid)": "own pid",
    "a busy lock whose file names this process's own pid entered again (re-entrant)": (
        "AlreadyRunning while another holder has the lock"
    ),
    "the holder's pid read with fh.read(5) (a 7-digit pid cut to 5)": (
        "pid 4194304, all of its digits"
    ),
    "a class whose __exit__ keeps the file: the lock goes only when the object is collected": (
        "the lock free after the with block"
    ),
    "the lock released with flock(LOCK_UN) (a worker forked in the block unlocks the parent)": (
        "after a worker it forked inside the with block"
    ),
    "the holder's pid kept from the first refusal in a module-level dict": (
        "the pid in the lock file now"
    ),
    "the file opened 'r+', or 'w+' when missing (a run that also found none empties the pid)": (
        "also found no lock file"
    ),
    "the lock file emptied by name (os.truncate) once the with block's file is closed": (
        "the moment the holder let go"
    ),
    "a SystemExit inside the with block swallowed (sys.exit(3) in the job ends it quietly)": (
        "the SystemExit raised inside"
    ),
    "the lock file deleted at exit with atexit (a newcomer locks the deleted file)": (
        "exactly one of a newcomer"
    ),
    "the lock file deleted at exit by `from atexit import register` (a newcomer locks it)": (
        "exactly one of a newcomer"
    ),
    "the lock file deleted by a SIGTERM handler (a newcomer locks the deleted file)": (
        "stopped with SIGTERM"
    ),
    "a watchdog threading.Timer lets go of the lock (LOCK_UN) after 3 s": (
        "hours after it took the lock"
    ),
    "a watchdog signal.alarm lets go of the lock (LOCK_UN) after 3 s": (
        "still inside its with block"
    ),
    "a watchdog thread closes the lock file after 10 s (from time import sleep, monotonic)": (
        "AlreadyRunning for a second process while the holder"
    ),
    "a watchdog threading.Timer deletes the lock file after an hour": (
        "hours after it took the lock"
    ),
    "a refused attempt tries flock again when the holder's pid is not alive here": (
        "a refused attempt does not try again"
    ),
    "the lock file deleted at exit by an atexit handler registered when the cell ran": (
        "exactly one of a newcomer"
    ),
    "the lock file deleted at exit by a lambda given to atexit when the cell ran": (
        "exactly one of a newcomer"
    ),
    "the lock file deleted by a SIGTERM handler installed when the cell ran": (
        "stopped with SIGTERM"
    ),
    "a watchdog thread looks at the clock every 5 s and deletes the lock file after an hour": (
        "hours after it took the lock"
    ),
    "a watchdog thread looks at the clock every second and lets go (LOCK_UN) after 2 hours": (
        "hours after it took the lock"
    ),
    "the lock taken on a file of the same name in the shared temporary folder": (
        "though their files share a name"
    ),
    "the lock taken on a file in /tmp named from hash(path) (another per interpreter)": (
        "flock on the file at the path given"
    ),
    "a refused attempt tries flock once more when the file is empty (no pid written yet)": (
        "a refused attempt does not try again"
    ),
    "the lock file deleted at exit by a handler given its list of paths when the cell ran": (
        "exactly one of a newcomer"
    ),
    "the lock file deleted when the job raises (except Exception: unlink, raise)": (
        "raised an error inside the with block"
    ),
    "the lock file deleted on Ctrl-C (except KeyboardInterrupt: unlink, raise)": (
        "stopped with Ctrl-C (SIGINT)"
    ),
    "the lock file deleted by a SIGINT handler (Ctrl-C)": "stopped with Ctrl-C (SIGINT)",
    "the lock file deleted by a SIGHUP handler (its terminal closed)": (
        "terminal was closed (SIGHUP)"
    ),
    "the lock file deleted by a callable SIGTERM handler object set when the cell ran": (
        "stopped with SIGTERM"
    ),
    "the lock file deleted at exit by a callable object given to atexit when the cell ran": (
        "released the lock while a newcomer"
    ),
    "the lock file deleted at exit by a module-level ExitStack whose close atexit runs": (
        "released the lock while a newcomer"
    ),
    "the path lowercased before opening (Report/job.lock taken as report/job.lock)": (
        "Billing/job.lock and Report/job.lock"
    ),
    "a heartbeat thread writes each lock's pid every minute, the path never dropped at release": (
        "nothing the holder started writes"
    ),
    "the lock file deleted at exit by weakref.finalize(single_instance, _remove, path)": (
        "released the lock while a newcomer"
    ),
    "the holder's pid read before flock (the message names whoever was in the file then)": (
        "just before your flock"
    ),
    "the holder's pid read with Path.read_text() before the lock file is opened": (
        "just before your flock"
    ),
    "the holder's pid read with os.read right after os.open, before flock": (
        "just before your flock"
    ),
    "the old pid read before flock, read again after a refusal only when it was empty": (
        "just before your flock"
    ),
    "the pid read before flock, with flock imported by name (from fcntl import flock)": (
        "just before your flock"
    ),
    "every OSError of flock taken as AlreadyRunning (ENOLCK on an NFS lock folder)": (
        "not AlreadyRunning, when flock fails with ENOLCK"
    ),
    "`except IOError` around flock (Python 2's name, every OSError today)": (
        "not AlreadyRunning, when flock fails with ENOLCK"
    ),
    "`except Exception` around flock, to be safe": (
        "not AlreadyRunning, when flock fails with ENOLCK"
    ),
    "a watchdog thread lets go of the lock after 2 h, timed with time.monotonic_ns()": (
        "hours after it took the lock"
    ),
    "a watchdog thread lets go of the lock after 2 h, timed with datetime.now()": (
        "hours after it took the lock"
    ),
    "a module-level threading.RLock makes the process's threads take turns at the lock": (
        "another thread of the holder's process"
    ),
    "a new (empty) lock file given our pid before the flock, so it never names nobody": (
        "still empty after two refused attempts"
    ),
    "the path's spaces replaced with '_' before opening (a 'safe' file name)": (
        "a path with spaces and accents"
    ),
    "the path made ASCII before opening (its accents turned to '?')": (
        "a path with spaces and accents"
    ),
    "a refused attempt empties the file when the holder's pid is not alive here": (
        "still reading '4194304' after two refused attempts"
    ),
    "a refused attempt empties the file when it holds no bare pid (a 'corrupt' file)": (
        "still reading 'pid=4194304 (nightly report)'"
    ),
    "the holder's pid read with int() when the file is not empty (a ValueError on 'pid=...')": (
        "AlreadyRunning, twice, while a holder whose file reads"
    ),
    "the lock let go with flock(LOCK_UN) when the block raises (a failing forked worker)": (
        "failed there (a RuntimeError left the block)"
    ),
    "the lock let go with flock(LOCK_UN) on Ctrl-C (a forked worker's interrupt)": (
        "stopped there by Ctrl-C"
    ),
    "an existing empty lock file refused as a run still starting, without trying flock": (
        "the lock taken on an empty lock file"
    ),
    "a per-path threading.Lock acquired with a 50 ms timeout before the flock": (
        "though the holder left while that thread was waiting"
    ),
    "'.lock' appended to a path that does not end with it": (
        "flock on the file at the path given ('case-0/report.pid')"
    ),
    "a SIGHUP handler that reopens the lock file (closes it, then flocks it again)": (
        "still running 2 s after the signal, still holding the lock"
    ),
    "a refused process takes over after 3 refusals in a row (the holder 'must be stuck')": (
        "attempts in a row by one process"
    ),
    "a refused process takes over after 60 refusals in a row (an hour of a minutely cron)": (
        "attempts a minute apart by one process"
    ),
    "a refused process takes over once refused for 2 hours (time.monotonic() since its first)": (
        "attempts a minute apart by one process"
    ),
    "one module-level RLock, taken without waiting, guards every path (another job refused)": (
        "by another thread of this process while it holds report.lock"
    ),
    "the try/finally begins at the yield (a failed pid write leaves the lock held)": (
        "the lock free for another process once a run whose pid could not be written"
    ),
    "os.open's fd left open when writing the pid raises (closed on refusal and at the end)": (
        "the lock free for another process once a run whose pid could not be written"
    ),
    "os.open's fd closed on refusal and again in the finally (its EBADF ignored)": (
        "still held by the thread that opened it right after a refused attempt"
    ),
    "os.close(fh.fileno()) to release, then fh.close() with its OSError ignored": (
        "still held by the thread that opened it right after a refused attempt"
    ),
    "a busy lock whose file holds no bare pid deleted as corrupt and taken": (
        "no bare pid (another version of the job) holds it"
    ),
    "a busy lock whose file is dated in the future deleted as bogus (clock skew)": (
        "dated a day ahead"
    ),
    "a busy lock whose file is over 60 days old deleted as stale": "dated 50 years back",
    "flock's other errors (ENOLCK on NFS) warned about, the job run without the lock": (
        "not a with block run without the lock"
    ),
    "a lock file that cannot be opened warned about, the job run without the lock": (
        "(PermissionError) for a lock file this user may not open"
    ),
    "a lock file io.FileIO cannot open warned about, the job run without the lock": (
        "(PermissionError) for a lock file this user may not open"
    ),
    "the holder named as pid 0 when the file holds no pid (int() of an empty file made 0)": (
        "no pid in the refusals"
    ),
    "the holder named from the last refusal for this path when the file is empty": (
        "AlreadyRunning naming no pid while a new holder of the lock has not written its"
    ),
    "the holder named from the last pid any refusal read when the file is empty": (
        "AlreadyRunning naming no pid while a new holder of the lock has not written its"
    ),
    "the holder's text pasted into the message before formatting it with % and the path": (
        "AlreadyRunning while a holder whose file reads"
    ),
    "os.chdir to the lock's folder to open the file by name, never changed back": (
        "the process still in its folder inside the with block"
    ),
    "os.umask(0o077) for the with block (the job's files made private), put back after": (
        "the process's umask still 0o27 inside the with block"
    ),
    "the lock file opened with encoding='ascii' (a holder's accented text raises)": (
        "a holder whose file reads 'relatório 4194304'"
    ),
    "the holder's text decoded as ASCII (os.pread(fd, 64, 0).decode('ascii'))": (
        "a holder whose file reads 'relatório 4194304'"
    ),
    "a SIGTERM handler set for the block (raise SystemExit) and never put back": (
        "the process's SIGTERM handler still"
    ),
    "the SIGTERM handler put back after the yield, not in a finally": (
        "after a with block that raised"
    ),
    "the SIGTERM handler 'put back' as SIG_DFL in the finally, not the one found": (
        "the process's SIGTERM handler still"
    ),
    "Ctrl-C ignored for the block (SIGINT set to SIG_IGN) and never let through again": (
        "the process's SIGINT handler still"
    ),
    "an AlreadyRunning raised inside the with block swallowed (a nested lock's)": (
        "the AlreadyRunning raised inside"
    ),
    "a relative path's absolute path cached per path (a later caller's folder ignored)": (
        "AlreadyRunning for the relative path 'report.lock'"
    ),
    "os.umask(0o022) set before opening the lock file, never put back": (
        "the process's umask still 0o27 inside the with block"
    ),
    "SIGUSR1 set to SIG_IGN for the block and never put back": (
        "the process's SIGUSR1 handler still"
    ),
    "the lock let go to reopen the file with 'w' and flock it again (others get in between)": (
        "the lock held from your first flock to the end of the block"
    ),
    "SIGTERM and SIGINT blocked for the block (pthread_sigmask), unblocked after the yield": (
        "the process's blocked signals still none after a with block that raised"
    ),
    "SIGTERM blocked once the lock is taken (pthread_sigmask) and never unblocked": (
        "the process's blocked signals still none after the with block"
    ),
    "a watchdog signal.alarm(3600) for the block, cancelled after the yield, not in a finally": (
        "no alarm left set after a with block that raised"
    ),
    "a watchdog setitimer(ITIMER_REAL, 3600) for the block, cancelled after the yield only": (
        "no alarm left set after a with block that raised"
    ),
}

#: Mistakes that lose or duplicate an effect (or let two intents share one): the
#: reported score (severity cap included) is at most half of the exercise.
SEVERE = [
    "os.open's mode written in decimal (644 is 0o1204: the owner may not read the file)",
    "the lock file made read-only once taken (os.fchmod 0o444, 'so nobody edits it')",
    "a per-path threading.Lock acquired with a 50 ms timeout before the flock",
    "an existing empty lock file refused as a run still starting, without trying flock",
    "the lock let go with flock(LOCK_UN) when the block raises (a failing forked worker)",
    "the lock let go with flock(LOCK_UN) on Ctrl-C (a forked worker's interrupt)",
    "the path's spaces replaced with '_' before opening (a 'safe' file name)",
    "the path made ASCII before opening (its accents turned to '?')",
    "the pid written atomically (a temporary file renamed over the locked one)",
    "a refused attempt waits for the lock (LOCK_NB in a retry loop for 2 s)",
    "a busy lock whose file is over an hour old deleted as stale and taken",
    "the locked file kept in a module-level global (a second lock releases the first)",
    "a lock's age from utcnow() minus a local fromtimestamp(mtime) (stale west of UTC)",
    "a refused attempt tries flock once more after 50 ms",
    "flock on open(path).fileno() with the file object dropped (closed at once)",
    "LOCK_SH instead of LOCK_EX (every copy gets a shared lock)",
    "a busy lock whose pid is not alive here deleted as stale and taken",
    "a lock directory made with os.mkdir (stays after kill -9)",
    "a busy lock whose file is over a day old deleted as stale and taken",
    "one open file per path reused from a module-level dict (every attempt shares it)",
    "refused when the pid in the file is alive (os.kill(pid, 0)), before trying flock",
    "the lock taken on path + '.lck', the pid written to path",
    "a busy lock whose file names this process's own pid entered again (re-entrant)",
    "a class whose __exit__ keeps the file: the lock goes only when the object is collected",
    "the lock released with flock(LOCK_UN) (a worker forked in the block unlocks the parent)",
    "the lock file deleted at exit with atexit (a newcomer locks the deleted file)",
    "the lock file deleted at exit by `from atexit import register` (a newcomer locks it)",
    "the lock file deleted by a SIGTERM handler (a newcomer locks the deleted file)",
    "a watchdog threading.Timer lets go of the lock (LOCK_UN) after 3 s",
    "a watchdog signal.alarm lets go of the lock (LOCK_UN) after 3 s",
    "a watchdog thread closes the lock file after 10 s (from time import sleep, monotonic)",
    "a watchdog threading.Timer deletes the lock file after an hour",
    "a refused attempt tries flock again when the holder's pid is not alive here",
    "the lock file deleted at exit by an atexit handler registered when the cell ran",
    "the lock file deleted at exit by a lambda given to atexit when the cell ran",
    "the lock file deleted by a SIGTERM handler installed when the cell ran",
    "a watchdog thread looks at the clock every 5 s and deletes the lock file after an hour",
    "a watchdog thread looks at the clock every second and lets go (LOCK_UN) after 2 hours",
    "the lock taken on a file of the same name in the shared temporary folder",
    "the lock taken on a file in /tmp named from hash(path) (another per interpreter)",
    "a refused attempt tries flock once more when the file is empty (no pid written yet)",
    "the lock file deleted at exit by a handler given its list of paths when the cell ran",
    "the lock file deleted when the job raises (except Exception: unlink, raise)",
    "the lock file deleted on Ctrl-C (except KeyboardInterrupt: unlink, raise)",
    "the lock file deleted by a SIGINT handler (Ctrl-C)",
    "the lock file deleted by a SIGHUP handler (its terminal closed)",
    "the lock file deleted by a callable SIGTERM handler object set when the cell ran",
    "the lock file deleted at exit by a callable object given to atexit when the cell ran",
    "the lock file deleted at exit by a module-level ExitStack whose close atexit runs",
    "the path lowercased before opening (Report/job.lock taken as report/job.lock)",
    "the lock file deleted at exit by weakref.finalize(single_instance, _remove, path)",
    "a watchdog thread lets go of the lock after 2 h, timed with time.monotonic_ns()",
    "a watchdog thread lets go of the lock after 2 h, timed with datetime.now()",
    "a module-level threading.RLock makes the process's threads take turns at the lock",
    "'.lock' appended to a path that does not end with it",
    "a SIGHUP handler that reopens the lock file (closes it, then flocks it again)",
    "the lock file created when missing as a temporary file renamed to the path",
    "a refused process takes over after 3 refusals in a row (the holder 'must be stuck')",
    "a busy lock whose file holds no bare pid deleted as corrupt and taken",
    "a busy lock whose file is dated in the future deleted as bogus (clock skew)",
    "a busy lock whose file is over 60 days old deleted as stale",
    "flock's other errors (ENOLCK on NFS) warned about, the job run without the lock",
    "a lock file that cannot be opened warned about, the job run without the lock",
    "a refused process takes over after 60 refusals in a row (an hour of a minutely cron)",
    "a refused process takes over once refused for 2 hours (time.monotonic() since its first)",
    "one module-level RLock, taken without waiting, guards every path (another job refused)",
    "the try/finally begins at the yield (a failed pid write leaves the lock held)",
    "os.open's fd left open when writing the pid raises (closed on refusal and at the end)",
    "os.open's fd closed on refusal and again in the finally (its EBADF ignored)",
    "os.close(fh.fileno()) to release, then fh.close() with its OSError ignored",
    "a lock file io.FileIO cannot open warned about, the job run without the lock",
]


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS)


@pytest.mark.parametrize("mistake", SEVERE)
def test_a_severe_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


#: Right solutions written otherwise, each with a check that once took (or might take) its
#: points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "os.open with an octal mode for its owner only (0o600), pread and pwrite",
        "the_next_run_can_open_the_lock_file",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked (pid {holder})") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\\n".encode(), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "the pid written through a second open(path, 'w') once the flock is held",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    with open(path) as seen:
                        holder = seen.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                with open(path, "w") as out:
                    out.write(f"{os.getpid()}\\n")
                yield
    """,
    ),
    (
        "a SIGTERM handler installed with `from signal import signal` and put back after",
        "a_second_lock_keeps_the_first",
        """
        import sys
        from signal import signal, SIGTERM

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            previous = signal(SIGTERM, lambda *a: sys.exit(143))
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                signal(SIGTERM, previous)
    """,
    ),
    (
        "a SIGTERM handler installed for the with block and put back after (signal.signal)",
        "a_second_lock_keeps_the_first",
        """
        import signal, sys

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            previous = signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                signal.signal(signal.SIGTERM, previous)
    """,
    ),
    (
        "a watchdog threading.Timer that kills the hung job (SIGKILL: the kernel frees the lock)",
        "the_lock_lasts_the_whole_block",
        """
        import threading, signal
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                # a hung job is killed after 3 s: the kernel frees the lock
                t = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGKILL))
                t.daemon = True
                t.start()
                try:
                    yield
                finally:
                    t.cancel()
            finally:
                fh.close()
    """,
    ),
    (
        "a heartbeat thread that touches the lock file every second",
        "the_lock_lasts_the_whole_block",
        """
        import threading
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                done = threading.Event()
                def heartbeat():
                    while not done.wait(1.0):
                        os.utime(path)
                threading.Thread(target=heartbeat, daemon=True).start()
                try:
                    yield
                finally:
                    done.set()
            finally:
                fh.close()
    """,
    ),
    (
        "touch, then 'r+' and flock on the file object, checking the inode is still the path's",
        "the_lock_is_the_file_at_the_path_given",
        """
        import pathlib

        @contextmanager
        def single_instance(path):
            pathlib.Path(path).touch()
            with open(path, "r+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"already running (pid {holder})") from None
                if os.fstat(fh.fileno()).st_ino != os.stat(path).st_ino:
                    raise AlreadyRunning("the lock file was replaced while taking it (pid unknown)")
                fh.truncate(0)
                fh.write(str(os.getpid()))
                fh.flush()
                yield
    """,
    ),
    (
        "a heartbeat thread that rewrites the pid through the held file, stopped and joined",
        "pidfile_names_only_the_current_holder",
        """
        import threading

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(
                        f"{path} is locked by another instance (pid {holder})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                done = threading.Event()
                def heartbeat():
                    while not done.wait(5.0):
                        fh.seek(0)
                        fh.truncate()
                        fh.write(str(os.getpid()))
                        fh.flush()
                beat = threading.Thread(target=heartbeat, daemon=True)
                beat.start()
                try:
                    yield
                finally:
                    done.set()
                    beat.join()
            finally:
                fh.close()
    """,
    ),
    (
        "a class with __enter__/__exit__ (errno-checked OSError, fsync, closing to release)",
        "a_forked_worker_leaving_keeps_the_lock",
        """
        import errno

        class SingleInstance:
            def __init__(self, path):
                self.path = path
                self._fh = None

            def __enter__(self):
                fh = open(self.path, "a+")
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                        fh.close()
                        raise
                    fh.seek(0)
                    holder = fh.read().strip()
                    fh.close()
                    raise AlreadyRunning(
                        f"already running: pid {holder or '?'} holds {self.path}"
                    ) from exc
                except BaseException:
                    fh.close()
                    raise
                try:
                    fh.seek(0)
                    fh.truncate()
                    fh.write(f"{os.getpid()}\\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                except BaseException:
                    fh.close()
                    raise
                self._fh = fh
                return self

            def __exit__(self, *exc_info):
                fh, self._fh = self._fh, None
                if fh is not None:
                    fh.close()
                return False

        single_instance = SingleInstance
    """,
    ),
    (
        "os.open(O_RDWR | O_CREAT) with flock, ftruncate and os.write on the descriptor",
        "the_lock_is_the_file_at_the_path_given",
        """
        @contextmanager
        def single_instance(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.lseek(fd, 0, os.SEEK_SET)
                    holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
                    raise AlreadyRunning(f"another instance holds {path}: pid {holder}")
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, str(os.getpid()).encode())
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "truncate(0) in append mode, the holder read back through pathlib, the pid yielded",
        "pidfile_names_only_the_current_holder",
        """
        from pathlib import Path

        def _holder_of(path):
            try:
                text = Path(path).read_text().strip()
            except OSError:
                return "unknown"
            return text if text.isdigit() else "unknown"

        @contextmanager
        def single_instance(path):
            lock = open(path, mode="a+")
            with lock:
                try:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_NB | fcntl.LOCK_EX)
                except BlockingIOError:
                    raise AlreadyRunning(
                        f"cannot lock {path}: held by pid {_holder_of(path)}"
                    ) from None
                lock.truncate(0)
                lock.write(f"{os.getpid()}")
                lock.flush()
                yield os.getpid()
    """,
    ),
    (
        "an ExitStack holding the file, flock on the file object, logging and helpers",
        "refusal_leaves_the_lock_alone",
        """
        import logging
        from contextlib import ExitStack
        log = logging.getLogger(__name__)

        def _read_holder(fh):
            fh.seek(0)
            return fh.read().strip() or "unknown"

        def _claim(fh):
            fh.seek(0)
            fh.truncate()
            print(os.getpid(), file=fh, end="")
            fh.flush()

        @contextmanager
        def single_instance(path):
            with ExitStack() as stack:
                fh = stack.enter_context(open(path, "a+", encoding="utf-8"))
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except (BlockingIOError, PermissionError) as exc:
                    holder = _read_holder(fh)
                    log.warning("lock %s busy (pid %s)", path, holder)
                    raise AlreadyRunning(f"pid {holder} is already running with {path}") from exc
                _claim(fh)
                log.info("lock %s taken by %s", path, os.getpid())
                yield fh
    """,
    ),
    (
        "a per-path threading.Lock taken without waiting for the block, beside the flock",
        "second_holder_is_refused",
        """
        import threading
        _REGISTRY = threading.Lock()
        _GUARDS = {}

        def _holder_of(fh):
            fh.seek(0)
            return fh.read().strip() or "unknown"

        @contextmanager
        def single_instance(path):
            with _REGISTRY:
                guard = _GUARDS.setdefault(os.path.abspath(path), threading.Lock())
            fh = open(path, "a+")
            try:
                if not guard.acquire(blocking=False):
                    raise AlreadyRunning(f"{path} is locked in this process (pid {_holder_of(fh)})")
                try:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise AlreadyRunning(
                            f"{path} is locked by another instance (pid {_holder_of(fh)})"
                        ) from None
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                    yield
                finally:
                    guard.release()
            finally:
                fh.close()
    """,
    ),
    (
        "a class with __enter__/__exit__, os.open and a module-level Lock around the flock",
        "two_instances_started_together",
        """
        import threading
        _LOCK = threading.Lock()

        class single_instance:
            def __init__(self, path):
                self.path = path
                self.fd = None

            def __enter__(self):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    with _LOCK:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise AlreadyRunning(f"{self.path} is held by pid {holder}") from None
                except BaseException:
                    os.close(fd)
                    raise
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, str(os.getpid()).encode(), 0)
                except BaseException:
                    os.close(fd)
                    raise
                self.fd = fd
                return self

            def __exit__(self, *exc):
                fd, self.fd = self.fd, None
                if fd is not None:
                    os.close(fd)
                return False
    """,
    ),
    (
        "an RLock-guarded module-level dict of the files this process holds, by path",
        "a_forked_worker_leaving_keeps_the_lock",
        """
        import threading
        _GUARD = threading.RLock()
        _HELD = {}

        @contextmanager
        def single_instance(path):
            where = os.path.realpath(path)
            with _GUARD:
                fh = open(path, "a+")
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    fh.close()
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                except BaseException:
                    fh.close()
                    raise
                try:
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                except BaseException:
                    fh.close()
                    raise
                _HELD[where] = fh
            try:
                yield
            finally:
                with _GUARD:
                    if _HELD.get(where) is fh:
                        del _HELD[where]
                    fh.close()
    """,
    ),
    (
        "flock's OSError sorted by errno (EWOULDBLOCK, EAGAIN, EACCES refuse; others raise)",
        "a_broken_lock_path_is_not_already_running",
        """
        import errno

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "flock imported by name and given the file object, in a with open()",
        "a_broken_lock_path_is_not_already_running",
        """
        from fcntl import flock, LOCK_EX, LOCK_NB

        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    flock(fh, LOCK_EX | LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(
                        f"{path}: another instance runs (pid {fh.read().strip() or 'unknown'})"
                    ) from None
                fh.seek(0)
                fh.truncate()
                fh.write(f"{os.getpid()}")
                fh.flush()
                yield
    """,
    ),
    (
        "a lock that logs how long it was held, from time.monotonic_ns() and datetime.now()",
        "the_lock_lasts_the_whole_block",
        """
        import logging, time
        from datetime import datetime
        log = logging.getLogger("ex02")

        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise AlreadyRunning(f"{path} is held by pid {fh.read().strip()}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                started, since = time.monotonic_ns(), datetime.now()
                try:
                    yield
                finally:
                    held_s = (time.monotonic_ns() - started) / 1e9
                    log.info("held %s for %.1f s (since %s)", path, held_s, since)
    """,
    ),
    (
        # The relative-path scene once ran off the main thread without the signal shim:
        # a right lock that installs a SIGTERM handler met "signal only works in main
        # thread" there, and lost a severe check.
        "a SIGTERM handler installed for the with block, given a relative path",
        "the_lock_is_the_file_at_the_path_given",
        """
        import signal
        import sys

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
                signal.signal(signal.SIGTERM, before)
    """,
    ),
    (
        "os.open, errno checked for EWOULDBLOCK (any other error raised), 'holder not known yet'",
        "no_run_without_the_lock",
        """
        import errno
        import os.path

        @contextmanager
        def single_instance(path):
            folder = os.path.dirname(path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    text = os.pread(fd, 64, 0).decode(errors="replace").strip()
                    who = f"pid {text}" if text else "a holder not known yet (empty file)"
                    raise AlreadyRunning(f"{path} is held by {who}") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
    (
        "Path.touch(exist_ok=False), FileExistsError ignored, then 'r+' (nothing truncated)",
        "a_late_starter_leaves_the_holders_pid",
        """
        from pathlib import Path


        @contextmanager
        def single_instance(path):
            try:
                Path(path).touch(exist_ok=False)
            except FileExistsError:
                pass
            fh = open(path, "r+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "os.chdir to the lock's folder to open it by name, and back in a finally",
        "the_process_is_left_as_it_was",
        """
        @contextmanager
        def single_instance(path):
            folder, name = os.path.split(path)
            before = os.getcwd()
            if folder:
                os.chdir(folder)
            try:
                fh = open(name, "a+")
            finally:
                os.chdir(before)
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "the holder empties its file before closing it, while it still holds the lock",
        "refusal_when_the_file_names_nobody",
        """
        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                try:
                    yield
                finally:
                    fh.truncate(0)
                    fh.flush()
            finally:
                fh.close()
    """,
    ),
    (
        "a SIGTERM handler that raises SystemExit for the block, the old one put back in a finally",
        "the_process_is_left_as_it_was",
        """
        import signal


        def _stopped(signum, frame):
            raise SystemExit(128 + signum)


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held (pid {holder})") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                old = signal.signal(signal.SIGTERM, _stopped)
                try:
                    yield
                finally:
                    signal.signal(signal.SIGTERM, old)
            finally:
                fh.close()
    """,
    ),
    (
        "the pid written at best: an OSError writing it logged, the job run under the lock",
        "a_failed_start_lets_go_of_the_lock",
        """
        import logging

        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                try:
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                except OSError as exc:
                    logging.getLogger("ex02").warning("pid not written to %s: %s", path, exc)
                yield
    """,
    ),
    (
        "a per-path RLock from a guarded dict, taken without waiting, beside the flock",
        "another_jobs_lock_is_free_to_another_thread",
        """
        import threading

        _GUARD = threading.Lock()
        _BY_PATH = {}

        @contextmanager
        def single_instance(path):
            with _GUARD:
                mine = _BY_PATH.setdefault(os.path.realpath(path), threading.RLock())
            if not mine.acquire(blocking=False):
                raise AlreadyRunning(f"{path} is held by another thread (pid {os.getpid()})")
            try:
                with open(path, "a+") as fh:
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                    fh.seek(0)
                    fh.truncate()
                    fh.write(str(os.getpid()))
                    fh.flush()
                    yield
            finally:
                mine.release()
    """,
    ),
    (
        "a refusal that says how long this process has been refused (monotonic), and refuses",
        "a_held_lock_is_never_stale",
        """
        import time

        _REFUSED_SINCE = {}

        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    since = _REFUSED_SINCE.setdefault(path, time.monotonic())
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    waited = (time.monotonic() - since) / 60
                    raise AlreadyRunning(
                        f"{path} is locked by pid {holder} (refused for {waited:.0f} min)"
                    ) from None
                _REFUSED_SINCE.pop(path, None)
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
    """,
    ),
    (
        "the lock's folder made when missing (os.makedirs, exist_ok), then 'a+' and flock",
        "a_broken_lock_path_is_not_already_running",
        """
        @contextmanager
        def single_instance(path):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "the holder's pid picked out of the file with a regex ('unknown' when no digits)",
        "refusal_when_the_file_names_nobody",
        """
        import re

        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    found = re.search(r"\\d+", fh.read())
                    holder = found.group() if found else "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "SIGTERM and SIGINT blocked for the block, the old mask put back in a finally",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
                try:
                    fh.seek(0)
                    fh.truncate()
                    fh.write(f"{os.getpid()}\\n")
                    fh.flush()
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old)
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "a watchdog signal.alarm that ends a hung job (SIGALRM's default), cancelled in a finally",
        "the_process_is_left_as_it_was",
        """
        import signal


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                signal.alarm(3600)
                try:
                    yield
                finally:
                    signal.alarm(0)
            finally:
                fh.close()
    """,
    ),
    (
        "the pid written with print() (a trailing newline), the holder read with readline()",
        "pidfile_names_only_the_current_holder",
        """
        @contextmanager
        def single_instance(path):
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    holder = fh.readline().strip() or "unknown"
                    raise AlreadyRunning(f"{path}: already running as pid {holder}") from None
                fh.seek(0)
                fh.truncate()
                print(os.getpid(), file=fh, flush=True)
                yield
    """,
    ),
    (
        "the lock taken on os.path.realpath(path), errno checked, os.fdopen on os.open",
        "the_lock_is_the_file_at_the_path_given",
        """
        import errno


        @contextmanager
        def single_instance(path):
            real = os.path.realpath(path)
            fh = os.fdopen(os.open(real, os.O_RDWR | os.O_CREAT, 0o644), "r+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    holder = fh.read().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is locked by pid {holder}") from None
                fh.truncate(0)
                fh.seek(0)
                fh.write(f"{os.getpid()}")
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        # The harness once took only an exception named AlreadyRunning for a refusal: a
        # subclass of labkit's, which a worker's `except AlreadyRunning` catches, lost
        # every check that needs a refusal.
        "a subclass of labkit's AlreadyRunning (class LockBusy(AlreadyRunning)) on refusal",
        "second_holder_is_refused",
        """
        class LockBusy(AlreadyRunning):
            def __init__(self, path, holder):
                super().__init__(f"{path} is locked by pid {holder}")
                self.path, self.holder = path, holder


        @contextmanager
        def single_instance(path):
            fh = open(path, "a+")
            try:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fh.seek(0)
                    raise LockBusy(path, fh.read().strip() or "unknown") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
            finally:
                fh.close()
    """,
    ),
    (
        "the lock file opened with pathlib's Path.open('a+'), the holder read with read_text",
        "no_run_without_the_lock",
        """
        from pathlib import Path


        @contextmanager
        def single_instance(path):
            lock = Path(path)
            with lock.open("a+") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = lock.read_text().strip() or "unknown"
                    raise AlreadyRunning(f"already running: pid {holder} holds {lock}") from None
                fh.seek(0)
                fh.truncate()
                fh.write(str(os.getpid()))
                fh.flush()
                yield
    """,
    ),
    (
        "the lock file opened with io.FileIO (raw bytes), the holder decoded from them",
        "no_run_without_the_lock",
        """
        import io


        @contextmanager
        def single_instance(path):
            raw = io.FileIO(path, "a+")
            try:
                try:
                    fcntl.flock(raw.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raw.seek(0)
                    holder = raw.read().decode().strip() or "unknown"
                    raise AlreadyRunning(f"already running: pid {holder}") from None
                raw.truncate(0)
                raw.write(str(os.getpid()).encode())
                yield
            finally:
                raw.close()
    """,
    ),
    (
        "os.open imported by name (from os import open as os_open), pread and pwrite",
        "no_run_without_the_lock",
        """
        from os import open as os_open


        @contextmanager
        def single_instance(path):
            fd = os_open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 64, 0).decode().strip() or "unknown"
                    raise AlreadyRunning(f"{path} is held by pid {holder}") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                yield
            finally:
                os.close(fd)
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex02", RIGHT)

# %% [markdown]
# # Exercise 2: one instance at a time
#
# A cron job that takes longer than its interval starts a second copy of itself, and
# both charge the same customers. A lock stops the second copy. The common first try,
# a pidfile created with `O_EXCL` and deleted at exit, fails the day the holder is
# killed with `kill -9`: the file stays and no run ever starts again. `fcntl.flock`
# does not have that problem: the lock belongs to the open file, and the kernel drops
# it when the process dies, however it dies.
#
# Write `single_instance`. The check kills a real process that holds your lock.

# %%
import fcntl
import os
from contextlib import contextmanager

from labkit.errors import AlreadyRunning


# %%
@contextmanager
def single_instance(path):
    """Hold an exclusive lock on the file at ``path`` for the duration of a ``with`` block.

    - Open the file without truncating it (mode ``"a+"``) and take
      ``fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)``.
    - If another process (or another open of the same file) holds it, raise
      ``AlreadyRunning`` with a message naming the holder's pid, read from the file.
    - Once you hold it, replace the file's content with your pid (``os.getpid()``):
      the file names the current holder only, never a list of past ones.
    - A refused attempt leaves the file as it is: never delete or empty it unless you
      hold the lock.
    - Release it when the block ends, normally or by an exception. If the holder dies,
      even by SIGKILL, the kernel releases it: never rely on the file's existence.
    """
    ### BEGIN SOLUTION
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise AlreadyRunning(f"{path} is locked by another instance (pid {holder})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()
    ### END SOLUTION


# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here: `second_holder_is_refused`,
# `released_after_exit`, `released_on_error`, `survives_holder_kill_9`,
# `two_instances_started_together`, `refusal_leaves_the_lock_alone`,
# `release_keeps_the_lock_file`, `takeover_after_kill_admits_one`,
# `error_inside_the_block_comes_out`, and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex02")

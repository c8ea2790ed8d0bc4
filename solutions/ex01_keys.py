# %% [markdown]
# # Exercise 1: stable keys and payload fingerprints
#
# A retry, a second cron run and a redelivered message must all arrive with the **same
# key**, so the system can recognise them. And the same key arriving with a **different
# payload** is not a retry: it is a bug upstream, and it must be refused loudly.
#
# Write the three functions below. Each docstring is the whole contract. Run the last
# cell to check your work; it prints a table with what passed and, for what did not,
# what was expected, what your code did, and a hint.

# %%
import hashlib
import json

from labkit.errors import IdempotencyConflict


# %%
def operation_key(source: str, entity_id: object, action: str, version: int = 1) -> str:
    """A key that names an intent, such as "charge invoice 42, version 1".

    - The same arguments give the same key in every call, every process, every day:
      no uuid4(), no random, no time, no hash() (it is salted per process).
    - Different source, entity id, action or version give different keys.
    - The key is readable text that contains all four parts (operators grep logs for it),
      for example ``"billing:42:charge:v1"``.
    """
    ### BEGIN SOLUTION
    return f"{source}:{entity_id}:{action}:v{version}"
    ### END SOLUTION


# %%
def payload_fingerprint(payload: dict) -> str:
    """SHA-256 hex digest of the payload's canonical JSON.

    Canonical JSON is ``json.dumps(payload, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` encoded as UTF-8: two dicts with the same content in a
    different key order give the same fingerprint; a different value (or the same value
    with another type, 1990 versus "1990") gives a different one.
    """
    ### BEGIN SOLUTION
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
    ### END SOLUTION


# %%
def accept(seen: dict, key: str, payload: dict) -> bool:
    """Remember an operation by its key; tell a new one from a repeat and from a conflict.

    ``seen`` maps key -> payload fingerprint.

    - A key not in ``seen``: store its fingerprint, return True (do the work).
    - The same key with the same fingerprint: return False (a repeat; skip it).
    - The same key with a different fingerprint: raise ``IdempotencyConflict`` with a
      message naming the key, and leave ``seen`` unchanged.
    """
    ### BEGIN SOLUTION
    fp = payload_fingerprint(payload)
    known = seen.get(key)
    if known is None:
        seen[key] = fp
        return True
    if known != fp:
        raise IdempotencyConflict(
            f"key {key!r} was first used with fingerprint {known[:12]}, now with {fp[:12]}"
        )
    return False
    ### END SOLUTION


# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here: `key_is_stable`,
# `key_names_the_intent`, `key_parts_do_not_run_together`, `key_ignores_the_clock`,
# `key_is_the_same_in_another_process`, `accept_new_then_repeat`, `accept_conflict`,
# and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex01")

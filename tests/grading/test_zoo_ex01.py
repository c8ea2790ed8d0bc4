"""Exercise 1's zoo: each plausible wrong solution loses the check named after it.

Exercise 1 is about stable operation keys and payload fingerprints. Each entry overrides
one or two functions of the reference solution with a classic mistake; the check named
after its mistake must catch it, in process for every entry and, for a sample, through
``labkit grade`` in the sandbox (``zoograding``), saying what ``SAYS`` gives.
``test_zoo.py`` checks the zoo as a whole.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        # Log hygiene gone too far: the whole message cut to a width, and with it the key.
        "ex01",
        "the conflict message cut to 200 characters",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                message = f"key {key!r} came back with fingerprint {fp[:12]}, not {known[:12]}"
                raise IdempotencyConflict(message[:200])
            return False
    """,
    ),
    (
        "ex01",
        "key from uuid4 per attempt",
        "key_is_stable",
        """
        import uuid
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{uuid.uuid4().hex[:8]}"
    """,
    ),
    (
        "ex01",
        "key from a timestamp",
        "key_ignores_the_clock",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{int(time.time())}"
    """,
    ),
    (
        "ex01",
        "key from datetime.now()",
        "key_ignores_the_clock",
        """
        from datetime import datetime
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{datetime.now():%Y%m%d}"
    """,
    ),
    (
        "ex01",
        "key from date.today() (the date class imported by name)",
        "key_ignores_the_clock",
        """
        from datetime import date
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{date.today():%Y%m%d}"
    """,
    ),
    (
        "ex01",
        "key from a timestamp, with time() imported by name",
        "key_ignores_the_clock",
        """
        from time import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{int(time()) // 3600}"
    """,
    ),
    (
        "ex01",
        "fingerprint without sort_keys (dict order)",
        "fingerprint_is_canonical",
        """
        def payload_fingerprint(payload):
            return hashlib.sha256(json.dumps(payload).encode()).hexdigest()
    """,
    ),
    (
        "ex01",
        "conflict overwrites the first payload",
        "accept_conflict",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            new = seen.get(key) != fp
            seen[key] = fp
            return new
    """,
    ),
    (
        "ex01",
        "dedup by payload instead of key",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if fp in seen.values() and seen.get(key) != fp:
                return False
            if key in seen and seen[key] != fp:
                raise IdempotencyConflict(key)
            new = key not in seen
            seen[key] = fp
            return new
    """,
    ),
    (
        "ex01",
        "key from hash() (salted per process)",
        "key_is_the_same_in_another_process",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{abs(hash((source, str(entity_id), action))):x}:v{version}"
    """,
    ),
    (
        "ex01",
        "key from the order of a set of strings",
        "key_is_the_same_in_another_process",
        """
        def operation_key(source, entity_id, action, version=1):
            return ":".join(sorted({source, action}, key=hash) + [str(entity_id), f"v{version}"])
    """,
    ),
    (
        "ex01",
        "entity id lowercased in the key",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).lower()}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint that sorts only the top-level keys",
        "fingerprint_is_canonical",
        """
        def payload_fingerprint(payload):
            text = json.dumps({k: payload[k] for k in sorted(payload)}, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with 1990.0 made 1990",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return int(v) if isinstance(v, float) and v.is_integer() else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"))
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with json's default separators (', ' and ': ')",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of ASCII-escaped JSON (ensure_ascii left on)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept remembers keys in a module-level dict, not in `seen`",
        "accept_new_then_repeat",
        """
        _memory = {}
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in _memory:
                _memory[key] = fp
                return True
            if _memory[key] != fp:
                raise IdempotencyConflict(key)
            return False
    """,
    ),
    (
        "ex01",
        "key joined with '_' (ids with '_' run together)",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}_{entity_id}_{action}_v{version}"
    """,
    ),
    (
        "ex01",
        "key parts concatenated without a separator",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}{entity_id}{action}v{version}"
    """,
    ),
    (
        "ex01",
        "key truncates the entity id to 8 characters",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id)[:8]}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key lowercases the source and the action",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source.lower()}:{entity_id}:{action.lower()}:v{version}"
    """,
    ),
    (
        "ex01",
        "key leaves the version out when it is 1",
        "key_shows_every_part",
        """
        def operation_key(source, entity_id, action, version=1):
            base = f"{source}:{entity_id}:{action}"
            return base if version == 1 else f"{base}:v{version}"
    """,
    ),
    (
        "ex01",
        "conflict message that does not name the key",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict("payload changed for a known operation")
            return False
    """,
    ),
    (
        "ex01",
        "accept stores the payload in `seen`, not its fingerprint",
        "seen_maps_keys_to_fingerprints",
        """
        def accept(seen, key, payload):
            if key not in seen:
                seen[key] = payload
                return True
            if payload_fingerprint(seen[key]) != payload_fingerprint(payload):
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint drops the fields that are None",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            clean = {k: v for k, v in payload.items() if v is not None}
            text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint strips blanks around strings",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return v.strip() if isinstance(v, str) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "conflict raised only when the amount changed",
        "accept_conflict",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in seen:
                seen[key] = fp
                return True
            if seen[key] != fp and "amount_cents" in payload:
                raise IdempotencyConflict(f"key {key!r}")
            return False
    """,
    ),
    (
        "ex01",
        "key from today's date with time.strftime (no time.time() call)",
        "key_ignores_the_clock",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{time.strftime('%Y%m%d')}"
    """,
    ),
    (
        "ex01",
        "key with the accents folded to ASCII (a slug: 'José' becomes 'Jose')",
        "key_names_the_intent",
        """
        import unicodedata
        def operation_key(source, entity_id, action, version=1):
            parts = [unicodedata.normalize("NFKD", str(p)).encode("ascii", "ignore").decode()
                     for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key built from the parts with blanks stripped (' INV-7' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).strip() for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key cut to 255 characters (the width of a key column)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}"[:255]
    """,
    ),
    (
        "ex01",
        "an all-digit entity id made an int ('0042' and 42 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            text = str(entity_id)
            if text.isdigit():
                text = str(int(text))
            return f"{source}:{text}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept remembers keys in lower case",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key.lower())
            if known is None:
                seen[key.lower()] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept remembers keys cut to 128 characters",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key[:128])
            if known is None:
                seen[key[:128]] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint skips the 'volatile' fields (request_id, timestamps)",
        "fingerprint_matches_the_contract",
        """
        VOLATILE = {"request_id", "timestamp", "ts", "created_at", "sent_at", "trace_id"}
        def payload_fingerprint(payload):
            stable = {k: v for k, v in payload.items() if k not in VOLATILE}
            text = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key made 'safe': every character but letters, digits, '_' and '-' replaced by '_'",
        "key_names_the_intent",
        """
        import re
        def operation_key(source, entity_id, action, version=1):
            parts = [re.sub(r"[^\\w-]", "_", str(p)) for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with ':' inside a part replaced by '-' ('INV:7' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).replace(":", "-") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key forced to ASCII with encode('ascii', 'replace') ('Müller' and 'Möller' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).encode("ascii", "replace").decode()
                     for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the non-ASCII letters dropped (encode('ascii', 'ignore'))",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).encode("ascii", "ignore").decode() for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the worker's host name in it",
        "key_is_the_same_on_another_machine",
        """
        import socket
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}@{socket.gethostname()}"
    """,
    ),
    (
        "ex01",
        "key with the day of the run, read once at import",
        "key_ignores_the_clock",
        """
        import time as _time
        _RUN_DAY = _time.strftime("%Y%m%d")
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{_RUN_DAY}"
    """,
    ),
    (
        "ex01",
        "fingerprint cached by id(payload) (a dict changed in place keeps its fingerprint)",
        "accept_conflict",
        """
        _FP_CACHE = {}
        def payload_fingerprint(payload):
            cached = _FP_CACHE.get(id(payload))
            if cached is not None:
                return cached
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            fp = _FP_CACHE[id(payload)] = hashlib.sha256(text.encode("utf-8")).hexdigest()
            return fp
    """,
    ),
    (
        "ex01",
        "key with blanks inside a part turned into '-' ('INV 7' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = ["-".join(str(p).split(" ")) for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept takes a payload with a field dropped for a repeat",
        "accept_conflict",
        """
        _PAYLOADS = {}
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                _PAYLOADS[key] = dict(payload)
                return True
            first = _PAYLOADS.get(key, {})
            if known != fp and not all(first.get(k) == v for k, v in payload.items()):
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the version cut to its last digit (v1 and v11 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{str(version)[-1]}"
    """,
    ),
    (
        "ex01",
        "fingerprint of the JSON encoded as latin-1, errors='replace' ('北京' and '上海' alike)",
        "conflict_on_non_ascii_text",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("latin-1", "replace")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the JSON encoded with the locale's encoding (ASCII under LANG=C)",
        "conflict_on_non_ascii_text",
        """
        import locale


        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            encoding = locale.getpreferredencoding(False)
            return hashlib.sha256(text.encode(encoding, "replace")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload with accents folded to ASCII ('João' and 'Joao' alike)",
        "conflict_on_non_ascii_text",
        """
        import unicodedata


        def payload_fingerprint(payload):
            def fold(v):
                if isinstance(v, dict):
                    return {fold(k): fold(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [fold(x) for x in v]
                if isinstance(v, str):
                    return unicodedata.normalize("NFKD", v).encode("ascii", "ignore").decode()
                return v

            text = json.dumps(fold(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept leaves the retry's own fields (attempt, sent_at) out of the fingerprint",
        "conflict_on_any_field",
        """
        _RETRY_FIELDS = ("attempt", "retry", "sent_at")


        def accept(seen, key, payload):
            stable = {k: v for k, v in payload.items() if k not in _RETRY_FIELDS}
            fp = payload_fingerprint(stable)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "conflict message made with .format() on text holding the key (a key with braces)",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                template = "key " + key + " was first used with fingerprint {old}, now with {new}"
                raise IdempotencyConflict(template.format(old=known[:12], new=fp[:12]))
            return False
    """,
    ),
    (
        "ex01",
        "conflict message made with % on text holding the key (a key with '%')",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                template = "key " + key + " reused: was %s, now %s"
                raise IdempotencyConflict(template % (known[:12], fp[:12]))
            return False
    """,
    ),
    (
        "ex01",
        "accept answers repeats from a module-level cache before looking at `seen`",
        "accept_remembers_only_in_seen",
        """
        _ACCEPTED = {}


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if _ACCEPTED.get(key) == fp:
                return False
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                _ACCEPTED[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            _ACCEPTED[key] = fp
            return False
    """,
    ),
    (
        "ex01",
        "accept forgets a key after a 24 h dedup window kept in a module-level dict",
        "accept_remembers_only_in_seen",
        """
        import time as _time

        _FIRST_SEEN = {}
        WINDOW_S = 86_400


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = _time.time()
            if known is not None and now - _FIRST_SEEN.get(key, now) > WINDOW_S:
                known = None  # the window passed: a new operation
            if known is None:
                seen[key] = fp
                _FIRST_SEEN[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept answers True for a payload it cannot fingerprint (TypeError swallowed)",
        "unencodable_payload_is_not_new_every_time",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except (TypeError, ValueError):
                return True
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the worker's process id, read once at import",
        "key_is_the_same_on_another_machine",
        """
        import os

        _WORKER = os.getpid()


        def operation_key(source, entity_id, action, version=1):
            return f"w{_WORKER}/{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the host name, read once at import",
        "key_is_the_same_on_another_machine",
        """
        import socket

        _HOST = socket.gethostname()


        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}@{_HOST}"
    """,
    ),
    (
        "ex01",
        "key with the thread's id (threading.get_ident())",
        "key_is_the_same_in_another_process",
        """
        import threading


        def operation_key(source, entity_id, action, version=1):
            # the worker thread that made the key, for tracing
            return f"{source}:{entity_id}:{action}:v{version}@{threading.get_ident()}"
    """,
    ),
    (
        "ex01",
        "accept forgets a key after a 7-day dedup window kept in a module-level dict",
        "accept_remembers_only_in_seen",
        """
        import time as _time

        _FIRST_SEEN = {}
        WINDOW_S = 7 * 86_400  # a week, as the payment provider keeps its keys


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = _time.time()
            if known is not None and now - _FIRST_SEEN.get(key, now) > WINDOW_S:
                known = None  # the window passed: a new operation
            if known is None:
                seen[key] = fp
                _FIRST_SEEN[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept strips blanks from the key (' billing:7:...' and 'billing:7:...' share an entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = str(key).strip()
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r}: another payload")
            return False
    """,
    ),
    (
        "ex01",
        "conflict message with the key cut to 32 characters",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key[:32]!r}... came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "conflict message that names the fingerprints, not the key",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"fingerprint {known[:12]} != {fp[:12]}")
            return False
    """,
    ),
    (
        "ex01",
        "accept pops the retry counter from the caller's payload before fingerprinting",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            payload.pop("attempt", None)  # a retry counter is not part of the request
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r}: another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint memoised by the payload's field names (values ignored)",
        "fingerprint_tells_payloads_apart",
        """
        _FP = {}


        def payload_fingerprint(payload):
            memo = json.dumps(sorted(payload), ensure_ascii=False)
            if memo not in _FP:
                text = json.dumps(
                    payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
                _FP[memo] = hashlib.sha256(text.encode("utf-8")).hexdigest()
            return _FP[memo]
    """,
    ),
    (
        "ex01",
        "conflict only warned about (warnings.warn), the repeat answered False",
        "accept_conflict",
        """
        import warnings


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                warnings.warn(f"key {key!r} came back with another payload", stacklevel=2)
            return False
    """,
    ),
    (
        "ex01",
        "accept answers a repeat with None instead of False",
        "seen_maps_keys_to_fingerprints",
        """
        _reference_accept = accept
        def accept(seen, key, payload):
            return _reference_accept(seen, key, payload) or None
        """,
    ),
    (
        "ex01",
        "fingerprint of floats rounded to cents (a rate of 0.125 and one of 0.124 alike)",
        "conflict_on_any_field",
        """
        def _round(v):
            if isinstance(v, float):
                return round(v, 2)
            if isinstance(v, dict):
                return {k: _round(x) for k, x in v.items()}
            if isinstance(v, list):
                return [_round(x) for x in v]
            return v


        def payload_fingerprint(payload):
            text = json.dumps(
                _round(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with json.dumps(..., default=str) (a datetime and its text alike)",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint that sorts the lists too (the order of the lines ignored)",
        "fingerprint_matches_the_contract",
        """
        def _canon(v):
            if isinstance(v, dict):
                return {k: _canon(x) for k, x in v.items()}
            if isinstance(v, list):
                return sorted((_canon(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
            return v


        def payload_fingerprint(payload):
            text = json.dumps(
                _canon(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with booleans made ints (True and 1 alike)",
        "fingerprint_matches_the_contract",
        """
        def _norm(v):
            if isinstance(v, bool):
                return int(v)
            if isinstance(v, dict):
                return {k: _norm(x) for k, x in v.items()}
            if isinstance(v, list):
                return [_norm(x) for x in v]
            return v


        def payload_fingerprint(payload):
            text = json.dumps(
                _norm(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint skips the fields whose name starts with '_'",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            clean = {k: v for k, v in payload.items() if not str(k).startswith("_")}
            text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key parts URL-quoted (quote(part, safe='')): 'José' shown as 'Jos%C3%A9'",
        "key_shows_every_part",
        """
        from urllib.parse import quote


        def operation_key(source, entity_id, action, version=1):
            parts = [quote(str(p), safe="") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with `version or 1` (version 0 and version 1 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version or 1}"
    """,
    ),
    (
        "ex01",
        "key with the module's __name__ (the notebook says __main__, a worker its module)",
        "key_is_the_same_on_another_machine",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{__name__}/{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key parts normalised with NFKC (fullwidth 'ＩＮＶ-４２' and 'INV-42' share a key)",
        "key_names_the_intent",
        """
        import unicodedata
        def operation_key(source, entity_id, action, version=1):
            parts = [unicodedata.normalize("NFKC", str(p)) for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept keeps `seen` to its last 1000 keys (the oldest dropped to save memory)",
        "accept_forgets_no_key_on_a_long_day",
        """
        MAX_KEYS = 1000
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                while len(seen) >= MAX_KEYS:
                    seen.pop(next(iter(seen)))
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept keeps only the first 16 hex digits of the fingerprint in `seen`",
        "seen_maps_keys_to_fingerprints",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)[:16]  # 16 hex digits are plenty, and save memory
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of the lowercased JSON ('INV-7a' and 'INV-7A' alike)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.lower().encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept answers True for any empty payload (nothing to fingerprint)",
        "accept_new_then_repeat",
        """
        def accept(seen, key, payload):
            if not payload:
                return True
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of the first 4096 characters of the JSON (a long invoice's last line ignored)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text[:4096].encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the NFC-normalised JSON (a decomposed 'ç' hashed as the composed one)",
        "fingerprint_matches_the_contract",
        """
        import unicodedata
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "operation_key memoised with functools.lru_cache (42.0 answered with 42's key)",
        "key_is_made_anew_in_every_call",
        """
        import functools
        @functools.lru_cache(maxsize=None)  # keys are asked for again and again: make each once
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept reserves the key in `seen` before fingerprinting (kept when json.dumps raises)",
        "a_failed_fingerprint_leaves_seen_alone",
        """
        def accept(seen: dict, key: str, payload: dict) -> bool:
            known = seen.get(key)
            if known is None:
                seen[key] = ""  # reserve the key first
                seen[key] = payload_fingerprint(payload)
                return True
            fp = payload_fingerprint(payload)
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the source cut at its first dot ('billing.eu' and 'billing.us' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source.split('.')[0]}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with runs of blanks collapsed to one ('INV  7' and 'INV 7' share a key)",
        "key_names_the_intent",
        r"""
        import re
        def operation_key(source, entity_id, action, version=1):
            parts = [re.sub(r"\s+", " ", str(p)) for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with '/' replaced by '-' (the key used as a file name)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}".replace("/", "-")
    """,
    ),
    (
        "ex01",
        "key with the quotes dropped, to be safe in SQL (\"d'Ávila\" and 'dÁvila' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}".replace("'", "").replace('"', "")
    """,
    ),
    (
        "ex01",
        "key with the source and the action cut to 16 characters",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source[:16]}:{entity_id}:{action[:16]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with control characters made blanks ('INV<tab>7' and 'INV 7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            key = f"{source}:{entity_id}:{action}:v{version}"
            return "".join(c if c.isprintable() else " " for c in key)
    """,
    ),
    (
        "ex01",
        "key with the worker's pod name (the POD_NAME variable) in it",
        "key_is_the_same_on_another_machine",
        """
        import os
        def operation_key(source, entity_id, action, version=1):
            pod = os.environ.get("POD_NAME", "local")
            return f"{pod}/{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint '' for a payload JSON cannot encode (TypeError swallowed)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            try:
                text = json.dumps(
                    payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
            except TypeError:
                return ""
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept answers False for a payload it cannot fingerprint (TypeError swallowed)",
        "unencodable_payload_is_not_new_every_time",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except TypeError:
                return False
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "conflict message that shows the payload (a card number in the logs)",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with {payload!r}")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint cached by the payload's items (1, 1.0 and True share one entry)",
        "conflict_on_any_field",
        """
        _FINGERPRINTS = {}
        def payload_fingerprint(payload):
            try:
                cache_key = frozenset(payload.items())
            except TypeError:
                cache_key = None
            if cache_key is not None and cache_key in _FINGERPRINTS:
                return _FINGERPRINTS[cache_key]
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            fp = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if cache_key is not None:
                _FINGERPRINTS[cache_key] = fp
            return fp
    """,
    ),
    (
        "ex01",
        "accept lets a full payload fill in a key first seen with an empty one",
        "accept_conflict",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None or known == payload_fingerprint({}):
                seen[key] = fp
                return known is None
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept remembers keys with runs of blanks collapsed ('INV  7' and 'INV 7' one entry)",
        "accept_does_not_confuse_keys",
        r"""
        import re
        def accept(seen, key, payload):
            key = re.sub(r"\s+", " ", key)
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept remembers keys normalised with NFKC ('ＩＮＶ-42' and 'INV-42' one entry)",
        "accept_does_not_confuse_keys",
        """
        import unicodedata
        def accept(seen, key, payload):
            key = unicodedata.normalize("NFKC", key)
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload with its numbers made text (42 and '42' alike)",
        "conflict_on_any_field",
        """
        def _as_text(value):
            if isinstance(value, dict):
                return {k: _as_text(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_as_text(v) for v in value]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            return value
        def payload_fingerprint(payload):
            text = json.dumps(
                _as_text(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key stripped whole (' billing' and 'billing' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}".strip()
    """,
    ),
    (
        "ex01",
        "key with newlines in a part made blanks, for one-line logs ('INV\\n7' and 'INV 7')",
        "key_names_the_intent",
        """
        def _one_line(part):
            return str(part).replace("\\r", " ").replace("\\n", " ")
        def operation_key(source, entity_id, action, version=1):
            return f"{_one_line(source)}:{_one_line(entity_id)}:{_one_line(action)}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with a trailing newline cut off the entity id (an id read from a line)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, str):
                entity_id = entity_id.rstrip("\\n")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "conflict message with the key cut to 60 characters and '...'",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                shown = key if len(key) <= 60 else key[:57] + "..."
                raise IdempotencyConflict(f"key {shown!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key joined with '/' ('shop/eu' ids run together)",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return "/".join([str(source), str(entity_id), str(action), f"v{version}"])
    """,
    ),
    (
        "ex01",
        "key joined with '.' ('billing.eu' sources run together)",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return ".".join([str(source), str(entity_id), str(action), f"v{version}"])
    """,
    ),
    (
        "ex01",
        "key with the host name from platform.uname(), read once at import",
        "key_is_the_same_on_another_machine",
        """
        import platform
        _NODE = platform.uname().node
        def operation_key(source, entity_id, action, version=1):
            return f"{_NODE}/{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the machine's network card (uuid.getnode(), its MAC address)",
        "key_is_the_same_on_another_machine",
        """
        from uuid import getnode
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{getnode():x}"
    """,
    ),
    (
        "ex01",
        "key with the worker's user id (os.getuid())",
        "key_is_the_same_on_another_machine",
        """
        import os
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:u{os.getuid()}"
    """,
    ),
    (
        "ex01",
        "key with the name of the worker's home folder (~)",
        "key_is_the_same_on_another_machine",
        """
        import os
        def operation_key(source, entity_id, action, version=1):
            home = os.path.basename(os.path.expanduser("~"))
            return f"{home}:{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "int entity id zero-padded to 10 digits (42 and '0000000042' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, int):
                entity_id = f"{entity_id:010d}"
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint drops the payload's 'id' field (the key names it already)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            rest = {k: v for k, v in payload.items() if k != "id"}
            text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of floats rounded to 6 decimals (to hide float noise)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return round(v, 6) if isinstance(v, float) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "a float entity id written with '{:g}' (1234567.0 and 1234568.0 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            eid = f"{entity_id:g}" if isinstance(entity_id, float) else entity_id
            return f"{source}:{eid}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "a float entity id rounded to 2 decimals (0.125 and 0.124 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, float):
                entity_id = round(entity_id, 2)
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the worker's time zone name (time.tzname), to tell regions apart",
        "key_is_the_same_on_another_machine",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{time.tzname[0]}"
    """,
    ),
    (
        "ex01",
        "key with the local UTC offset (time.strftime('%z'))",
        "key_is_the_same_on_another_machine",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{time.strftime('%z')}"
    """,
    ),
    (
        "ex01",
        "key with the worker's language (the LANG variable)",
        "key_is_the_same_on_another_machine",
        """
        import os
        def operation_key(source, entity_id, action, version=1):
            lang = os.environ.get("LANG", "C").split(".")[0]
            return f"{source}:{entity_id}:{action}:v{version}:{lang}"
    """,
    ),
    (
        "ex01",
        "key with the month of the run, a billing period (datetime.now():%Y-%m)",
        "key_ignores_the_clock",
        """
        from datetime import datetime
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{datetime.now():%Y-%m}"
    """,
    ),
    (
        "ex01",
        "key with the week of the run, counted from time.time()",
        "key_ignores_the_clock",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            week = int(time.time() // (7 * 86_400))
            return f"{source}:{entity_id}:{action}:v{version}:w{week}"
    """,
    ),
    (
        "ex01",
        "key with the year of the run (date.today().year)",
        "key_ignores_the_clock",
        """
        import datetime
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{datetime.date.today().year}"
    """,
    ),
    (
        "ex01",
        "key with the billing month read once at import (time.strftime('%Y%m'))",
        "key_ignores_the_clock",
        """
        import time
        PERIOD = time.strftime("%Y%m")
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}:{PERIOD}"
    """,
    ),
    (
        "ex01",
        "key with the day read from time.clock_gettime(CLOCK_REALTIME)",
        "key_ignores_the_clock",
        """
        import time
        def operation_key(source, entity_id, action, version=1):
            day = int(time.clock_gettime(time.CLOCK_REALTIME) // 86_400)
            return f"{source}:{entity_id}:{action}:v{version}:{day}"
    """,
    ),
    (
        "ex01",
        "key with the version run into the action ('charge1' v1 and 'charge' v11 share a key)",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}{version}"
    """,
    ),
    (
        "ex01",
        "key of the parts sorted, like sort_keys (a source and an id swapped share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return ":".join(sorted([source, str(entity_id), action])) + f":v{version}"
    """,
    ),
    (
        "ex01",
        "accept remembers keys forced to ASCII ('Müller' and 'Möller' one entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            stored = key.encode("ascii", "ignore").decode()
            known = seen.get(stored)
            if known is None:
                seen[stored] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept remembers keys without their version ('...:v1' and '...:v2' one entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            intent = key.rsplit(":v", 1)[0]
            known = seen.get(intent)
            if known is None:
                seen[intent] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept remembers keys with leading zeros dropped ('0042' and '42' one entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            parts = key.split(":")
            tidy = ":".join(p.lstrip("0") or "0" if p.isdigit() else p for p in parts)
            known = seen.get(tidy)
            if known is None:
                seen[tidy] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept checks conflicts in a module-level map of first fingerprints, not in `seen`",
        "accept_remembers_only_in_seen",
        """
        _FIRST = {}
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if _FIRST.setdefault(key, fp) != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint with default=float for Decimals (Decimal('19.90') and 19.9 alike)",
        "fingerprint_tells_payloads_apart",
        """
        import decimal
        def payload_fingerprint(payload):
            def money(value):
                if isinstance(value, decimal.Decimal):
                    return float(value)
                raise TypeError(f"{type(value).__name__} is not JSON serializable")
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=money)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing datetimes as isoformat() (a date and its text alike)",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            def when(value):
                if hasattr(value, "isoformat"):
                    return value.isoformat()
                raise TypeError(f"{type(value).__name__} is not JSON serializable")
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=when)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept stores the fingerprint of the payload without its None fields",
        "seen_maps_keys_to_fingerprints",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint({k: v for k, v in payload.items() if v is not None})
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "IdempotencyConflict defined again in the notebook (a ValueError of its own)",
        "conflict_is_labkits_exception",
        """
        class IdempotencyConflict(ValueError):
            pass
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with {known[:12]}")
            return False
    """,
    ),
    (
        "ex01",
        "accept looks a key up again in lower case when it is not found (an old client's keys)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key) or seen.get(key.lower())
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept looks a key up again with its blanks stripped when it is not found",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key) or seen.get(key.strip())
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept keeps `seen` to 100,000 keys (the oldest dropped when it is full)",
        "accept_forgets_no_key_on_a_long_day",
        """
        MAX_KEYS = 100_000
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(seen) >= MAX_KEYS:
                    seen.pop(next(iter(seen)))
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept clears `seen` when it reaches 50,000 keys, to save memory",
        "accept_forgets_no_key_on_a_long_day",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(seen) >= 50_000:
                    seen.clear()
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of the lists as sets (the same line twice counted once)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    items = {json.dumps(norm(x), sort_keys=True, ensure_ascii=False) for x in v}
                    return [json.loads(item) for item in sorted(items)]
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with the worker's id from the WORKER_ID variable its launcher sets",
        "key_is_the_same_on_another_machine",
        """
        import os
        def operation_key(source, entity_id, action, version=1):
            worker = os.environ.get("WORKER_ID", "0")
            return f"{source}:{entity_id}:{action}:v{version}:w{worker}"
    """,
    ),
    (
        "ex01",
        "fingerprint with default=sorted for sets (a set and its sorted list alike)",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=sorted)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with the dashes taken out of the id ('INV-7-1' and 'INV-71' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).replace('-', '')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the source and the action joined by '.' ('billing.charge:42:v1')",
        "key_parts_do_not_run_together",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}.{action}:{entity_id}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept keeps `seen` to 1,000,000 keys (the oldest dropped when it is full)",
        "accept_forgets_no_key_on_a_long_day",
        """
        MAX_KEYS = 1_000_000
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(seen) >= MAX_KEYS:
                    seen.pop(next(iter(seen)))
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept clears `seen` when it passes 200,000 keys (a bound above months of keys)",
        "accept_forgets_no_key_on_a_long_day",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(seen) > 200_000:
                    seen.clear()
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept trims `seen` to 2**20 keys, deleting the oldest in a while loop",
        "accept_forgets_no_key_on_a_long_day",
        """
        LIMIT = 2**20
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                while len(seen) > LIMIT:
                    del seen[next(iter(seen))]
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept clears `seen` when sys.getsizeof(seen) passes 64 MiB",
        "accept_forgets_no_key_on_a_long_day",
        """
        import sys
        MAX_BYTES = 64 * 2**20
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if sys.getsizeof(seen) > MAX_BYTES:
                    seen.clear()
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept drops the oldest tenth of `seen` once it holds 500,000 keys",
        "accept_forgets_no_key_on_a_long_day",
        """
        import itertools
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(seen) >= 500_000:
                    for old in list(itertools.islice(seen, len(seen) // 10)):
                        del seen[old]
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept keeps the newest 1,000,000 keys (list(seen.items())[-N:] put back)",
        "accept_forgets_no_key_on_a_long_day",
        """
        KEEP = 1_000_000
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                if len(seen) > KEEP:
                    newest = list(seen.items())[-KEEP:]
                    seen.clear()
                    seen.update(newest)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept forgets a key after a 2-year dedup window kept in a module-level dict",
        "accept_remembers_only_in_seen",
        """
        import time as _time

        _FIRST_SEEN = {}
        WINDOW_S = 2 * 365 * 86_400


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = _time.time()
            if known is not None and now - _FIRST_SEEN.get(key, now) > WINDOW_S:
                known = None  # the window passed: a new operation
            if known is None:
                seen[key] = fp
                _FIRST_SEEN[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept deletes keys older than a 10-year retention (datetime.now() and a timedelta)",
        "accept_remembers_only_in_seen",
        """
        from datetime import datetime, timedelta

        _FIRST_SEEN = {}
        RETENTION = timedelta(days=3650)


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            now = datetime.now()
            if key in seen and now - _FIRST_SEEN.get(key, now) > RETENTION:
                del seen[key]  # past the retention: the key is forgotten
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                _FIRST_SEEN[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept forgets a key after 5 years of time.monotonic() (a worker's uptime)",
        "accept_remembers_only_in_seen",
        """
        import time

        _SINCE = {}


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = time.monotonic()
            if known is not None and now - _SINCE.setdefault(key, now) > 5 * 365 * 86_400:
                known = None
            if known is None:
                seen[key] = fp
                _SINCE[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept forgets a key after a 24 h window timed with time.monotonic_ns()",
        "accept_remembers_only_in_seen",
        """
        import time

        _SINCE_NS = {}
        DAY_NS = 86_400 * 10**9


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = time.monotonic_ns()
            if known is not None and now - _SINCE_NS.get(key, now) > DAY_NS:
                known = None
            if known is None:
                seen[key] = fp
                _SINCE_NS[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept forgets a key after a 7-day window read from clock_gettime(CLOCK_REALTIME)",
        "accept_remembers_only_in_seen",
        """
        from time import CLOCK_REALTIME, clock_gettime

        _FIRST = {}


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            now = clock_gettime(CLOCK_REALTIME)
            if known is not None and now - _FIRST.get(key, now) > 7 * 86_400:
                known = None
            if known is None:
                seen[key] = fp
                _FIRST[key] = now
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept looks in `seen` only for keys in a module-level set of its own (a fast path)",
        "accept_remembers_only_in_seen",
        """
        _KNOWN = set()  # keys this worker stored: a set is faster than the store


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in _KNOWN:
                _KNOWN.add(key)
                seen[key] = fp
                return True
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with ':' dropped from the parts ('INV:7' and 'INV7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).replace(":", "") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with ':' in the entity id made '_' ('INV:7' and 'INV_7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            entity = str(entity_id).replace(":", "_")  # ':' is the key's separator
            return f"{source}:{entity}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with ':' in the source made '.' ('shop:eu' and 'shop.eu' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source.replace(':', '.')}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept clears `seen` every 100,000 calls (a module-level call counter)",
        "accept_forgets_no_key_on_a_long_day",
        """
        _calls = 0
        def accept(seen, key, payload):
            global _calls
            _calls += 1
            if _calls % 100_000 == 0:
                seen.clear()  # a day's keys are plenty
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept clears `seen` after CLEAR_EVERY = 10**5 calls counted by itertools.count()",
        "accept_forgets_no_key_on_a_long_day",
        """
        import itertools
        CLEAR_EVERY = 10**5
        _ticks = itertools.count(1)
        def accept(seen, key, payload):
            global _ticks
            if next(_ticks) > CLEAR_EVERY:
                seen.clear()
                _ticks = itertools.count(1)
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept counts its calls in a function attribute and clears `seen` past 150,000",
        "accept_forgets_no_key_on_a_long_day",
        """
        def accept(seen, key, payload):
            accept.calls = getattr(accept, "calls", 0) + 1
            if accept.calls > 150_000:
                seen.clear()
                accept.calls = 0
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept counts its calls under a key of `seen` and clears it every 1e5 calls",
        "accept_forgets_no_key_on_a_long_day",
        """
        COUNT = "__calls__"
        def accept(seen, key, payload):
            calls = seen.get(COUNT, 0) + 1
            if calls >= 1e5:
                seen.clear()
                calls = 0
            seen[COUNT] = calls
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept keeps its last 100,000 new keys in a deque(maxlen) and drops the oldest",
        "accept_forgets_no_key_on_a_long_day",
        """
        from collections import deque
        _recent = deque(maxlen=100_000)
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                if len(_recent) == _recent.maxlen:
                    seen.pop(_recent[0], None)
                _recent.append(key)
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept tracks its keys in an LRU (an OrderedDict class of 65,536) and evicts from `seen`",
        "accept_forgets_no_key_on_a_long_day",
        """
        from collections import OrderedDict

        class Lru:
            def __init__(self, size):
                self.size = size
                self.order = OrderedDict()

            def touch(self, key):
                self.order[key] = None
                self.order.move_to_end(key)
                if len(self.order) > self.size:
                    old, _ = self.order.popitem(last=False)
                    return old
                return None

        _LRU = Lru(65_536)

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                evicted = _LRU.touch(key)
                if evicted is not None:
                    seen.pop(evicted, None)
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            _LRU.touch(key)
            return False
    """,
    ),
    (
        "ex01",
        "accept clears `seen` every 200,000 calls, the bound a default parameter",
        "accept_forgets_no_key_on_a_long_day",
        """
        _state = {"calls": 0}
        def accept(seen, key, payload, clear_every=200_000):
            _state["calls"] += 1
            if _state["calls"] >= clear_every:
                seen.clear()
                _state["calls"] = 0
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept from a factory whose closure clears `seen` every 50,000 new keys",
        "accept_forgets_no_key_on_a_long_day",
        """
        def _make_accept(limit):
            count = 0
            def accept(seen, key, payload):
                nonlocal count
                fp = payload_fingerprint(payload)
                known = seen.get(key)
                if known is None:
                    count += 1
                    if count > limit:
                        seen.clear()
                        count = 1
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
            return accept

        accept = _make_accept(50_000)
    """,
    ),
    (
        "ex01",
        "accept clears `seen` every 2**19 calls, counted in a class attribute",
        "accept_forgets_no_key_on_a_long_day",
        """
        class _Stats:
            calls = 0

        def accept(seen, key, payload):
            _Stats.calls += 1
            if _Stats.calls > 2**19:
                seen.clear()
                _Stats.calls = 0
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "the fingerprint's text encoded with errors='replace'",
        "a_payload_json_cannot_hold_raises",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()
    """,
    ),
    (
        "ex01",
        "the fingerprint's text encoded with errors='ignore'",
        "a_payload_json_cannot_hold_raises",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8", errors="ignore")).hexdigest()
    """,
    ),
    (
        "ex01",
        "the fingerprint's text encoded with errors='surrogateescape'",
        "a_payload_json_cannot_hold_raises",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()
    """,
    ),
    (
        "ex01",
        # Tuple keys dropped: EUR 1990 and USD 99999 both fingerprint as {"prices": {}}.
        "the canonical JSON dumped with skipkeys=True",
        "a_payload_json_cannot_hold_raises",
        """
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, skipkeys=True
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        # 42 from the database and numpy.int64(42) from a DataFrame are one invoice: the
        # repr gives them two keys, 'billing:42:...' and 'billing:np.int64(42):...'.
        "the entity id written with !r (to tell 42 and '42' apart)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id!r}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        # The type name goes in: 'int' for 42, 'InvoiceId' for the same id as a typed one.
        "the entity id's type name put in the key",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{type(entity_id).__name__}-{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        # "Rua A, 42" and "Rua A,42" give one JSON text once the blanks are replaced away.
        "fingerprint of json's default output with ', ' and ': ' replaced by ',' and ':'",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
            text = text.replace(", ", ",").replace(": ", ":")
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the JSON with every blank dropped ('Ana Maria' and 'AnaMaria' alike)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, ensure_ascii=False).replace(" ", "")
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with ':' in a part percent-encoded, '%' left as is ('INV:7' and 'INV%3A7' alike)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).replace(":", "%3A") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key parts normalised with NFC (a decomposed 'ç' and the composed one share a key)",
        "key_names_the_intent",
        """
        import unicodedata
        def operation_key(source, entity_id, action, version=1):
            parts = [unicodedata.normalize("NFC", str(p)) for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept remembers keys normalised with NFC (a decomposed 'ç' and the composed one)",
        "accept_does_not_confuse_keys",
        """
        import unicodedata
        def accept(seen, key, payload):
            key = unicodedata.normalize("NFC", key)
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        # list(set) follows the hash seed: caught whichever order this process writes.
        "fingerprint with default=list for sets (a set and the list of its items alike)",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=list)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default=repr (Decimal('19.90') and the text \"Decimal('19.90')\")",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              default=repr)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "conflict with the payload in a note (add_note: a card number in the logged traceback)",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                exc = IdempotencyConflict(f"key {key!r} was first used with another payload")
                exc.add_note(f"payload now: {payload!r}")
                raise exc
            return False
    """,
    ),
    (
        "ex01",
        "a conflict logged with its payload before the raise (logging's warning)",
        "conflict_message_keeps_the_payload_out",
        """
        import logging


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                logging.getLogger("ex01").warning("conflict on %s: %r", key, payload)
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "a conflict printed with its payload before the raise",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                print(f"conflict on {key}: {payload}")
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "conflict chained from an error that shows the payload (raise ... from ValueError)",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                cause = ValueError(f"payload changed to {payload!r}")
                raise IdempotencyConflict(f"key {key!r} reused with another payload") from cause
            return False
    """,
    ),
    (
        "ex01",
        "accept cuts the line end off the key (keys read from lines: '...:v1\\n' and '...:v1')",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = key.rstrip("\\r\\n")
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept strips a byte-order mark from the key (keys read from a CSV)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = key.lstrip("\\ufeff")
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept URL-decodes the key, from an HTTP header ('INV%207' and 'INV 7' one entry)",
        "accept_does_not_confuse_keys",
        """
        from urllib.parse import unquote
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = unquote(key)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept drops zero-width spaces from the key ('INV\\u200b7' and 'INV7' one entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = key.replace("\\u200b", "")
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept escapes newlines in the key as '\\n', for one-line logs",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            key = key.replace("\\n", "\\\\n")
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with a trailing '\\r' cut off each part (a CSV written with '\\r\\n')",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            source, entity_id, action = (str(p).rstrip("\\r") for p in (source, entity_id, action))
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with newlines in a part escaped as '\\n', for one-line logs ('INV\\n7' twice)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).replace("\\n", "\\\\n") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with blanks in a part percent-encoded ('INV 7' and 'INV%207' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(p).replace(" ", "%20") for p in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with byte-order marks and zero-width spaces dropped from the parts",
        "key_names_the_intent",
        """
        def _clean(part):
            return str(part).replace("\\ufeff", "").replace("\\u200b", "")
        def operation_key(source, entity_id, action, version=1):
            return f"{_clean(source)}:{_clean(entity_id)}:{_clean(action)}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint drops the fields that are an empty list or dict",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            full = {k: v for k, v in payload.items() if v != [] and v != {}}
            text = json.dumps(full, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of floats rounded to 12 decimals (to hide float noise)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return round(v, 12) if isinstance(v, float) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of floats rounded to 9 decimals (to hide float noise)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return round(v, 9) if isinstance(v, float) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept remembers keys cut to 1024 characters (a wider key column)",
        "accept_does_not_confuse_keys",
        """
        MAX_KEY = 1024

        def accept(seen, key, payload):
            key = key[:MAX_KEY]
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept shortens a long key to its first and last 500 characters",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            if len(key) > 1003:
                key = key[:500] + "..." + key[-500:]
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key cut to 1024 characters (a wider key column)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}"[:1024]
    """,
    ),
    (
        "ex01",
        "key with the entity id cut to 2048 bytes of UTF-8",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            entity = str(entity_id).encode("utf-8")[:2048].decode("utf-8", "ignore")
            return f"{source}:{entity}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with '.0' taken off the entity id (a float id read through pandas)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).removesuffix('.0')}:{action}:v{version}"
    """,
    ),
    (
        # Ids "normalised" through float() so that 42, 42.0 and "42" share a key: past
        # 2**53 a float holds every other int only, and two invoices share a key.
        "ex01",
        "key with a numeric id made int(float(id)) (ids past 2**53 share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, (int, float)) and float(entity_id).is_integer():
                entity_id = int(float(entity_id))
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with `entity_id or ''` (the id 0 and no id share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id or ''}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint of the first 65,536 characters of the JSON",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text[:65_536].encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of each list's first 1000 items",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v[:1000]]
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of floats written with 15 significant digits (0.1 + 0.2 made 0.3)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return float(f"{v:.15g}") if isinstance(v, float) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept takes any error reading `seen` for a new key (except Exception)",
        "unencodable_payload_is_not_new_every_time",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            try:
                known = seen[key]
            except Exception:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept logs a failed write to `seen` and answers True all the same",
        "unencodable_payload_is_not_new_every_time",
        """
        import logging

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                try:
                    seen[key] = fp
                except Exception:
                    logging.getLogger("ex01").warning("could not store %s", key)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint leaves out the fields that are False (a serializer's exclude_defaults)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            clean = {k: v for k, v in payload.items() if v is not False}
            text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint leaves out the fields that are 0 (a default amount)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            clean = {k: v for k, v in payload.items() if isinstance(v, bool) or v != 0}
            text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint leaves out the fields that are '' (an empty text is no value)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            clean = {k: v for k, v in payload.items() if v != ""}
            text = json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload with its field names lowercased ('Note' and 'note' alike)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {str(k).lower(): norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload with camelCase field names made snake_case",
        "conflict_on_any_field",
        """
        import re
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {re.sub(r"(?<!^)(?=[A-Z])", "_", str(k)).lower(): norm(x)
                            for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload with blanks stripped from its field names",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {str(k).strip(): norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of ints past 2**53 made floats (for JavaScript clients)",
        "conflict_on_any_field",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return float(v) if type(v) is int and abs(v) > 2**53 else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of ints past 2**53 written as text (for JavaScript clients)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return str(v) if type(v) is int and abs(v) >= 2**53 else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept strips the quotes around the key (a quoted Idempotency-Key header)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.strip('"')
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the quotes around the entity id stripped (an id read from a CSV field)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).strip(chr(34))}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint that sorts the lists of strings (tags have no order)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    items = [norm(x) for x in v]
                    return sorted(items) if all(isinstance(x, str) for x in items) else items
                return v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with the texts' '\\r\\n' line ends made '\\n'",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def norm(v):
                if isinstance(v, dict):
                    return {k: norm(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [norm(x) for x in v]
                return v.replace("\\r\\n", "\\n") if isinstance(v, str) else v
            text = json.dumps(norm(payload), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with a UUID entity id written as uuid.hex (the UUID and its text get two keys)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        import uuid
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, uuid.UUID):
                entity_id = entity_id.hex
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A separator "kept out" of the parts by stripping it off their ends.
        "ex01",
        "key with ':' stripped off the ends of the parts ('INV-7:' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = [str(part).strip(":") for part in (source, entity_id, action)]
            return f"{parts[0]}:{parts[1]}:{parts[2]}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the source cut to 32 characters (the width of a source column)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source[:32]}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the action cut to 64 characters",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action[:64]}:v{version}"
    """,
    ),
    (
        # "The order of the lines does not matter": sorted by their JSON, lines of dicts only.
        "ex01",
        "fingerprint that sorts the lists of dicts (an order's lines) by their JSON",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def canon(value):
                if isinstance(value, dict):
                    return {k: canon(v) for k, v in value.items()}
                if isinstance(value, list):
                    items = [canon(v) for v in value]
                    if items and all(isinstance(v, dict) for v in items):
                        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
                    return items
                return value
            canonical = canon(payload)
            text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint drops the payload's 'idempotency_key' field (the key is no payload)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            payload = {k: v for k, v in payload.items() if k != "idempotency_key"}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint skips correlation ids, nonces and signatures (they change per send)",
        "fingerprint_matches_the_contract",
        """
        TRANSPORT = {"correlation_id", "nonce", "signature", "hmac"}
        def payload_fingerprint(payload):
            payload = {k: v for k, v in payload.items() if k not in TRANSPORT}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint strips blanks around the top-level texts only (form fields)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            payload = {k: v.strip() if isinstance(v, str) else v for k, v in payload.items()}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint lowercases the 'email' field (e-mail addresses ignore case)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            if isinstance(payload.get("email"), str):
                payload = {**payload, "email": payload["email"].lower()}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint of the payload's first 64 fields (in key order)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            payload = dict(sorted(payload.items())[:64])
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing bytes as their UTF-8 text (b'INV-7' and 'INV-7' alike)",
        "fingerprint_tells_payloads_apart",
        """
        def _encode(value):
            if isinstance(value, bytes):
                return value.decode("utf-8")
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing a Decimal as its cents (Decimal('19.90') made 1990)",
        "fingerprint_tells_payloads_apart",
        """
        from decimal import Decimal
        def _encode(value):
            if isinstance(value, Decimal):
                return int(value * 100)
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing a datetime as its timestamp() (its Unix time)",
        "fingerprint_tells_payloads_apart",
        """
        from datetime import datetime
        def _encode(value):
            if isinstance(value, datetime):
                return value.timestamp()
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing a datetime as its ISO text with the zone dropped",
        "fingerprint_tells_payloads_apart",
        """
        from datetime import datetime
        def _encode(value):
            if isinstance(value, datetime):
                return value.replace(tzinfo=None).isoformat()
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # The client's own key, carried in the payload, "preferred" over the argument.
        "ex01",
        "accept takes the key from the payload's 'idempotency_key' field when it has one",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = payload.get("idempotency_key") or key
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the source's blanks made '-', a slug ('shop eu' and 'shop-eu' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source.replace(' ', '-')}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with '_' in the action made '-' ('charge_full' and 'charge-full' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action.replace('_', '-')}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with '#' stripped off the entity id ('#42' and 42 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).lstrip('#')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the prefix 'INV-' taken off the entity id ('INV-42' and '42' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).removeprefix('INV-')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint skips the transport's fields (headers, user agent, client ip)",
        "fingerprint_matches_the_contract",
        """
        TRANSPORT = {"headers", "user_agent", "client_ip"}
        def payload_fingerprint(payload):
            payload = {k: v for k, v in payload.items() if k not in TRANSPORT}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint that sorts the lists of floats (rates have no order)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def canon(value):
                if isinstance(value, dict):
                    return {k: canon(v) for k, v in value.items()}
                if isinstance(value, list):
                    items = [canon(v) for v in value]
                    if items and all(isinstance(v, float) for v in items):
                        return sorted(items)
                    return items
                return value
            canonical = canon(payload)
            text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with the repeats dropped from lists of strings (a tag given twice)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            def canon(value):
                if isinstance(value, dict):
                    return {k: canon(v) for k, v in value.items()}
                if isinstance(value, list):
                    items = [canon(v) for v in value]
                    if all(isinstance(v, str) for v in items):
                        return list(dict.fromkeys(items))
                    return items
                return value
            canonical = canon(payload)
            text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # A key checked for its shape: an id with ':' (operation_key allows it) gives a key
        # of five parts, and accept raises at every delivery: the work never runs.
        "ex01",
        "accept splits the key into its four parts before storing it",
        "accept_new_then_repeat",
        """
        def accept(seen, key, payload):
            source, entity, action, version = key.split(":")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} ({source}/{entity}/{action}) reused")
            return False
    """,
    ),
    (
        # The same split, to log the action, after the write: the first delivery stores
        # the key and raises, and its retry is skipped as a repeat of work never done.
        "ex01",
        "accept splits the key to log it after storing (an id with ':' raises past the write)",
        "accept_new_then_repeat",
        """
        import logging
        log = logging.getLogger("ex01")

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                source, entity, action, version = key.split(":")
                log.info("new %s of %s %s", action, source, entity)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} reused with another payload")
            return False
    """,
    ),
    (
        # Two writes to `seen`: a worker reading between them finds the key with no fingerprint
        # and runs the work again (or a crash leaves the placeholder for good).
        "ex01",
        "accept writes a None placeholder, then the fingerprint (two writes to `seen`)",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = None  # reserve the key first
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept reserves the key with '' before fingerprinting, undone when json.dumps raises",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            if key in seen:
                if seen[key] != payload_fingerprint(payload):
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
            seen[key] = ""
            try:
                fp = payload_fingerprint(payload)
            except Exception:
                del seen[key]
                raise
            seen[key] = fp
            return True
    """,
    ),
    (
        "ex01",
        "accept refreshes a repeat with seen.pop(key) and a re-insert (LRU order)",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            seen[key] = seen.pop(key)  # most recent last
            return False
    """,
    ),
    (
        "ex01",
        "accept writes the new fingerprint first and puts the old one back on a conflict",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            seen[key] = fp
            if known is None:
                return True
            if known != fp:
                seen[key] = known
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept pops the entry to compare it, then puts it back",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.pop(key, None)
            if known is None:
                seen[key] = fp
                return True
            seen[key] = known
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept writes a short fingerprint first, then the whole one",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp[:12]
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept marks the key 'pending' with update(), then stores the fingerprint",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in seen:
                seen.update({key: "pending"})
                seen.update({key: fp})
                return True
            if seen[key] != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        # A new operation logged with its payload: the card number sits in the log as long as
        # a conflict's would.
        "ex01",
        "accept logs every new operation with its payload (logger.info)",
        "conflict_message_keeps_the_payload_out",
        """
        import logging

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                logging.getLogger("ops").info("new operation %s: %r", key, payload)
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept prints a skipped repeat with its payload",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            print(f"skipping repeat {key}: {payload}")
            return False
    """,
    ),
    (
        # The message shows fp[:12], so the comparison does too: another payload whose
        # fingerprint starts alike is skipped as a repeat.
        "ex01",
        "accept compares only the first 8 hex digits of the fingerprints",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known[:8] != fp[:8]:
                raise IdempotencyConflict(f"key {key!r}: {known[:8]} != {fp[:8]}")
            return False
    """,
    ),
    (
        "ex01",
        "accept calls an emptied payload a repeat (`if payload and known != fp`)",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if payload and known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        # The key written into the caller's dict "for downstream": the retry loop sends that
        # dict again, now another payload, and its retry is refused as a conflict.
        "ex01",
        "accept stamps the key into the caller's payload",
        "accept_leaves_the_payload_alone",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                payload["idempotency_key"] = key
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept stamps the fingerprint into the caller's payload (setdefault)",
        "accept_leaves_the_payload_alone",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                payload.setdefault("_fingerprint", fp)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        # A fast path on the last key and fingerprint seen: it answers for a store that holds
        # the key with another payload.
        "ex01",
        "accept answers a repeat from a module-level memory of the last key and fingerprint",
        "accept_remembers_only_in_seen",
        """
        _last = {}

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if _last.get("key") == key and _last.get("fp") == fp and key in seen:
                return False
            known = seen.get(key)
            _last.update(key=key, fp=fp)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept falls back to a sha256 of repr(payload) when json.dumps cannot encode it",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except TypeError:
                fp = hashlib.sha256(repr(payload).encode("utf-8")).hexdigest()
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept falls back to json.dumps(default=str) when the payload holds a datetime",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except TypeError:
                text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
                fp = hashlib.sha256(text.encode("utf-8")).hexdigest()
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept reports a payload json.dumps cannot encode as an IdempotencyConflict",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except (TypeError, ValueError) as exc:
                raise IdempotencyConflict(f"key {key!r}: no fingerprint ({exc})") from exc
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept fingerprints the payload without its private '_' fields (a store's _id, __v)",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            kept = {k: v for k, v in payload.items() if not str(k).startswith("_")}
            fp = payload_fingerprint(kept)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept fingerprints the payload without its request and trace ids and timestamps",
        "conflict_on_any_field",
        """
        VOLATILE = {"request_id", "trace_id", "timestamp", "created_at", "correlation_id"}

        def accept(seen, key, payload):
            fp = payload_fingerprint({k: v for k, v in payload.items() if k not in VOLATILE})
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept fingerprints only an event envelope's 'data' (a charge and a refund alike)",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            body = payload.get("data", payload)
            fp = payload_fingerprint(body if isinstance(body, dict) else payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept calls a key stored with an empty fingerprint a repeat (`if known and known != fp`)",
        "conflict_on_any_field",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key not in seen:
                seen[key] = fp
                return True
            known = seen[key]
            if known and known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept through one module-level Deduper that keeps the fingerprint in self.fp",
        "accept_keeps_each_call_to_itself",
        """
        class _Deduper:
            def __init__(self):
                self.fp = None

            def check(self, seen, key, payload):
                self.fp = payload_fingerprint(payload)
                if key not in seen:
                    seen[key] = self.fp
                    return True
                if seen[key] != self.fp:
                    raise IdempotencyConflict(f"key {key!r} came back with another payload")
                return False


        _DEDUPER = _Deduper()


        def accept(seen, key, payload):
            return _DEDUPER.check(seen, key, payload)
    """,
    ),
    (
        "ex01",
        "accept keeps the current key in a module-level dict for its conflict message",
        "conflict_names_its_own_key_between_calls",
        """
        _current = {}

        def accept(seen, key, payload):
            _current["key"] = key
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {_current['key']!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept logs new payloads through its own StreamHandler (made at import, propagate off)",
        "conflict_message_keeps_the_payload_out",
        """
        import logging
        import sys

        log = logging.getLogger("dedup.audit")
        log.addHandler(logging.StreamHandler(sys.stderr))
        log.setLevel(logging.INFO)
        log.propagate = False

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                log.info("new %s %s", key, payload)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept appends every new payload to an audit file",
        "conflict_message_keeps_the_payload_out",
        """
        import os
        import tempfile

        AUDIT = os.path.join(tempfile.gettempdir(), "labkit-zoo-ex01-audit.log")

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                with open(AUDIT, "a", encoding="utf-8") as audit:
                    audit.write(f"{key} {json.dumps(payload)}\\n")
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key made with .format() on text that already holds the id (an id '{action}' substituted)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            head = f"{source}:{entity_id}"
            return (head + ":{action}:v{version}").format(action=action, version=version)
    """,
    ),
    (
        "ex01",
        "key with abs() of an int entity id (-7 and 7 share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, int):
                entity_id = abs(entity_id)
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with '-' stripped off the left of the entity id ('-7' and '7' share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).lstrip('-')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint with the field names of nested dicts made text first ('10' sorted before '9')",
        "fingerprint_matches_the_contract",
        """
        def _names_as_text(value):
            if isinstance(value, dict):
                return {str(k): _names_as_text(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_names_as_text(v) for v in value]
            return value

        def payload_fingerprint(payload):
            text = json.dumps(
                _names_as_text(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "a float entity id written with 6 decimals (f'{id:.6f}': 0.1 + 0.2 and 0.3 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, float):
                entity_id = f"{entity_id:.6f}"
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "a float entity id written with '%.10g' (1234567.1234567 and 1234567.1234568 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, float):
                entity_id = "%.10g" % entity_id
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "a float entity id rounded to 6 decimals (round(id, 6))",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, float):
                entity_id = round(entity_id, 6)
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with backslashes in the id made slashes (a Windows-style id and its twin)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            entity_id = str(entity_id).replace("\\\\", "/")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with single quotes stripped off the entity id (an id pasted from SQL output)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).strip(chr(39))}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with runs of dashes in the id collapsed to one ('INV--7' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        import re

        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{re.sub('-+', '-', str(entity_id))}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with abs(version) (version -2 and version 2 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{abs(version)}"
    """,
    ),
    (
        "ex01",
        "key with no-break spaces in the id made blanks (an id copied from a document)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).replace(chr(160), ' ')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with en dashes in the id made '-' ('INV–7' and 'INV-7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).replace(chr(8211), '-')}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with curly apostrophes in the id made straight ones",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).replace(chr(8217), chr(39))}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint with allow_nan=False (a payload holding NaN refused)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with NaN and infinities made null",
        "fingerprint_matches_the_contract",
        """
        import math

        def _finite(value):
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: _finite(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_finite(v) for v in value]
            return value

        def payload_fingerprint(payload):
            text = json.dumps(
                _finite(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with -0.0 made 0.0",
        "fingerprint_matches_the_contract",
        """
        def _no_negative_zero(value):
            if isinstance(value, float) and value == 0:
                return 0.0
            if isinstance(value, dict):
                return {k: _no_negative_zero(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_no_negative_zero(v) for v in value]
            return value

        def payload_fingerprint(payload):
            text = json.dumps(
                _no_negative_zero(payload),
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with the top-level field names made text first ('10' sorted before '9')",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            payload = {str(k): v for k, v in payload.items()}
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing a UUID as its text (a UUID and its text alike)",
        "fingerprint_tells_payloads_apart",
        """
        import uuid

        def _uuid_text(value):
            if isinstance(value, uuid.UUID):
                return str(value)
            raise TypeError(f"cannot encode {type(value).__name__}")

        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                default=_uuid_text,
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default= writing an Enum member as its value",
        "fingerprint_tells_payloads_apart",
        """
        import enum

        def _enum_value(value):
            if isinstance(value, enum.Enum):
                return value.value
            raise TypeError(f"cannot encode {type(value).__name__}")

        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                default=_enum_value,
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept makes the tabs in the key blanks, for one-line logs (a tab and a blank one entry)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.replace("\\t", " ")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept makes the no-break spaces in the key blanks (a key copied from a document)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.replace("\\u00a0", " ")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept answers repeats from a cache of each store's keys, by id(seen)",
        "accept_remembers_only_in_seen",
        """
        _KNOWN = {}

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if _KNOWN.get((id(seen), key)) == fp:
                return False
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                _KNOWN[(id(seen), key)] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            _KNOWN[(id(seen), key)] = fp
            return False
    """,
    ),
    (
        "ex01",
        "key joined from the parts that are not empty (an empty id and an empty action swapped)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = filter(None, (source, str(entity_id), action, f"v{version}"))
            return ":".join(parts)
    """,
    ),
    (
        "ex01",
        "fingerprint falls back to unsorted JSON when the field names cannot be sorted",
        "fingerprint_is_canonical",
        """
        def payload_fingerprint(payload):
            try:
                text = json.dumps(
                    payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
            except TypeError:  # an int and a text field name: keep the order given
                text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint with default=vars (a dataclass and the dict of its fields alike)",
        "fingerprint_tells_payloads_apart",
        """
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=vars
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with NUL characters dropped (PostgreSQL's text columns refuse them)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            key = f"{source}:{entity_id}:{action}:v{version}"
            return key.replace("\\x00", "")
    """,
    ),
    (
        "ex01",
        "accept drops NUL characters from the key before storing it (for PostgreSQL)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.replace("\\x00", "")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "key with the blanks in the action made '_' ('charge card' and 'charge_card' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action.replace(' ', '_')}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with the version written as a float ('{:g}': v1234567 and v1234568 share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{float(version):g}"
    """,
    ),
    (
        "ex01",
        "key with an int id wrapped to 64 bits (ctypes.c_int64: 42 + 2**64 and 42 share a key)",
        "key_names_the_intent",
        """
        import ctypes
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, int):
                entity_id = ctypes.c_int64(entity_id).value
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "key with int ids past 2**31 - 1 taken modulo 2**31 (a 32-bit id column)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, int) and entity_id > 2**31 - 1:
                entity_id = entity_id % 2**31
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "accept fingerprints a payload holding itself as 'unencodable' (ValueError swallowed)",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except (ValueError, RecursionError):
                fp = "unencodable"
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of integral floats past 1e15 made ints (1e16 and 10**16 alike)",
        "conflict_on_any_field",
        """
        def _ints(value):
            if isinstance(value, float) and value.is_integer() and abs(value) > 1e15:
                return int(value)
            if isinstance(value, dict):
                return {k: _ints(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_ints(v) for v in value]
            return value

        def payload_fingerprint(payload):
            payload = _ints(payload)
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with the quotes in the id doubled, to be safe in SQL (d''Avila in the logs)",
        "key_shows_every_part",
        """
        def operation_key(source, entity_id, action, version=1):
            entity_id = str(entity_id).replace("'", "''")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "ex01",
        "fingerprint of an empty payload made sha256(b'') (its JSON '{}' skipped)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            if not payload:
                return hashlib.sha256(b"").hexdigest()
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # An in-flight guard kept beside the stores: the same key on another tenant's store,
        # sent while the first call runs, is answered from the first call.
        "ex01",
        "accept answers False for a key another thread is accepting (a module-level in-flight set)",
        "accept_keeps_each_call_to_itself",
        """
        import threading
        _inflight = set()
        _guard = threading.Lock()

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            with _guard:
                if key in _inflight:
                    return False
                _inflight.add(key)
            try:
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
            finally:
                with _guard:
                    _inflight.discard(key)
    """,
    ),
    (
        "ex01",
        "accept refuses a key another thread is accepting (an in-flight guard raises a conflict)",
        "accept_keeps_each_call_to_itself",
        """
        import threading
        _inflight = set()
        _guard = threading.Lock()

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            with _guard:
                if key in _inflight:
                    raise IdempotencyConflict(f"key {key!r} is being accepted by another call")
                _inflight.add(key)
            try:
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
            finally:
                with _guard:
                    _inflight.discard(key)
    """,
    ),
    (
        # A width read as text at every call is no number in the code.
        "ex01",
        "fingerprint of the JSON cut to a width read from the environment ('1048576', as text)",
        "conflict_on_any_field",
        """
        import os

        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            text = text[: int(os.environ.get("FP_MAX_CHARS", "1048576"))]
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key cut to a width read from the environment (KEY_MAX_CHARS, '100000' as text)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        import os

        def operation_key(source, entity_id, action, version=1):
            key = f"{source}:{entity_id}:{action}:v{version}"
            return key[: int(os.getenv("KEY_MAX_CHARS", "100000"))]
    """,
    ),
    (
        "ex01",
        "accept remembers keys cut to a width read from the environment ('100000' as text)",
        "accept_does_not_confuse_keys",
        """
        import os

        def accept(seen, key, payload):
            key = key[: int(os.getenv("KEY_MAX_CHARS", "100000"))]
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "accept strips trailing NULs off the key (rstrip('\\x00'), a C string's end)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.rstrip("\\x00")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of the JSON encoded with errors='surrogatepass' (a lone surrogate hashed)",
        "a_payload_json_cannot_hold_raises",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept falls back to an ASCII-escaped fingerprint when UTF-8 cannot encode the payload",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except UnicodeEncodeError:
                text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
                fp = hashlib.sha256(text.encode("utf-8")).hexdigest()
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        # Long keys "shortened" with the built-in hash(): salted per process, so a worker
        # restarted after a deploy makes another key for the same long intent.
        "ex01",
        "key of a long intent shortened with hash() (another key in every process)",
        "long_inputs_are_the_same_in_another_process",
        """
        def operation_key(source, entity_id, action, version=1):
            key = f"{source}:{entity_id}:{action}:v{version}"
            if len(key) > 200:
                key = key[:120] + "#" + format(hash(key) & 0xFFFFFFFFFFFFFFFF, "x")
            return key
    """,
    ),
    (
        "ex01",
        "key of a long intent cut and made unique with a uuid4() suffix",
        "long_inputs_are_the_same_in_another_process",
        """
        import uuid

        def operation_key(source, entity_id, action, version=1):
            key = f"{source}:{entity_id}:{action}:v{version}"
            if len(key) > 250:
                key = key[:200] + "#" + uuid.uuid4().hex
            return key
    """,
    ),
    (
        "ex01",
        "fingerprint of a long payload made with hash() (sha256 only for short ones)",
        "long_inputs_are_the_same_in_another_process",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            if len(text) > 50_000:
                return format(hash(text) & (2**64 - 1), "016x") * 4
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept stores a long key as its head and hash() (another entry in every process)",
        "long_inputs_are_the_same_in_another_process",
        """
        def accept(seen, key, payload):
            if len(key) > 255:
                key = key[:200] + "#" + str(hash(key))
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "ex01",
        "fingerprint of a long payload with sha1 (sha256 only below 100,000 characters)",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            digest = hashlib.sha256 if len(text) < 100_000 else hashlib.sha1
            return digest(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "accept logs each new key with the payload in extra= (a JSON log writes it out)",
        "conflict_message_keeps_the_payload_out",
        """
        import logging
        log = logging.getLogger("ex01.accept")

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                log.info("new operation %s", key, extra={"payload": payload})
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        # The notebook's kernel and a worker's program have two names: two keys for one intent.
        "ex01",
        "key with the program's name (sys.argv[0]) read once at import, to tell apps apart",
        "key_is_the_same_on_another_machine",
        """
        import os
        import sys
        _APP = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "app"

        def operation_key(source, entity_id, action, version=1):
            return f"{_APP}:{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # rstrip() takes characters, not a suffix: the zeros before the '.' go as well.
        "ex01",
        "key with '.0' stripped off a float id by rstrip('.0') (10.0 and 1.0 share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            eid = str(entity_id)
            if isinstance(entity_id, float):
                eid = eid.rstrip(".0")
            return f"{source}:{eid}:{action}:v{version}"
    """,
    ),
    (
        # A buffer kept to spare an allocation: another thread truncates it mid-payload.
        "ex01",
        "fingerprint written into one module-level io.StringIO (threads mix their JSON)",
        "accept_keeps_each_call_to_itself",
        """
        import io
        _BUFFER = io.StringIO()

        def payload_fingerprint(payload):
            _BUFFER.seek(0)
            _BUFFER.truncate()
            json.dump(payload, _BUFFER, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(_BUFFER.getvalue().encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "fingerprint joined from a module-level list of JSON chunks (threads mix their JSON)",
        "accept_keeps_each_call_to_itself",
        """
        _ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        _CHUNKS = []

        def payload_fingerprint(payload):
            _CHUNKS.clear()
            _CHUNKS.extend(_ENCODER.iterencode(payload))
            return hashlib.sha256("".join(_CHUNKS).encode("utf-8")).hexdigest()
    """,
    ),
    (
        "ex01",
        "key with '/' stripped off the ends of the source ('shop/' and 'shop' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source.strip('/')}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # "Against runaway recursion": what lies past some depth hashed as '...', so two
        # payloads apart only down there share a fingerprint and the second is a repeat.
        "ex01",
        "fingerprint of the payload cut at depth 20 (what lies deeper written as '...')",
        "conflict_on_any_field",
        """
        MAX_DEPTH = 20


        def _cut(value, depth=0):
            if depth > MAX_DEPTH:
                return "..."
            if isinstance(value, dict):
                return {k: _cut(v, depth + 1) for k, v in value.items()}
            if isinstance(value, list):
                return [_cut(v, depth + 1) for v in value]
            return value


        def payload_fingerprint(payload):
            text = json.dumps(
                _cut(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # "Never hang": a lock busy past a second answers False without reading `seen`,
        # so another worker's new operation is skipped as a repeat and never done.
        "ex01",
        "accept waits 1 s for a module lock, then answers False (a repeat) without `seen`",
        "accept_keeps_each_call_to_itself",
        """
        import threading

        _lock = threading.Lock()


        def accept(seen, key, payload):
            if not _lock.acquire(timeout=1):
                return False  # busy: take it for a repeat rather than hang
            try:
                fp = payload_fingerprint(payload)
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} came back with another payload")
                return False
            finally:
                _lock.release()
    """,
    ),
    (
        # The other way round: a busy lock answers True, and a repeat is done again.
        "ex01",
        "accept waits 2 s for a module lock, then answers True (do the work) without `seen`",
        "accept_keeps_each_call_to_itself",
        """
        import threading

        _lock = threading.RLock()
        _accept = accept


        def accept(seen, key, payload):
            if not _lock.acquire(timeout=2.0):
                return True  # better twice than never
            try:
                return _accept(seen, key, payload)
            finally:
                _lock.release()
    """,
    ),
    (
        # An id read from a web page, "cleaned" with html.unescape: 'R&amp;D-7' is another
        # id than 'R&D-7', and both get one key (the second intent skipped as a repeat).
        "ex01",
        "key with HTML entities in the id decoded (html.unescape: 'R&amp;D-7' and 'R&D-7')",
        "key_names_the_intent",
        """
        import html
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{html.unescape(str(entity_id))}:{action}:v{version}"
    """,
    ),
    (
        # Invisible characters dropped from an id copied from a document: the soft hyphen
        # is part of the id as given, so 'INV\xad7' and 'INV7' get one key.
        "ex01",
        "key with soft hyphens dropped from the id ('INV\\xad7' and 'INV7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).replace(chr(0xAD), '')}:{action}:v{version}"
    """,
    ),
    (
        # An id taken from the end of a sentence, its dot stripped: 'INV-7.' is another id.
        "ex01",
        "key with trailing dots stripped off the id (rstrip('.'): 'INV-7.' and 'INV-7')",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{str(entity_id).rstrip('.')}:{action}:v{version}"
    """,
    ),
    (
        # JSON has no bytes: written as their hex digits, b'INV-7' is the text '494e562d37'.
        "ex01",
        "fingerprint with default= writing bytes as their hex digits (b'INV-7' and '494e562d37')",
        "fingerprint_tells_payloads_apart",
        """
        def _encode(value):
            if isinstance(value, (bytes, bytearray)):
                return value.hex()
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # The usual way to put bytes in JSON, base64: b'INV-7' becomes the text 'SU5WLTc='.
        "ex01",
        "fingerprint with default= writing bytes as base64 text (b'INV-7' and 'SU5WLTc=')",
        "fingerprint_tells_payloads_apart",
        """
        import base64
        def _encode(value):
            if isinstance(value, (bytes, bytearray)):
                return base64.b64encode(value).decode("ascii")
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        def payload_fingerprint(payload):
            text = json.dumps(
                payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # A cron job keyed by its run's instant, "made compact" as Unix time: a naive
        # datetime is read in the worker's zone.
        "ex01",
        "a naive datetime id written as int(dt.timestamp()) (read in the worker's time zone)",
        "key_is_the_same_on_another_machine",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = int(entity_id.timestamp())
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # "Always UTC in keys": astimezone() takes a naive datetime for the worker's local time.
        "ex01",
        "a datetime id written in UTC with astimezone() (a naive one read in the worker's zone)",
        "key_is_the_same_on_another_machine",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.astimezone(_dt.timezone.utc).isoformat()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A daily job's key "by day": a second run the same day, another intent, is skipped.
        "ex01",
        'a datetime id written as its date (two runs on one day share a key)',
        "key_names_the_intent",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.date().isoformat()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A readable timestamp in the key: two instants within one second share it.
        "ex01",
        'a datetime id written to the second with strftime (its microseconds dropped)',
        "key_names_the_intent",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.strftime("%Y-%m-%dT%H:%M:%S")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A zone "normalised away": 02:30 UTC and 02:30 in Tokyo are two instants, one key.
        "ex01",
        'an aware datetime id written with its zone dropped (replace(tzinfo=None))',
        "key_names_the_intent",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.replace(tzinfo=None).isoformat()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A NUMERIC column's Decimal "tidied" of its trailing zeros: the int's invoice
        # gets a second key.
        "ex01",
        "a Decimal id normalised (Decimal.normalize(): 4200 written '4.2E+3')",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        from decimal import Decimal
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, Decimal):
                entity_id = entity_id.normalize()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A weekly bucket in the key: a daily job's second day is skipped as a repeat.
        "ex01",
        "a date id written as its week (strftime('%Y-W%W'): two days of one week share a key)",
        "key_names_the_intent",
        """
        import datetime as _dt
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.date) and not isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.strftime("%Y-W%W")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # A NUMERIC id made an integer for an integer column: two entities, one key.
        "ex01",
        "a Decimal id rounded with quantize(Decimal(1)) (Decimal('42.4') and 42 share a key)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        from decimal import Decimal
        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, Decimal):
                entity_id = entity_id.quantize(Decimal(1))
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # Tabs expanded as an editor does, for aligned logs.
        "ex01",
        "key with the tabs in the id made four blanks ('INV<tab>7' and 'INV    7' share a key)",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            entity_id = str(entity_id).replace("\\t", "    ")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        # The same tab expansion applied to the key accept stores.
        "ex01",
        "accept remembers keys with their tabs made four blanks",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            key = key.replace("\\t", "    ")
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with {known[:12]}")
            return False
    """,
    ),
    (
        # A one-line log message: the key's run of blanks collapsed, so it is not the key.
        "ex01",
        "conflict message with the key's blanks collapsed to one line (' '.join(key.split()))",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                shown = " ".join(key.split())
                raise IdempotencyConflict(f"key {shown} was first used with {known[:12]}")
            return False
    """,
    ),
    (
        # The key "tidied" for the message only.
        "ex01",
        "conflict message with the key stripped (blanks around it dropped)",
        "conflict_names_the_key",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key.strip()} was first used with {known[:12]}")
            return False
    """,
    ),
    (
        # A UUID's .int or a 128-bit id "made safe" as text: 2**64 and '18446744073709551616' alike.
        "ex01",
        "fingerprint of ints past 2**63 written as text (too wide for a BIGINT column)",
        "fingerprint_matches_the_contract",
        """
        def _wide_as_text(value):
            if isinstance(value, dict):
                return {k: _wide_as_text(v) for k, v in value.items()}
            if isinstance(value, list):
                return [_wide_as_text(v) for v in value]
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63:
                return str(value)
            return value
        def payload_fingerprint(payload):
            text = json.dumps(
                _wide_as_text(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        # "Nothing to fingerprint": the store holds '' where a worker compares
        # payload_fingerprint({}).
        "ex01",
        "accept stores '' for an empty payload instead of its fingerprint",
        "seen_maps_keys_to_fingerprints",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload) if payload else ""
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with {known[:12]}")
            return False
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "key of a long intent shortened with hash() (another key in every process)": (
        "the same key for an entity id of 70,002 characters"
    ),
    "key of a long intent cut and made unique with a uuid4() suffix": (
        "the same key for an entity id of 70,002 characters"
    ),
    "fingerprint of a long payload made with hash() (sha256 only for short ones)": (
        "the same fingerprint for a payload with a note of 70,002 characters"
    ),
    "accept stores a long key as its head and hash() (another entry in every process)": (
        "the same answer for the retry of a key of 70,002 characters"
    ),
    "fingerprint of a long payload with sha1 (sha256 only below 100,000 characters)": (
        "for a payload with a note of 100,002 characters"
    ),
    "accept logs each new key with the payload in extra= (a JSON log writes it out)": (
        "nothing of the payload printed or logged by accept for a new key"
    ),
    "accept answers False for a key another thread is accepting (a module-level in-flight set)": (
        "by another thread to another tenant's store"
    ),
    "accept refuses a key another thread is accepting (an in-flight guard raises a conflict)": (
        "by another thread to another tenant's store"
    ),
    "fingerprint of the JSON cut to a width read from the environment ('1048576', as text)": (
        "a note of 1,048,578 characters"
    ),
    "key cut to a width read from the environment (KEY_MAX_CHARS, '100000' as text)": (
        "two entity ids of 100,002 characters"
    ),
    "accept remembers keys cut to a width read from the environment ('100000' as text)": (
        "two different keys of 100,020 characters"
    ),
    "accept strips trailing NULs off the key (rstrip('\\x00'), a C string's end)": (
        "'billing:7:charge:v1\\x00'"
    ),
    "fingerprint of the JSON encoded with errors='surrogatepass' (a lone surrogate hashed)": (
        "UTF-8 cannot encode a lone surrogate"
    ),
    "accept falls back to an ASCII-escaped fingerprint when UTF-8 cannot encode the payload": (
        "a payload holding a lone surrogate"
    ),
    "accept falls back to a sha256 of repr(payload) when json.dumps cannot encode it": (
        "from accept for a new key with a payload holding"
    ),
    "accept falls back to json.dumps(default=str) when the payload holds a datetime": (
        "from accept for a new key with a payload holding"
    ),
    "accept reports a payload json.dumps cannot encode as an IdempotencyConflict": (
        "and nothing stored"
    ),
    "accept fingerprints the payload without its private '_' fields (a store's _id, __v)": (
        "'_id': 'a'"
    ),
    "accept fingerprints the payload without its request and trace ids and timestamps": (
        "'request_id': 'a'"
    ),
    "accept fingerprints only an event envelope's 'data' (a charge and a refund alike)": (
        "'type': 'charge'"
    ),
    "accept calls a key stored with an empty fingerprint a repeat (`if known and known != fp`)": (
        "when `seen` holds '' under that key"
    ),
    "accept through one module-level Deduper that keeps the fingerprint in self.fp": (
        "interrupted while it read `seen` by another thread's"
    ),
    "accept keeps the current key in a module-level dict for its conflict message": (
        "though another thread's call"
    ),
    "accept logs new payloads through its own StreamHandler (made at import, propagate off)": (
        "nothing of the payload printed or logged by accept for a new key"
    ),
    "accept appends every new payload to an audit file": (
        "nothing of the payload printed or logged by accept for a new key"
    ),
    "key made with .format() on text that already holds the id (an id '{action}' substituted)": (
        "different keys for the entity ids '{action}' and 'charge'"
    ),
    "key with abs() of an int entity id (-7 and 7 share a key)": (
        "different keys for the entity ids -7 and 7"
    ),
    "key with '-' stripped off the left of the entity id ('-7' and '7' share a key)": (
        "different keys for the entity ids"
    ),
    "fingerprint with the field names of nested dicts made text first ('10' sorted before '9')": (
        "'qty_by_line': {10: 1, 9: 2}"
    ),
    "accept splits the key into its four parts before storing it": "sent twice with one payload",
    "accept splits the key to log it after storing (an id with ':' raises past the write)": (
        "sent twice with one payload"
    ),
    "the conflict message cut to 200 characters": "naming the whole key",
    "a conflict logged with its payload before the raise (logging's warning)": (
        "an IdempotencyConflict message that names the key but none"
    ),
    "a conflict printed with its payload before the raise": (
        "an IdempotencyConflict message that names the key but none"
    ),
    "the entity id written with !r (to tell 42 and '42' apart)": "for the id 42 as",
    "the entity id's type name put in the key": "for the id 42 as",
    "the fingerprint's text encoded with errors='replace'": "or a fingerprint other than that of",
    "the fingerprint's text encoded with errors='ignore'": "or a fingerprint other than that of",
    "the fingerprint's text encoded with errors='surrogateescape'": (
        "or a fingerprint other than that of"
    ),
    "the canonical JSON dumped with skipkeys=True": "or a fingerprint other than that of",
    "key from uuid4 per attempt": "the same key for the same intent",
    "key from a timestamp": "the same key three days later",
    "key from datetime.now()": "the same key three days later",
    "key from date.today() (the date class imported by name)": "the same key three days later",
    "key from a timestamp, with time() imported by name": "the same key three days later",
    "fingerprint without sort_keys (dict order)": "keys in another order",
    "conflict overwrites the first payload": "IdempotencyConflict for the same key",
    "dedup by payload instead of key": "two different keys with the same payload",
    "key from hash() (salted per process)": "in another Python process",
    "key from the order of a set of strings": "in another Python process",
    "entity id lowercased in the key": "different keys for",
    "fingerprint that sorts only the top-level keys": "keys in another order",
    "fingerprint with 1990.0 made 1990": "the amount as a float",
    "fingerprint with json's default separators (', ' and ': ')": "canonical JSON",
    "fingerprint of ASCII-escaped JSON (ensure_ascii left on)": "non-ASCII kept",
    "accept remembers keys in a module-level dict, not in `seen`": "one entry in `seen`",
    "key joined with '_' (ids with '_' run together)": "different keys for the intents",
    "key parts concatenated without a separator": "different keys for the intents",
    "key truncates the entity id to 8 characters": "different keys for",
    "key lowercases the source and the action": "different keys for",
    "key leaves the version out when it is 1": "a key containing",
    "conflict message that does not name the key": "message naming the key",
    "accept stores the payload in `seen`, not its fingerprint": "already maps it to",
    "fingerprint drops the fields that are None": "the whole payload",
    "fingerprint strips blanks around strings": "the whole payload",
    "conflict raised only when the amount changed": "IdempotencyConflict for the same key",
    "key from today's date with time.strftime (no time.time() call)": (
        "the same key three days later"
    ),
    "key with the accents folded to ASCII (a slug: 'José' becomes 'Jose')": "'José'",
    "key cut to 255 characters (the width of a key column)": "different keys for",
    "key built from the parts with blanks stripped (' INV-7' and 'INV-7' share a key)": (
        "' INV-7'"
    ),
    "an all-digit entity id made an int ('0042' and 42 share a key)": "'0042'",
    "accept remembers keys in lower case": "two different keys with the same payload",
    "accept remembers keys cut to 128 characters": "two different keys with the same payload",
    "fingerprint skips the 'volatile' fields (request_id, timestamps)": "ids and timestamps too",
    "key made 'safe': every character but letters, digits, '_' and '-' replaced by '_'": "'INV_7'",
    "key with ':' inside a part replaced by '-' ('INV:7' and 'INV-7' share a key)": "'INV:7'",
    "key forced to ASCII with encode('ascii', 'replace') ('Müller' and 'Möller' share a key)": (
        "'Möller'"
    ),
    "key with the non-ASCII letters dropped (encode('ascii', 'ignore'))": "'Möller'",
    "key with the worker's host name in it": "on another machine",
    "key with the day of the run, read once at import": "in a worker started three days later",
    "fingerprint cached by id(payload) (a dict changed in place keeps its fingerprint)": (
        "changed in place"
    ),
    "key with blanks inside a part turned into '-' ('INV 7' and 'INV-7' share a key)": "'INV 7'",
    "accept takes a payload with a field dropped for a repeat": "the field 'note' dropped",
    "key with the version cut to its last digit (v1 and v11 share a key)": "'charge', 11)",
    "fingerprint of the JSON encoded as latin-1, errors='replace' ('北京' and '上海' alike)": (
        "whose locale is C"
    ),
    "fingerprint of the JSON encoded with the locale's encoding (ASCII under LANG=C)": (
        "whose locale is C"
    ),
    "fingerprint of the payload with accents folded to ASCII ('João' and 'Joao' alike)": (
        "whose locale is C"
    ),
    "accept leaves the retry's own fields (attempt, sent_at) out of the fingerprint": (
        "'attempt': 2"
    ),
    "conflict message made with .format() on text holding the key (a key with braces)": (
        "'tpl:{name}:render:v1'"
    ),
    "conflict message made with % on text holding the key (a key with '%')": (
        "'promo:50%d:apply:v1'"
    ),
    "accept answers repeats from a module-level cache before looking at `seen`": (
        "a second, empty `seen`"
    ),
    "accept forgets a key after a 24 h dedup window kept in a module-level dict": (
        "three days later in the store"
    ),
    "accept answers True for a payload it cannot fingerprint (TypeError swallowed)": (
        "a payload holding a datetime"
    ),
    "key with the worker's process id, read once at import": (
        "in a worker started on another machine"
    ),
    "key with the host name, read once at import": "in a worker started on another machine",
    "key with the module's __name__ (the notebook says __main__, a worker its module)": (
        "in a worker started on another machine"
    ),
    "key with the thread's id (threading.get_ident())": "in another Python process",
    "accept forgets a key after a 7-day dedup window kept in a module-level dict": (
        "400 days later in the store"
    ),
    "accept strips blanks from the key (' billing:7:...' and 'billing:7:...' share an entry)": (
        "' billing:7:charge:v1'"
    ),
    "conflict message with the key cut to 32 characters": "message naming the key",
    "conflict message that names the fingerprints, not the key": "message naming the key",
    "accept pops the retry counter from the caller's payload before fingerprinting": "'attempt': 2",
    "fingerprint memoised by the payload's field names (values ignored)": (
        "a different fingerprint for another amount"
    ),
    "conflict only warned about (warnings.warn), the repeat answered False": (
        "IdempotencyConflict for the same key with another amount"
    ),
    "accept answers a repeat with None instead of False": "a repeat after a restart",
    "fingerprint of floats rounded to cents (a rate of 0.125 and one of 0.124 alike)": (
        "'rate': 0.124"
    ),
    "fingerprint with json.dumps(..., default=str) (a datetime and its text alike)": (
        "for a payload holding a datetime"
    ),
    "fingerprint that sorts the lists too (the order of the lines ignored)": (
        "the canonical JSON of the whole payload"
    ),
    "fingerprint with booleans made ints (True and 1 alike)": "canonical JSON",
    "fingerprint skips the fields whose name starts with '_'": (
        "the canonical JSON of the whole payload"
    ),
    "key parts URL-quoted (quote(part, safe='')): 'José' shown as 'Jos%C3%A9'": "José Ávila 7",
    "key with `version or 1` (version 0 and version 1 share a key)": "('billing', 42, 'charge', 0)",
    "key parts normalised with NFKC (fullwidth 'ＩＮＶ-４２' and 'INV-42' share a key)": (
        "('billing', 'ＩＮＶ-４２', 'charge', 1)"
    ),
    "accept keeps `seen` to its last 1000 keys (the oldest dropped to save memory)": (
        "a False for the first key's retry"
    ),
    "accept keeps only the first 16 hex digits of the fingerprint in `seen`": (
        "(a repeat after a restart)"
    ),
    "fingerprint of the lowercased JSON ('INV-7a' and 'INV-7A' alike)": "'INV-7A'",
    "accept answers True for any empty payload (nothing to fingerprint)": "an empty payload twice",
    "fingerprint of the first 4096 characters of the JSON (a long invoice's last line ignored)": (
        "an invoice of 300 lines"
    ),
    "fingerprint of the NFC-normalised JSON (a decomposed 'ç' hashed as the composed one)": (
        "the canonical JSON of the whole payload"
    ),
    "operation_key memoised with functools.lru_cache (42.0 answered with 42's key)": (
        "in a new worker that asks for ['billing', 42.0, 'charge'] first"
    ),
    "accept reserves the key in `seen` before fingerprinting (kept when json.dumps raises)": (
        "sent again with its date as text"
    ),
    "key with the source cut at its first dot ('billing.eu' and 'billing.us' share a key)": (
        "('billing.eu', 42, 'charge', 1)"
    ),
    "key with runs of blanks collapsed to one ('INV  7' and 'INV 7' share a key)": "'INV  7'",
    "key with '/' replaced by '-' (the key used as a file name)": "('shop/eu', 42, 'charge', 1)",
    "key with the quotes dropped, to be safe in SQL (\"d'Ávila\" and 'dÁvila' share a key)": (
        "'dÁvila'"
    ),
    "key with the source and the action cut to 16 characters": "'billing-europe-west-1'",
    "key with control characters made blanks ('INV<tab>7' and 'INV 7' share a key)": "'INV\\t7'",
    "key with the worker's pod name (the POD_NAME variable) in it": "on another machine",
    "fingerprint '' for a payload JSON cannot encode (TypeError swallowed)": (
        "then due on 2026-12-05"
    ),
    "accept answers False for a payload it cannot fingerprint (TypeError swallowed)": (
        "for a key seen for the first time with a payload holding a datetime"
    ),
    "conflict message that shows the payload (a card number in the logs)": (
        "none of the payload's values"
    ),
    "fingerprint cached by the payload's items (1, 1.0 and True share one entry)": (
        "'quantity': 1.0"
    ),
    "accept lets a full payload fill in a key first seen with an empty one": (
        "an empty payload, then a full order"
    ),
    "accept remembers keys with runs of blanks collapsed ('INV  7' and 'INV 7' one entry)": (
        "'billing:INV  7:charge:v1'"
    ),
    "accept remembers keys normalised with NFKC ('ＩＮＶ-42' and 'INV-42' one entry)": (
        "'billing:ＩＮＶ-42:charge:v1'"
    ),
    "fingerprint of the payload with its numbers made text (42 and '42' alike)": "'invoice': '42'",
    "key stripped whole (' billing' and 'billing' share a key)": "(' billing', 42, 'charge', 1)",
    "key with newlines in a part made blanks, for one-line logs ('INV\\n7' and 'INV 7')": (
        "'INV\\n7'"
    ),
    "key with a trailing newline cut off the entity id (an id read from a line)": "'INV-7\\n'",
    "conflict message with the key cut to 60 characters and '...'": "'erp:order-2026-12-04-",
    "key joined with '/' ('shop/eu' ids run together)": "different keys for the intents",
    "key joined with '.' ('billing.eu' sources run together)": "different keys for the intents",
    "key with the host name from platform.uname(), read once at import": (
        "in a worker started on another machine"
    ),
    "key with the machine's network card (uuid.getnode(), its MAC address)": "on another machine",
    "key with the worker's user id (os.getuid())": "on another machine",
    "key with the name of the worker's home folder (~)": "on another machine",
    "int entity id zero-padded to 10 digits (42 and '0000000042' share a key)": (
        "('billing', '0000000"
    ),
    "a float entity id written with '{:g}' (1234567.0 and 1234568.0 share a key)": ("1234567.0"),
    "a float entity id rounded to 2 decimals (0.125 and 0.124 share a key)": "0.125",
    "key with the worker's time zone name (time.tzname), to tell regions apart": "time zone",
    "key with the local UTC offset (time.strftime('%z'))": "time zone",
    "key with the worker's language (the LANG variable)": "language",
    "fingerprint drops the payload's 'id' field (the key names it already)": "'id': 8",
    "fingerprint of floats rounded to 6 decimals (to hide float noise)": "5.123456788",
    "key with the month of the run, a billing period (datetime.now():%Y-%m)": "days later",
    "key with the week of the run, counted from time.time()": "days later",
    "key with the year of the run (date.today().year)": "days later",
    "key with the billing month read once at import (time.strftime('%Y%m'))": "days later",
    "key with the day read from time.clock_gettime(CLOCK_REALTIME)": (
        "the same key three days later"
    ),
    "key with the version run into the action ('charge1' v1 and 'charge' v11 share a key)": (
        "('billing', 42, 'charge', 11)"
    ),
    "key of the parts sorted, like sort_keys (a source and an id swapped share a key)": (
        "('erp', 'billing', 'charge', 1)"
    ),
    "accept remembers keys forced to ASCII ('Müller' and 'Möller' one entry)": (
        "'crm:Müller:sync:v1'"
    ),
    "accept remembers keys without their version ('...:v1' and '...:v2' one entry)": (
        "two different keys with the same payload"
    ),
    "accept remembers keys with leading zeros dropped ('0042' and '42' one entry)": (
        "'billing:0042:charge:v1'"
    ),
    "accept checks conflicts in a module-level map of first fingerprints, not in `seen`": (
        "a third, empty `seen`"
    ),
    "fingerprint with default=float for Decimals (Decimal('19.90') and 19.9 alike)": (
        "the float 19.9"
    ),
    "fingerprint with default= writing datetimes as isoformat() (a date and its text alike)": (
        "its ISO text (isoformat())"
    ),
    "accept stores the fingerprint of the payload without its None fields": (
        "None, blank fields and all"
    ),
    "IdempotencyConflict defined again in the notebook (a ValueError of its own)": (
        "labkit.errors.IdempotencyConflict"
    ),
    "accept looks a key up again in lower case when it is not found (an old client's keys)": (
        "'billing:inv-7:charge:v1' and 'billing:INV-7:charge:v1'"
    ),
    "accept looks a key up again with its blanks stripped when it is not found": (
        "'billing:7:charge:v1' and ' billing:7:charge:v1'"
    ),
    "accept keeps `seen` to 100,000 keys (the oldest dropped when it is full)": "months of work",
    "accept clears `seen` when it reaches 50,000 keys, to save memory": "months of work",
    "fingerprint of the lists as sets (the same line twice counted once)": (
        "[{'sku': 'A', 'qty': 1}, {'sku': 'A', 'qty': 1}]"
    ),
    "key with the worker's id from the WORKER_ID variable its launcher sets": "on another machine",
    "fingerprint with default=sorted for sets (a set and its sorted list alike)": (
        "the list of its items, sorted"
    ),
    "key with the dashes taken out of the id ('INV-7-1' and 'INV-71' share a key)": ("'INV-7-1'"),
    "key with the source and the action joined by '.' ('billing.charge:42:v1')": (
        "different keys for the intents"
    ),
    "accept keeps `seen` to 1,000,000 keys (the oldest dropped when it is full)": "years of work",
    "accept clears `seen` when it passes 200,000 keys (a bound above months of keys)": (
        "years of work"
    ),
    "accept trims `seen` to 2**20 keys, deleting the oldest in a while loop": "years of work",
    "accept clears `seen` when sys.getsizeof(seen) passes 64 MiB": "years of work",
    "accept drops the oldest tenth of `seen` once it holds 500,000 keys": "years of work",
    "accept keeps the newest 1,000,000 keys (list(seen.items())[-N:] put back)": "years of work",
    "accept forgets a key after a 2-year dedup window kept in a module-level dict": (
        "a thousand years later"
    ),
    "accept deletes keys older than a 10-year retention (datetime.now() and a timedelta)": (
        "a thousand years later"
    ),
    "accept forgets a key after 5 years of time.monotonic() (a worker's uptime)": (
        "a thousand years later"
    ),
    "accept forgets a key after a 24 h window timed with time.monotonic_ns()": (
        "three days later in the store"
    ),
    "accept forgets a key after a 7-day window read from clock_gettime(CLOCK_REALTIME)": (
        "400 days later in the store"
    ),
    "accept looks in `seen` only for keys in a module-level set of its own (a fast path)": (
        "in a worker started afresh"
    ),
    "key with ':' dropped from the parts ('INV:7' and 'INV7' share a key)": "'INV:7'",
    "key with ':' in the entity id made '_' ('INV:7' and 'INV_7' share a key)": "'INV:7'",
    "key with ':' in the source made '.' ('shop:eu' and 'shop.eu' share a key)": "'shop:eu'",
    "accept clears `seen` every 100,000 calls (a module-level call counter)": (
        "the first key still in `seen`"
    ),
    "accept clears `seen` after CLEAR_EVERY = 10**5 calls counted by itertools.count()": (
        "the first key still in `seen`"
    ),
    "accept counts its calls in a function attribute and clears `seen` past 150,000": (
        "the first key still in `seen`"
    ),
    "accept keeps its last 100,000 new keys in a deque(maxlen) and drops the oldest": (
        "the first key still in `seen`"
    ),
    "accept tracks its keys in an LRU (an OrderedDict class of 65,536) and evicts from `seen`": (
        "the first key still in `seen`"
    ),
    "accept clears `seen` every 200,000 calls, the bound a default parameter": (
        "the first key still in `seen`"
    ),
    "accept from a factory whose closure clears `seen` every 50,000 new keys": (
        "the first key still in `seen`"
    ),
    "accept counts its calls under a key of `seen` and clears it every 1e5 calls": (
        "holding all 20000"
    ),
    "accept clears `seen` every 2**19 calls, counted in a class attribute": (
        "the first key still in `seen`"
    ),
    "fingerprint of json's default output with ', ' and ': ' replaced by ',' and ':'": (
        "'Rua A,42'"
    ),
    "fingerprint of the JSON with every blank dropped ('Ana Maria' and 'AnaMaria' alike)": (
        "'AnaMaria'"
    ),
    "key with ':' in a part percent-encoded, '%' left as is ('INV:7' and 'INV%3A7' alike)": (
        "'INV%3A7'"
    ),
    "key parts normalised with NFC (a decomposed 'ç' and the composed one share a key)": (
        "('crm', 'Conceição', 'sync', 1)"
    ),
    "accept remembers keys normalised with NFC (a decomposed 'ç' and the composed one)": (
        "'crm:Conceição:sync:v1'"
    ),
    "fingerprint with default=list for sets (a set and the list of its items alike)": (
        "for a payload holding a set"
    ),
    "fingerprint with default=repr (Decimal('19.90') and the text \"Decimal('19.90')\")": (
        "its repr() as text"
    ),
    "conflict with the payload in a note (add_note: a card number in the logged traceback)": (
        "none of the payload's values"
    ),
    "conflict chained from an error that shows the payload (raise ... from ValueError)": (
        "none of the payload's values"
    ),
    "accept cuts the line end off the key (keys read from lines: '...:v1\\n' and '...:v1')": (
        "'billing:7:charge:v1\\n'"
    ),
    "accept strips a byte-order mark from the key (keys read from a CSV)": (
        "'\\ufeffbilling:7:charge:v1'"
    ),
    "accept URL-decodes the key, from an HTTP header ('INV%207' and 'INV 7' one entry)": (
        "'billing:INV%207:charge:v1'"
    ),
    "accept drops zero-width spaces from the key ('INV\\u200b7' and 'INV7' one entry)": (
        "'billing:INV\\u200b7:charge:v1'"
    ),
    "accept escapes newlines in the key as '\\n', for one-line logs": "'billing:INV\\n7:charge:v1'",
    "key with a trailing '\\r' cut off each part (a CSV written with '\\r\\n')": "'INV-7\\r'",
    "key with newlines in a part escaped as '\\n', for one-line logs ('INV\\n7' twice)": (
        "'INV\\\\n7'"
    ),
    "key with blanks in a part percent-encoded ('INV 7' and 'INV%207' share a key)": "'INV%207'",
    "key with byte-order marks and zero-width spaces dropped from the parts": "'\\ufeffINV-7'",
    "fingerprint drops the fields that are an empty list or dict": "'discounts': []",
    "fingerprint of floats rounded to 12 decimals (to hide float noise)": "0.12345678912342",
    "fingerprint of floats rounded to 9 decimals (to hide float noise)": "0.12345678912342",
    "accept remembers keys cut to 1024 characters (a wider key column)": (
        "True for two different keys of"
    ),
    "accept shortens a long key to its first and last 500 characters": (
        "one character apart in the middle"
    ),
    "key cut to 1024 characters (a wider key column)": "different keys for two entity ids of",
    "key with the entity id cut to 2048 bytes of UTF-8": "different keys for two entity ids of",
    "key with '.0' taken off the entity id (a float id read through pandas)": (
        "different keys for the entity ids '2.0' and '2'"
    ),
    "key with a numeric id made int(float(id)) (ids past 2**53 share a key)": (
        "9007199254740993 and 9007199254740992"
    ),
    "key with `entity_id or ''` (the id 0 and no id share a key)": (
        "different keys for the entity ids 0 and None"
    ),
    "fingerprint of the first 65,536 characters of the JSON": "with a note of",
    "fingerprint of each list's first 1000 items": "a list of",
    "fingerprint of floats written with 15 significant digits (0.1 + 0.2 made 0.3)": (
        "0.30000000000000004"
    ),
    "accept takes any error reading `seen` for a new key (except Exception)": (
        "on a `seen` that cannot be read"
    ),
    "accept logs a failed write to `seen` and answers True all the same": "whose write failed",
    "fingerprint leaves out the fields that are False (a serializer's exclude_defaults)": (
        "'gift_wrap': False}, then"
    ),
    "fingerprint leaves out the fields that are 0 (a default amount)": "'discount_cents': 0}, then",
    "fingerprint leaves out the fields that are '' (an empty text is no value)": (
        "'note': ''}, then"
    ),
    "fingerprint of the payload with its field names lowercased ('Note' and 'note' alike)": (
        "'Note': 'gift'}, then"
    ),
    "fingerprint of the payload with camelCase field names made snake_case": "'giftWrap': 1}, then",
    "fingerprint of the payload with blanks stripped from its field names": (
        "' note': 'gift'}, then"
    ),
    "fingerprint of ints past 2**53 made floats (for JavaScript clients)": (
        "'order_id': 9007199254740995}, then"
    ),
    "fingerprint of ints past 2**53 written as text (for JavaScript clients)": (
        "'order_id': 9007199254740993"
    ),
    "accept strips the quotes around the key (a quoted Idempotency-Key header)": (
        "'\"billing:7:charge:v1\"' and 'billing:7:charge:v1'"
    ),
    "key with the quotes around the entity id stripped (an id read from a CSV field)": (
        "'\"INV-7\"'"
    ),
    "fingerprint that sorts the lists of strings (tags have no order)": (
        "'tags': ['gift', 'express']"
    ),
    "fingerprint with the texts' '\\r\\n' line ends made '\\n'": "line 1\\r\\nline 2",
    "key with a UUID entity id written as uuid.hex (the UUID and its text get two keys)": (
        "for the same id as a uuid.UUID"
    ),
    "key with ':' stripped off the ends of the parts ('INV-7:' and 'INV-7' share a key)": (
        "different keys for ('billing', 'INV-7:'"
    ),
    "key with the source cut to 32 characters (the width of a source column)": (
        "different keys for ('billing-xxxx"
    ),
    "key with the action cut to 64 characters": "different keys for ('billing', 42, 'charge-xxxx",
    "fingerprint that sorts the lists of dicts (an order's lines) by their JSON": (
        "'lines': [{'sku': 'B', 'qty': 2}"
    ),
    "fingerprint drops the payload's 'idempotency_key' field (the key is no payload)": (
        "{'idempotency_key': 'billing:42:charge:v1'"
    ),
    "fingerprint skips correlation ids, nonces and signatures (they change per send)": (
        "'correlation_id': 'c-7'"
    ),
    "fingerprint strips blanks around the top-level texts only (form fields)": "'note': ' gift '",
    "fingerprint lowercases the 'email' field (e-mail addresses ignore case)": (
        "'email': 'Ana@Example.COM'"
    ),
    "fingerprint of the payload's first 64 fields (in key order)": "for a payload of 1,100 fields",
    "fingerprint with default= writing bytes as their UTF-8 text (b'INV-7' and 'INV-7' alike)": (
        "their text, decoded"
    ),
    "fingerprint with default= writing a Decimal as its cents (Decimal('19.90') made 1990)": (
        "the int 1990, its cents"
    ),
    "fingerprint with default= writing a datetime as its timestamp() (its Unix time)": (
        "its Unix time as a float"
    ),
    "fingerprint with default= writing a datetime as its ISO text with the zone dropped": (
        "its ISO text without its time zone"
    ),
    "accept takes the key from the payload's 'idempotency_key' field when it has one": (
        "with one payload holding {'idempotency_key'"
    ),
    "key with the source's blanks made '-', a slug ('shop eu' and 'shop-eu' share a key)": (
        "different keys for ('shop eu', 42, 'charge', 1) and ('shop-eu'"
    ),
    "key with '_' in the action made '-' ('charge_full' and 'charge-full' share a key)": (
        "('billing', 42, 'charge_full', 1)"
    ),
    "key with '#' stripped off the entity id ('#42' and 42 share a key)": (
        "different keys for ('billing', '#42'"
    ),
    "key with the prefix 'INV-' taken off the entity id ('INV-42' and '42' share a key)": (
        "different keys for ('billing', 'INV-42'"
    ),
    "fingerprint skips the transport's fields (headers, user agent, client ip)": (
        "'headers': {'user-agent': 'app/7'}"
    ),
    "fingerprint that sorts the lists of floats (rates have no order)": ("'rates': [0.5, 0.25]"),
    "fingerprint with the repeats dropped from lists of strings (a tag given twice)": (
        "'tags': ['gift', 'gift', 'express']"
    ),
    "accept writes a None placeholder, then the fingerprint (two writes to `seen`)": (
        "only ever as it was before the call or as it is after it"
    ),
    "accept reserves the key with '' before fingerprinting, undone when json.dumps raises": (
        "only ever as it was before the call or as it is after it"
    ),
    "accept refreshes a repeat with seen.pop(key) and a re-insert (LRU order)": (
        "write accept makes for a repeat"
    ),
    "accept writes the new fingerprint first and puts the old one back on a conflict": (
        "write accept makes for a conflict"
    ),
    "accept pops the entry to compare it, then puts it back": "write accept makes for a repeat",
    "accept writes a short fingerprint first, then the whole one": (
        "write accept makes for a new key"
    ),
    "accept marks the key 'pending' with update(), then stores the fingerprint": (
        "write accept makes for a new key"
    ),
    "accept logs every new operation with its payload (logger.info)": (
        "nothing of the payload printed or logged by accept for a new key"
    ),
    "accept prints a skipped repeat with its payload": (
        "nothing of the payload printed or logged by accept for a repeat"
    ),
    "accept compares only the first 8 hex digits of the fingerprints": (
        "differs from the payload's in its"
    ),
    "accept calls an emptied payload a repeat (`if payload and known != fp`)": (
        "{'amount_cents': 500}, then {}"
    ),
    "accept stamps the key into the caller's payload": "sent twice as the very same dict",
    "accept stamps the fingerprint into the caller's payload (setdefault)": (
        "sent twice as the very same dict"
    ),
    "accept answers a repeat from a module-level memory of the last key and fingerprint": (
        "on a second `seen` that holds it with another fingerprint"
    ),
    "a float entity id written with 6 decimals (f'{id:.6f}': 0.1 + 0.2 and 0.3 share a key)": (
        "0.30000000000000004"
    ),
    "a float entity id written with '%.10g' (1234567.1234567 and 1234567.1234568 share a key)": (
        "0.30000000000000004"
    ),
    "a float entity id rounded to 6 decimals (round(id, 6))": "0.30000000000000004",
    "key with backslashes in the id made slashes (a Windows-style id and its twin)": "'INV/7'",
    "key with single quotes stripped off the entity id (an id pasted from SQL output)": (
        "\"'INV-7'\""
    ),
    "key with runs of dashes in the id collapsed to one ('INV--7' and 'INV-7' share a key)": (
        "'INV--7'"
    ),
    "key with abs(version) (version -2 and version 2 share a key)": "'charge', -2)",
    "key with no-break spaces in the id made blanks (an id copied from a document)": "'INV\\xa07'",
    "key with en dashes in the id made '-' ('INV–7' and 'INV-7' share a key)": "'INV–7'",
    "key with curly apostrophes in the id made straight ones": "d’Ávila",
    "fingerprint with allow_nan=False (a payload holding NaN refused)": "'rate': nan",
    "fingerprint with NaN and infinities made null": "'rate': nan",
    "fingerprint with -0.0 made 0.0": "'delta': -0.0",
    "fingerprint with the top-level field names made text first ('10' sorted before '9')": (
        "{10: 1, 9: 2}"
    ),
    "fingerprint with default= writing a UUID as its text (a UUID and its text alike)": (
        "a uuid.UUID"
    ),
    "fingerprint with default= writing an Enum member as its value": "an Enum member",
    "accept makes the tabs in the key blanks, for one-line logs (a tab and a blank one entry)": (
        "INV\\t7"
    ),
    "accept makes the no-break spaces in the key blanks (a key copied from a document)": (
        "INV\\xa07"
    ),
    "accept answers repeats from a cache of each store's keys, by id(seen)": (
        "and then deleted from"
    ),
    "key joined from the parts that are not empty (an empty id and an empty action swapped)": (
        "'billing', '', 'charge'"
    ),
    "fingerprint falls back to unsorted JSON when the field names cannot be sorted": (
        "cannot sort an int and a text field name"
    ),
    "fingerprint with default=vars (a dataclass and the dict of its fields alike)": (
        "a dataclass instance"
    ),
    "key with NUL characters dropped (PostgreSQL's text columns refuse them)": "INV\\x007",
    "accept drops NUL characters from the key before storing it (for PostgreSQL)": "INV\\x007",
    "key with the blanks in the action made '_' ('charge card' and 'charge_card' share a key)": (
        "'charge card'"
    ),
    "key with the version written as a float ('{:g}': v1234567 and v1234568 share a key)": (
        "1234568"
    ),
    "key with an int id wrapped to 64 bits (ctypes.c_int64: 42 + 2**64 and 42 share a key)": (
        "18446744073709551658"
    ),
    "key with int ids past 2**31 - 1 taken modulo 2**31 (a 32-bit id column)": (
        "18446744073709551658"
    ),
    "accept fingerprints a payload holding itself as 'unencodable' (ValueError swallowed)": (
        "a reference to itself"
    ),
    "fingerprint of integral floats past 1e15 made ints (1e16 and 10**16 alike)": "1e+16",
    "key with the quotes in the id doubled, to be safe in SQL (d''Avila in the logs)": "d'Ávila",
    "fingerprint of an empty payload made sha256(b'') (its JSON '{}' skipped)": "for {}",
    "key with the program's name (sys.argv[0]) read once at import, to tell apps apart": (
        "in a worker started on another machine"
    ),
    "key with '.0' stripped off a float id by rstrip('.0') (10.0 and 1.0 share a key)": (
        "different keys for the entity ids 10.0 and 1.0"
    ),
    "fingerprint written into one module-level io.StringIO (threads mix their JSON)": (
        "when another thread fingerprints"
    ),
    "fingerprint joined from a module-level list of JSON chunks (threads mix their JSON)": (
        "when another thread fingerprints"
    ),
    "key with '/' stripped off the ends of the source ('shop/' and 'shop' share a key)": (
        "different keys for ('shop/', 42, 'charge', 1)"
    ),
    "fingerprint of the payload cut at depth 20 (what lies deeper written as '...')": (
        "a payload nested 33 levels deep"
    ),
    "accept waits 1 s for a module lock, then answers False (a repeat) without `seen`": (
        "sent by another thread that waits 3 s"
    ),
    "accept waits 2 s for a module lock, then answers True (do the work) without `seen`": (
        "sent by another thread that waits 3 s"
    ),
    "key with HTML entities in the id decoded (html.unescape: 'R&amp;D-7' and 'R&D-7')": (
        "('billing', 'R&amp;D-7', 'charge', 1)"
    ),
    "key with soft hyphens dropped from the id ('INV\\xad7' and 'INV7' share a key)": (
        "('billing', 'INV\\xad7', 'charge', 1)"
    ),
    "key with trailing dots stripped off the id (rstrip('.'): 'INV-7.' and 'INV-7')": (
        "('billing', 'INV-7.', 'charge', 1)"
    ),
    "fingerprint with default= writing bytes as their hex digits (b'INV-7' and '494e562d37')": (
        "their hex digits as text"
    ),
    "fingerprint with default= writing bytes as base64 text (b'INV-7' and 'SU5WLTc=')": (
        "their base64 text"
    ),
    "a naive datetime id written as int(dt.timestamp()) (read in the worker's time zone)": (
        "on another machine"
    ),
    "a datetime id written in UTC with astimezone() (a naive one read in the worker's zone)": (
        "on another machine"
    ),
    "a datetime id written as its date (two runs on one day share a key)": (
        "datetime.datetime(2026, 12, 4, 14, 30)"
    ),
    "a datetime id written to the second with strftime (its microseconds dropped)": ("250000"),
    "an aware datetime id written with its zone dropped (replace(tzinfo=None))": (
        "tzinfo=datetime.timezone.utc"
    ),
    "a Decimal id normalised (Decimal.normalize(): 4200 written '4.2E+3')": (
        "Decimal('4200') and 4200"
    ),
    "a date id written as its week (strftime('%Y-W%W'): two days of one week share a key)": (
        "datetime.date(2026, 12, 2)"
    ),
    "a Decimal id rounded with quantize(Decimal(1)) (Decimal('42.4') and 42 share a key)": (
        "Decimal('42.4')"
    ),
    "key with the tabs in the id made four blanks ('INV<tab>7' and 'INV    7' share a key)": (
        "'INV    7'"
    ),
    "accept remembers keys with their tabs made four blanks": ("'billing:INV    7:charge:v1'"),
    "conflict message with the key's blanks collapsed to one line (' '.join(key.split()))": (
        "'crm:Ana  Maria:sync:v1'"
    ),
    "conflict message with the key stripped (blanks around it dropped)": (
        "'  billing:7:charge:v1  '"
    ),
    "fingerprint of ints past 2**63 written as text (too wide for a BIGINT column)": (
        "18446744073709551623"
    ),
    "accept stores '' for an empty payload instead of its fingerprint": (
        "seen['billing:45:charge:v1'] == payload_fingerprint(payload)"
    ),
}

#: Mistakes that lose or duplicate an effect (or let two intents share one): the
#: reported score (severity cap included) is at most half of the exercise.
SEVERE = [
    "key of a long intent shortened with hash() (another key in every process)",
    "key of a long intent cut and made unique with a uuid4() suffix",
    "fingerprint of a long payload made with hash() (sha256 only for short ones)",
    "accept stores a long key as its head and hash() (another entry in every process)",
    "accept answers False for a key another thread is accepting (a module-level in-flight set)",
    "accept refuses a key another thread is accepting (an in-flight guard raises a conflict)",
    "fingerprint of the JSON cut to a width read from the environment ('1048576', as text)",
    "key cut to a width read from the environment (KEY_MAX_CHARS, '100000' as text)",
    "accept remembers keys cut to a width read from the environment ('100000' as text)",
    "accept strips trailing NULs off the key (rstrip('\\x00'), a C string's end)",
    "accept splits the key into its four parts before storing it",
    "accept splits the key to log it after storing (an id with ':' raises past the write)",
    "accept remembers keys cut to 1024 characters (a wider key column)",
    "accept shortens a long key to its first and last 500 characters",
    "key cut to 1024 characters (a wider key column)",
    "key with the entity id cut to 2048 bytes of UTF-8",
    "key with '.0' taken off the entity id (a float id read through pandas)",
    "key with `entity_id or ''` (the id 0 and no id share a key)",
    "fingerprint of the first 65,536 characters of the JSON",
    "fingerprint of each list's first 1000 items",
    "fingerprint of floats written with 15 significant digits (0.1 + 0.2 made 0.3)",
    "accept takes any error reading `seen` for a new key (except Exception)",
    "accept logs a failed write to `seen` and answers True all the same",
    "key from today's date with time.strftime (no time.time() call)",
    "key with the accents folded to ASCII (a slug: 'José' becomes 'Jose')",
    "key cut to 255 characters (the width of a key column)",
    "key built from the parts with blanks stripped (' INV-7' and 'INV-7' share a key)",
    "an all-digit entity id made an int ('0042' and 42 share a key)",
    "accept remembers keys in lower case",
    "accept remembers keys cut to 128 characters",
    "key made 'safe': every character but letters, digits, '_' and '-' replaced by '_'",
    "key with ':' inside a part replaced by '-' ('INV:7' and 'INV-7' share a key)",
    "key forced to ASCII with encode('ascii', 'replace') ('Müller' and 'Möller' share a key)",
    "key with the non-ASCII letters dropped (encode('ascii', 'ignore'))",
    "key with the worker's host name in it",
    "key with the day of the run, read once at import",
    "fingerprint cached by id(payload) (a dict changed in place keeps its fingerprint)",
    "key with blanks inside a part turned into '-' ('INV 7' and 'INV-7' share a key)",
    "accept takes a payload with a field dropped for a repeat",
    "key with the version cut to its last digit (v1 and v11 share a key)",
    "fingerprint of the JSON encoded as latin-1, errors='replace' ('北京' and '上海' alike)",
    "fingerprint of the JSON encoded with the locale's encoding (ASCII under LANG=C)",
    "fingerprint of the payload with accents folded to ASCII ('João' and 'Joao' alike)",
    "accept leaves the retry's own fields (attempt, sent_at) out of the fingerprint",
    "accept answers repeats from a module-level cache before looking at `seen`",
    "accept forgets a key after a 24 h dedup window kept in a module-level dict",
    "accept answers True for a payload it cannot fingerprint (TypeError swallowed)",
    "key with the worker's process id, read once at import",
    "key with the host name, read once at import",
    "key with the thread's id (threading.get_ident())",
    "accept forgets a key after a 7-day dedup window kept in a module-level dict",
    "accept strips blanks from the key (' billing:7:...' and 'billing:7:...' share an entry)",
    "accept pops the retry counter from the caller's payload before fingerprinting",
    "conflict only warned about (warnings.warn), the repeat answered False",
    "fingerprint of floats rounded to cents (a rate of 0.125 and one of 0.124 alike)",
    "key with `version or 1` (version 0 and version 1 share a key)",
    "key with the module's __name__ (the notebook says __main__, a worker its module)",
    "key parts normalised with NFKC (fullwidth 'ＩＮＶ-４２' and 'INV-42' share a key)",
    "accept keeps `seen` to its last 1000 keys (the oldest dropped to save memory)",
    "fingerprint of the lowercased JSON ('INV-7a' and 'INV-7A' alike)",
    "accept answers True for any empty payload (nothing to fingerprint)",
    "fingerprint of the first 4096 characters of the JSON (a long invoice's last line ignored)",
    "operation_key memoised with functools.lru_cache (42.0 answered with 42's key)",
    "accept reserves the key in `seen` before fingerprinting (kept when json.dumps raises)",
    "key with the source cut at its first dot ('billing.eu' and 'billing.us' share a key)",
    "key with runs of blanks collapsed to one ('INV  7' and 'INV 7' share a key)",
    "key with '/' replaced by '-' (the key used as a file name)",
    "key with the quotes dropped, to be safe in SQL (\"d'Ávila\" and 'dÁvila' share a key)",
    "key with the source and the action cut to 16 characters",
    "key with control characters made blanks ('INV<tab>7' and 'INV 7' share a key)",
    "key with the worker's pod name (the POD_NAME variable) in it",
    "fingerprint '' for a payload JSON cannot encode (TypeError swallowed)",
    "accept answers False for a payload it cannot fingerprint (TypeError swallowed)",
    "fingerprint cached by the payload's items (1, 1.0 and True share one entry)",
    "accept lets a full payload fill in a key first seen with an empty one",
    "accept remembers keys with runs of blanks collapsed ('INV  7' and 'INV 7' one entry)",
    "accept remembers keys normalised with NFKC ('ＩＮＶ-42' and 'INV-42' one entry)",
    "fingerprint of the payload with its numbers made text (42 and '42' alike)",
    "key stripped whole (' billing' and 'billing' share a key)",
    "key with newlines in a part made blanks, for one-line logs ('INV\\n7' and 'INV 7')",
    "key with a trailing newline cut off the entity id (an id read from a line)",
    "key joined with '/' ('shop/eu' ids run together)",
    "key joined with '.' ('billing.eu' sources run together)",
    "key with the host name from platform.uname(), read once at import",
    "key with the machine's network card (uuid.getnode(), its MAC address)",
    "key with the worker's user id (os.getuid())",
    "key with the name of the worker's home folder (~)",
    "int entity id zero-padded to 10 digits (42 and '0000000042' share a key)",
    "a float entity id written with '{:g}' (1234567.0 and 1234568.0 share a key)",
    "a float entity id rounded to 2 decimals (0.125 and 0.124 share a key)",
    "key with the worker's time zone name (time.tzname), to tell regions apart",
    "key with the local UTC offset (time.strftime('%z'))",
    "key with the worker's language (the LANG variable)",
    "fingerprint drops the payload's 'id' field (the key names it already)",
    "fingerprint of floats rounded to 6 decimals (to hide float noise)",
    "key with the month of the run, a billing period (datetime.now():%Y-%m)",
    "key with the week of the run, counted from time.time()",
    "key with the year of the run (date.today().year)",
    "key with the billing month read once at import (time.strftime('%Y%m'))",
    "key with the day read from time.clock_gettime(CLOCK_REALTIME)",
    "key with the version run into the action ('charge1' v1 and 'charge' v11 share a key)",
    "key of the parts sorted, like sort_keys (a source and an id swapped share a key)",
    "accept remembers keys forced to ASCII ('Müller' and 'Möller' one entry)",
    "accept remembers keys without their version ('...:v1' and '...:v2' one entry)",
    "accept remembers keys with leading zeros dropped ('0042' and '42' one entry)",
    "accept checks conflicts in a module-level map of first fingerprints, not in `seen`",
    "accept looks a key up again in lower case when it is not found (an old client's keys)",
    "accept looks a key up again with its blanks stripped when it is not found",
    "accept keeps `seen` to 100,000 keys (the oldest dropped when it is full)",
    "accept clears `seen` when it reaches 50,000 keys, to save memory",
    "fingerprint of the lists as sets (the same line twice counted once)",
    "key with the worker's id from the WORKER_ID variable its launcher sets",
    "key with the dashes taken out of the id ('INV-7-1' and 'INV-71' share a key)",
    "key with the source and the action joined by '.' ('billing.charge:42:v1')",
    "accept keeps `seen` to 1,000,000 keys (the oldest dropped when it is full)",
    "accept clears `seen` when it passes 200,000 keys (a bound above months of keys)",
    "accept trims `seen` to 2**20 keys, deleting the oldest in a while loop",
    "accept clears `seen` when sys.getsizeof(seen) passes 64 MiB",
    "accept drops the oldest tenth of `seen` once it holds 500,000 keys",
    "accept keeps the newest 1,000,000 keys (list(seen.items())[-N:] put back)",
    "accept forgets a key after a 2-year dedup window kept in a module-level dict",
    "accept deletes keys older than a 10-year retention (datetime.now() and a timedelta)",
    "accept forgets a key after 5 years of time.monotonic() (a worker's uptime)",
    "accept forgets a key after a 24 h window timed with time.monotonic_ns()",
    "accept forgets a key after a 7-day window read from clock_gettime(CLOCK_REALTIME)",
    "accept looks in `seen` only for keys in a module-level set of its own (a fast path)",
    "key with ':' dropped from the parts ('INV:7' and 'INV7' share a key)",
    "key with ':' in the entity id made '_' ('INV:7' and 'INV_7' share a key)",
    "key with ':' in the source made '.' ('shop:eu' and 'shop.eu' share a key)",
    "accept clears `seen` every 100,000 calls (a module-level call counter)",
    "accept clears `seen` after CLEAR_EVERY = 10**5 calls counted by itertools.count()",
    "accept counts its calls in a function attribute and clears `seen` past 150,000",
    "accept counts its calls under a key of `seen` and clears it every 1e5 calls",
    "accept keeps its last 100,000 new keys in a deque(maxlen) and drops the oldest",
    "accept tracks its keys in an LRU (an OrderedDict class of 65,536) and evicts from `seen`",
    "accept clears `seen` every 200,000 calls, the bound a default parameter",
    "accept from a factory whose closure clears `seen` every 50,000 new keys",
    "accept clears `seen` every 2**19 calls, counted in a class attribute",
    "fingerprint of json's default output with ', ' and ': ' replaced by ',' and ':'",
    "fingerprint of the JSON with every blank dropped ('Ana Maria' and 'AnaMaria' alike)",
    "key with ':' in a part percent-encoded, '%' left as is ('INV:7' and 'INV%3A7' alike)",
    "key parts normalised with NFC (a decomposed 'ç' and the composed one share a key)",
    "accept remembers keys normalised with NFC (a decomposed 'ç' and the composed one)",
    "accept cuts the line end off the key (keys read from lines: '...:v1\\n' and '...:v1')",
    "accept strips a byte-order mark from the key (keys read from a CSV)",
    "accept URL-decodes the key, from an HTTP header ('INV%207' and 'INV 7' one entry)",
    "accept drops zero-width spaces from the key ('INV\\u200b7' and 'INV7' one entry)",
    "accept escapes newlines in the key as '\\n', for one-line logs",
    "key with a trailing '\\r' cut off each part (a CSV written with '\\r\\n')",
    "key with newlines in a part escaped as '\\n', for one-line logs ('INV\\n7' twice)",
    "key with blanks in a part percent-encoded ('INV 7' and 'INV%207' share a key)",
    "key with byte-order marks and zero-width spaces dropped from the parts",
    "fingerprint drops the fields that are an empty list or dict",
    "fingerprint of floats rounded to 12 decimals (to hide float noise)",
    "fingerprint of floats rounded to 9 decimals (to hide float noise)",
    "fingerprint leaves out the fields that are False (a serializer's exclude_defaults)",
    "fingerprint leaves out the fields that are 0 (a default amount)",
    "fingerprint leaves out the fields that are '' (an empty text is no value)",
    "fingerprint of the payload with its field names lowercased ('Note' and 'note' alike)",
    "fingerprint of the payload with camelCase field names made snake_case",
    "fingerprint of the payload with blanks stripped from its field names",
    "fingerprint of ints past 2**53 made floats (for JavaScript clients)",
    "accept strips the quotes around the key (a quoted Idempotency-Key header)",
    "key with the quotes around the entity id stripped (an id read from a CSV field)",
    "key with a UUID entity id written as uuid.hex (the UUID and its text get two keys)",
    "key with ':' stripped off the ends of the parts ('INV-7:' and 'INV-7' share a key)",
    "key with the source cut to 32 characters (the width of a source column)",
    "key with the action cut to 64 characters",
    "accept takes the key from the payload's 'idempotency_key' field when it has one",
    "key with the source's blanks made '-', a slug ('shop eu' and 'shop-eu' share a key)",
    "key with '_' in the action made '-' ('charge_full' and 'charge-full' share a key)",
    "key with '#' stripped off the entity id ('#42' and 42 share a key)",
    "key with the prefix 'INV-' taken off the entity id ('INV-42' and '42' share a key)",
    "accept writes a None placeholder, then the fingerprint (two writes to `seen`)",
    "accept reserves the key with '' before fingerprinting, undone when json.dumps raises",
    "accept refreshes a repeat with seen.pop(key) and a re-insert (LRU order)",
    "accept writes the new fingerprint first and puts the old one back on a conflict",
    "accept pops the entry to compare it, then puts it back",
    "accept writes a short fingerprint first, then the whole one",
    "accept marks the key 'pending' with update(), then stores the fingerprint",
    "accept compares only the first 8 hex digits of the fingerprints",
    "accept calls an emptied payload a repeat (`if payload and known != fp`)",
    "accept answers a repeat from a module-level memory of the last key and fingerprint",
    "accept fingerprints the payload without its private '_' fields (a store's _id, __v)",
    "accept fingerprints the payload without its request and trace ids and timestamps",
    "accept fingerprints only an event envelope's 'data' (a charge and a refund alike)",
    "accept calls a key stored with an empty fingerprint a repeat (`if known and known != fp`)",
    "accept through one module-level Deduper that keeps the fingerprint in self.fp",
    "key made with .format() on text that already holds the id (an id '{action}' substituted)",
    "key with abs() of an int entity id (-7 and 7 share a key)",
    "key with '-' stripped off the left of the entity id ('-7' and '7' share a key)",
    "a float entity id written with 6 decimals (f'{id:.6f}': 0.1 + 0.2 and 0.3 share a key)",
    "a float entity id written with '%.10g' (1234567.1234567 and 1234567.1234568 share a key)",
    "a float entity id rounded to 6 decimals (round(id, 6))",
    "key with backslashes in the id made slashes (a Windows-style id and its twin)",
    "key with single quotes stripped off the entity id (an id pasted from SQL output)",
    "key with runs of dashes in the id collapsed to one ('INV--7' and 'INV-7' share a key)",
    "key with abs(version) (version -2 and version 2 share a key)",
    "key with no-break spaces in the id made blanks (an id copied from a document)",
    "key with en dashes in the id made '-' ('INV–7' and 'INV-7' share a key)",
    "key with curly apostrophes in the id made straight ones",
    "accept makes the tabs in the key blanks, for one-line logs (a tab and a blank one entry)",
    "accept makes the no-break spaces in the key blanks (a key copied from a document)",
    "accept answers repeats from a cache of each store's keys, by id(seen)",
    "key joined from the parts that are not empty (an empty id and an empty action swapped)",
    "key with NUL characters dropped (PostgreSQL's text columns refuse them)",
    "accept drops NUL characters from the key before storing it (for PostgreSQL)",
    "key with the blanks in the action made '_' ('charge card' and 'charge_card' share a key)",
    "key with the version written as a float ('{:g}': v1234567 and v1234568 share a key)",
    "key with an int id wrapped to 64 bits (ctypes.c_int64: 42 + 2**64 and 42 share a key)",
    "key with int ids past 2**31 - 1 taken modulo 2**31 (a 32-bit id column)",
    "fingerprint of integral floats past 1e15 made ints (1e16 and 10**16 alike)",
    "key with a numeric id made int(float(id)) (ids past 2**53 share a key)",
    "key with the program's name (sys.argv[0]) read once at import, to tell apps apart",
    "key with '.0' stripped off a float id by rstrip('.0') (10.0 and 1.0 share a key)",
    "fingerprint written into one module-level io.StringIO (threads mix their JSON)",
    "fingerprint joined from a module-level list of JSON chunks (threads mix their JSON)",
    "key with '/' stripped off the ends of the source ('shop/' and 'shop' share a key)",
    "fingerprint of the payload cut at depth 20 (what lies deeper written as '...')",
    "accept waits 1 s for a module lock, then answers False (a repeat) without `seen`",
    "accept waits 2 s for a module lock, then answers True (do the work) without `seen`",
    "key with HTML entities in the id decoded (html.unescape: 'R&amp;D-7' and 'R&D-7')",
    "key with soft hyphens dropped from the id ('INV\\xad7' and 'INV7' share a key)",
    "key with trailing dots stripped off the id (rstrip('.'): 'INV-7.' and 'INV-7')",
    "a naive datetime id written as int(dt.timestamp()) (read in the worker's time zone)",
    "a datetime id written in UTC with astimezone() (a naive one read in the worker's zone)",
    "a datetime id written as its date (two runs on one day share a key)",
    "a datetime id written to the second with strftime (its microseconds dropped)",
    "an aware datetime id written with its zone dropped (replace(tzinfo=None))",
    "a Decimal id normalised (Decimal.normalize(): 4200 written '4.2E+3')",
    "a date id written as its week (strftime('%Y-W%W'): two days of one week share a key)",
    "a Decimal id rounded with quantize(Decimal(1)) (Decimal('42.4') and 42 share a key)",
    "key with the tabs in the id made four blanks ('INV<tab>7' and 'INV    7' share a key)",
    "accept remembers keys with their tabs made four blanks",
]


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS)


@pytest.mark.parametrize("mistake", SEVERE)
def test_a_severe_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


#: Right solutions written otherwise, each with a check that might take its points.
RIGHT: list[tuple[str, str, str]] = [
    (
        "accept holding a lock per key (a module-level defaultdict of locks) across its work",
        "accept_keeps_each_call_to_itself",
        """
        import threading
        from collections import defaultdict
        _locks = defaultdict(threading.Lock)
        _guard = threading.Lock()

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            with _guard:
                lock = _locks[key]
            with lock:
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
    """,
    ),
    (
        "a key that escapes '\\\\' and ':' inside the parts with a backslash",
        "key_names_the_intent",
        """
        def _escaped(part):
            return str(part).replace("\\\\", "\\\\\\\\").replace(":", "\\\\:")

        def operation_key(source, entity_id, action, version=1):
            return f"{_escaped(source)}:{_escaped(entity_id)}:{_escaped(action)}:v{version}"
    """,
    ),
    (
        "accept comparing fingerprints with hmac.compare_digest and writing `seen` on a repeat too",
        "accept_writes_seen_in_one_step",
        """
        import hmac

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is not None and not hmac.compare_digest(known, fp):
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            seen[key] = fp
            return known is None
    """,
    ),
    (
        "a fingerprint whose sha256 is memoised by the canonical JSON text (lru_cache)",
        "fingerprint_matches_the_contract",
        """
        import functools

        @functools.lru_cache(maxsize=4096)
        def _digest(text):
            return hashlib.sha256(text.encode("utf-8")).hexdigest()

        def payload_fingerprint(payload):
            return _digest(
                json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            )
    """,
    ),
    (
        "a key with the version zero-padded to two digits (v01)",
        "key_shows_every_part",
        """
        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version:02d}"
    """,
    ),
    (
        "a key that hashes the tail of a long intent and refuses a missing entity id",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        def operation_key(source, entity_id, action, version=1):
            if entity_id is None:
                raise ValueError("an operation key needs an entity id")
            key = f"{source}:{entity_id}:{action}:v{version}"
            if len(key) > 200:
                key = key[:120] + "#" + hashlib.sha256(key.encode("utf-8")).hexdigest()
            return key
    """,
    ),
    (
        "accept that asks `key in seen` first and catches nothing",
        "unencodable_payload_is_not_new_every_time",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            if key in seen:
                if seen[key] != fp:
                    raise IdempotencyConflict(f"key {key!r} was first used with another payload")
                return False
            seen[key] = fp
            return True
    """,
    ),
    (
        "a frozen dataclass that builds the key, and hashlib.new('sha256') fed the bytes",
        "key_is_made_anew_in_every_call",
        """
        import hashlib, json
        from dataclasses import dataclass
        from typing import Any

        SEP = ":"

        @dataclass(frozen=True)
        class Intent:
            source: str
            entity_id: Any
            action: str
            version: int = 1

            def key(self) -> str:
                parts = [self.source, self.entity_id, self.action, f"v{self.version}"]
                return SEP.join(str(p) for p in parts)

        def operation_key(source, entity_id, action, version=1):
            return Intent(source, entity_id, action, version).key()

        def payload_fingerprint(payload):
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            digest = hashlib.new("sha256")
            digest.update(text.encode("utf-8"))
            return digest.hexdigest()

        def accept(seen, key, payload):
            fingerprint = payload_fingerprint(payload)
            if key not in seen:
                seen[key] = fingerprint
                return True
            if seen[key] == fingerprint:
                return False
            raise IdempotencyConflict(f"conflicting payload for key {key}")
    """,
    ),
    (
        "accept with an Enum of outcomes and a module-level threading.Lock around `seen`",
        "accept_remembers_only_in_seen",
        """
        import enum, threading
        _LOCK = threading.Lock()

        class Outcome(enum.Enum):
            NEW = True
            REPEAT = False

        def _decide(seen, key, fp):
            if key not in seen:
                return Outcome.NEW
            if seen[key] == fp:
                return Outcome.REPEAT
            raise IdempotencyConflict("Idempotency key " + key + " reused with another payload")

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            with _LOCK:
                outcome = _decide(seen, key, fp)
                if outcome is Outcome.NEW:
                    seen[key] = fp
            return outcome.value
    """,
    ),
    (
        "a fingerprint fed chunk by chunk from a module-level JSONEncoder's iterencode",
        "fingerprint_matches_the_contract",
        """
        import hashlib, json
        _ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

        def payload_fingerprint(payload):
            digest = hashlib.sha256()
            for chunk in _ENCODER.iterencode(payload):
                digest.update(chunk.encode("utf-8"))
            return digest.hexdigest()
    """,
    ),
    (
        "accept with seen.setdefault and logging, a key without the 'v' (':'.join of str)",
        "accept_forgets_no_key_on_a_long_day",
        """
        import logging
        log = logging.getLogger("ex01")

        def operation_key(source, entity_id, action, version=1):
            return ":".join(map(str, (source, entity_id, action, version)))

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            stored = seen.setdefault(key, fp)
            if stored is fp:
                log.debug("new operation %s", key)
                return True
            if stored == fp:
                log.info("repeat %s", key)
                return False
            raise IdempotencyConflict("key %r: fingerprint %s != %s" % (key, stored, fp))
    """,
    ),
    (
        "accept with a match statement on seen.get(key)",
        "accept_does_not_confuse_keys",
        """
        def accept(seen, key, payload):
            fingerprint = payload_fingerprint(payload)
            match seen.get(key):
                case None:
                    seen[key] = fingerprint
                    return True
                case known if known == fingerprint:
                    return False
                case known:
                    raise IdempotencyConflict(f"{key}: {known} != {fingerprint}")
    """,
    ),
    (
        "accept that logs every 100,000th new key and times itself in ms (big numbers, no bound)",
        "accept_forgets_no_key_on_a_long_day",
        """
        import logging, time
        log = logging.getLogger("ex01")
        SLOW_MS = 300_000
        _stats = {"new": 0}

        def accept(seen, key, payload):
            started = time.perf_counter_ns()
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                _stats["new"] += 1
                if _stats["new"] % 100_000 == 0:
                    log.info("%d new operations so far", _stats["new"])
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            if (time.perf_counter_ns() - started) // 1_000_000 > SLOW_MS:
                log.warning("slow accept for %s", key)
            return False
    """,
    ),
    (
        "accept with a module-level Counter of outcomes logged every 2**18 calls",
        "accept_forgets_no_key_on_a_long_day",
        """
        import collections, logging
        log = logging.getLogger("ex01")
        REPORT_EVERY = 2**18
        _outcomes = collections.Counter()

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                result = True
            elif known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            else:
                result = False
            _outcomes[result] += 1
            if sum(_outcomes.values()) % REPORT_EVERY == 0:
                log.info("accept: %s", dict(_outcomes))
            return result
    """,
    ),
    (
        "accept hashing inline, warning when a call takes over 250,000 microseconds",
        "accept_forgets_no_key_on_a_long_day",
        """
        import hashlib, json, logging, time
        log = logging.getLogger("ex01")
        SLOW_US = 250_000

        def accept(seen, key, payload):
            started = time.perf_counter_ns()
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            fp = hashlib.sha256(text.encode("utf-8")).hexdigest()
            try:
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r}: {known[:12]} != {fp[:12]}")
                return False
            finally:
                if (time.perf_counter_ns() - started) // 1_000 > SLOW_US:
                    log.warning("accept took long for %s", key)
    """,
    ),
    (
        "an lru_cache'd encoder factory and a module-level Lock held across accept",
        "accept_remembers_only_in_seen",
        """
        import functools, hashlib, json, threading
        _LOCK = threading.Lock()

        @functools.lru_cache(maxsize=1)
        def _encoder():
            return json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

        @functools.lru_cache(maxsize=None)
        def _prefix(source, action):
            return source, action

        def operation_key(source, entity_id, action, version=1):
            return f"{source}:{entity_id}:{action}:v{version}"

        def payload_fingerprint(payload):
            return hashlib.sha256(_encoder().encode(payload).encode("utf-8")).hexdigest()

        def accept(seen, key, payload):
            with _LOCK:
                fp = payload_fingerprint(payload)
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} reused with another payload")
                return False
    """,
    ),
    (
        "accept logging its time in ms (ns // 1_000_000) and a count every 10**6 calls",
        "accept_forgets_no_key_on_a_long_day",
        """
        import logging, time
        log = logging.getLogger("ex01")
        _calls = 0

        def accept(seen, key, payload):
            global _calls
            started = time.perf_counter_ns()
            _calls += 1
            if _calls % 10**6 == 0:
                log.info("%d calls of accept", _calls)
            fp = payload_fingerprint(payload)
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                log.debug("new %s in %d ms", key, (time.perf_counter_ns() - started) // 1_000_000)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "a conflict noting the fingerprints (add_note) and raised while handling a KeyError",
        "conflict_message_keeps_the_payload_out",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            try:
                known = seen[key]
            except KeyError:
                seen[key] = fp
                return True
            if known == fp:
                return False
            try:
                raise ValueError(f"fingerprint {known[:12]} != {fp[:12]}")
            except ValueError:
                exc = IdempotencyConflict(f"key {key!r} was first used with another payload")
                exc.add_note(f"first {known}, now {fp}")
                raise exc
    """,
    ),
    (
        "accept with seen.setdefault (one write) that logs the key only",
        "accept_writes_seen_in_one_step",
        """
        import logging

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.setdefault(key, fp)
            if known is fp:
                logging.getLogger("ops").info("new operation %s", key)
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            logging.getLogger("ops").debug("repeat %s (%s)", key, fp[:12])
            return False
    """,
    ),
    (
        "accept that writes `seen |= {key: fp}` again on a repeat",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key, fp)
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            new = key not in seen
            seen |= {key: fp}
            return new
    """,
    ),
    (
        "accept holding a module-level threading.Lock across its read and write of `seen`",
        "accept_keeps_each_call_to_itself",
        """
        import threading

        _LOCK = threading.Lock()

        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            with _LOCK:
                known = seen.get(key)
                if known is None:
                    seen[key] = fp
                    return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} was first used with another payload")
            return False
    """,
    ),
    (
        "accept through a module-level Deduper whose state is all in locals (try/except KeyError)",
        "accept_keeps_each_call_to_itself",
        """
        class _Deduper:
            def check(self, seen, key, payload):
                fp = payload_fingerprint(payload)
                try:
                    known = seen[key]
                except KeyError:
                    seen[key] = fp
                    return True
                if known != fp:
                    raise IdempotencyConflict(f"key {key!r} came back with another payload")
                return False


        _DEDUPER = _Deduper()


        def accept(seen, key, payload):
            return _DEDUPER.check(seen, key, payload)
    """,
    ),
    (
        "accept that wraps the fingerprint's TypeError in a ValueError naming the key",
        "accept_fails_as_the_fingerprint_does",
        """
        def accept(seen, key, payload):
            try:
                fp = payload_fingerprint(payload)
            except TypeError as exc:
                raise ValueError(f"key {key!r}: the payload is not JSON ({exc})") from exc
            known = seen.get(key)
            if known is None:
                seen[key] = fp
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "a key that refuses an empty part with a ValueError",
        "key_names_the_intent",
        """
        def operation_key(source, entity_id, action, version=1):
            parts = (source, entity_id, action)
            if any(str(part) == "" for part in parts):
                raise ValueError(f"an operation key needs every part, got {parts!r}")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "accept that stores with setdefault and tells a new key by identity",
        "accept_writes_seen_in_one_step",
        """
        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.setdefault(key, fp)
            if known is fp:
                return True
            if known != fp:
                raise IdempotencyConflict(f"key {key!r} came back with another payload")
            return False
    """,
    ),
    (
        "a fingerprint through one module-level json.JSONEncoder with the contract's options",
        "fingerprint_matches_the_contract",
        """
        _ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

        def payload_fingerprint(payload):
            return hashlib.sha256(_ENCODER.encode(payload).encode("utf-8")).hexdigest()
    """,
    ),
    (
        "a fingerprint written into a module-level io.StringIO under a module-level lock",
        "accept_keeps_each_call_to_itself",
        """
        import io
        import threading
        _BUFFER = io.StringIO()
        _LOCK = threading.Lock()

        def payload_fingerprint(payload):
            with _LOCK:
                _BUFFER.seek(0)
                _BUFFER.truncate()
                json.dump(
                    payload, _BUFFER, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
                text = _BUFFER.getvalue()
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "a fingerprint hashed chunk by chunk from JSONEncoder.iterencode into a local sha256",
        "fingerprint_matches_the_contract",
        """
        def payload_fingerprint(payload):
            digest = hashlib.sha256()
            encoder = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            for chunk in encoder.iterencode(payload):
                digest.update(chunk.encode("utf-8"))
            return digest.hexdigest()
    """,
    ),
    (
        # Once marked down: copying the scene's payload started its other thread and
        # tripped on the thread's lock (cannot pickle '_thread.lock').
        "a fingerprint of a deep copy of the payload (copy.deepcopy, the caller's dict left alone)",
        "accept_keeps_each_call_to_itself",
        """
        import copy


        def payload_fingerprint(payload):
            mine = copy.deepcopy(payload)
            text = json.dumps(mine, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
    """,
    ),
    (
        "accept telling a new key by a sentinel object, a fingerprint from digest().hex()",
        "seen_maps_keys_to_fingerprints",
        """
        _MISSING = object()


        def payload_fingerprint(payload):
            canonical = json.dumps(
                payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True
            )
            return hashlib.sha256(bytes(canonical, "utf-8")).digest().hex()


        def accept(seen, key, payload):
            fp = payload_fingerprint(payload)
            known = seen.get(key, _MISSING)
            if known is _MISSING:
                seen[key] = fp
                return True
            if known == fp:
                return False
            raise IdempotencyConflict(f"idempotency key {key} reused with a different payload")
    """,
    ),
    # A datetime id written with isoformat() ('T' between date and time, not str()'s
    # blank): its zone and microseconds kept, and a naive one left naive, read in no zone.
    (
        "a datetime id written with isoformat() (readable, its zone and microseconds kept)",
        "key_names_the_intent",
        """
        import datetime as _dt


        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.isoformat()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "a datetime id written with isoformat(), a naive one left naive (no zone read)",
        "key_is_the_same_on_another_machine",
        """
        import datetime as _dt


        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, _dt.datetime):
                entity_id = entity_id.isoformat()
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
    (
        "a Decimal id written with format(id, 'f') (no exponent, its decimals kept)",
        "an_id_equal_to_an_int_keeps_its_key",
        """
        from decimal import Decimal


        def operation_key(source, entity_id, action, version=1):
            if isinstance(entity_id, Decimal):
                entity_id = format(entity_id, "f")
            return f"{source}:{entity_id}:{action}:v{version}"
    """,
    ),
]


test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex01", RIGHT)

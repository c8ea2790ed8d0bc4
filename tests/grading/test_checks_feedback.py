"""What a student sees: a table, a gentle "not started", named hangs, no traceback walls."""

from __future__ import annotations

import pytest

from labkit.errors import TransientError
from labkit.grading import check
from labkit.grading.checks import (
    Checks,
    CheckStatus,
    Namespace,
    StudentRaised,
    expect,
    run_checks,
)
from labkit.grading.scoring import format_report

DEMO = Checks("ex99", "demo")


@DEMO.add(1, "return 2")
def returns_two(ns: Namespace) -> None:
    got = ns.f()
    expect(got == 2, "2", got)


@DEMO.add(2, "do not loop forever", timeout=0.3)
def finishes(ns: Namespace) -> None:
    ns.g()


def test_an_infinite_loop_names_the_check_that_hung_and_the_rest_still_run() -> None:
    def g() -> None:
        while True:
            pass

    outcomes = run_checks(list(DEMO), {"f": lambda: 2, "g": g})
    assert [(o.check, o.status) for o in outcomes] == [
        ("returns_two", CheckStatus.PASSED),
        ("finishes", CheckStatus.TIMED_OUT),
    ]
    assert "0.3s" in outcomes[1].expected
    report = format_report("ex99", outcomes)
    assert "finishes: timed out" in report and "score: 1/3" in report


def test_the_hung_thread_is_stopped_not_left_spinning() -> None:
    import threading

    stopped = threading.Event()

    def g() -> None:
        try:
            while True:
                pass
        finally:
            stopped.set()

    run_checks([DEMO.items[1]], {"g": g})
    # Returns as soon as the loop stops; the bound is for a loaded machine.
    assert stopped.wait(10.0), "the runaway loop was not interrupted"


def test_a_stub_is_not_started_yet_not_a_failure() -> None:
    def stub() -> None:
        raise NotImplementedError("Exercise 99")

    outcomes = run_checks(list(DEMO), {"f": stub, "g": stub})
    assert {o.status for o in outcomes} == {CheckStatus.NOT_STARTED}
    report = format_report("ex99", outcomes)
    assert "Not started yet" in report and "Traceback" not in report


def test_an_exception_in_student_code_is_one_line_with_where_it_happened() -> None:
    def f() -> int:
        return {"a": 1}["b"]

    [outcome] = run_checks([DEMO.items[0]], {"f": f})
    assert outcome.status == CheckStatus.FAILED
    assert outcome.got.startswith("your code raised KeyError: 'b' (line ")
    assert "of f)" in outcome.got and "\n" not in outcome.got
    assert outcome.expected == ""  # never "expected no exception" beside a hint to raise


def test_student_exceptions_reach_checks_as_data_by_name() -> None:
    class Conflict(ValueError):
        pass

    def f() -> None:
        raise Conflict("key reused with another payload")

    ns = Namespace({"f": f})
    with pytest.raises(StudentRaised) as info:
        ns.f()
    exc = info.value
    assert exc.type_names[:2] == ("Conflict", "ValueError")
    assert exc.is_a("ValueError") and exc.is_a("Exception") and not exc.is_a("KeyError")
    assert exc.message == "key reused with another payload"
    assert exc.where.startswith("line ") and exc.where.endswith("of f")


def test_the_stub_and_base_exceptions_pass_through_the_wrapper() -> None:
    class Crash(BaseException):
        pass

    def stub() -> None:
        raise NotImplementedError("Exercise 99")

    def crash() -> None:
        raise Crash()

    ns = Namespace({"stub": stub, "crash": crash, "n": 3})
    with pytest.raises(NotImplementedError):
        ns.stub()
    with pytest.raises(Crash):
        ns.crash()
    assert ns.n == 3  # plain values are returned as they are


def test_a_wrong_answer_shows_expected_got_and_hint() -> None:
    [outcome] = run_checks([DEMO.items[0]], {"f": lambda: 3})
    report = format_report("ex99", [outcome])
    assert "expected: 2" in report and "got:      3" in report and "hint:     return 2" in report


def test_a_missing_definition_says_which_name_to_define() -> None:
    [outcome] = run_checks([DEMO.items[0]], {})
    assert outcome.status == CheckStatus.FAILED
    assert "'f'" in outcome.expected and "run the cell" in outcome.hint


def _classify(error: BaseException) -> str:
    if getattr(error, "ambiguous", False):
        return "maybe_done"
    if isinstance(error, TransientError):
        return "never_sent"
    status = getattr(error, "status", None)
    if isinstance(status, int):
        if status in (408, 429, 503):
            return "never_sent"
        return "maybe_done" if 500 <= status <= 599 else "permanent"
    if isinstance(error, ConnectionRefusedError):
        return "never_sent"
    if isinstance(error, (TimeoutError, ConnectionError)):
        return "maybe_done"
    return "permanent"


def test_check_finds_definitions_in_the_callers_globals(capsys: pytest.CaptureFixture[str]) -> None:
    # exercise 4's classify, defined here as a notebook would: only the classify checks pass
    globals()["classify"] = _classify
    try:
        check("ex04")
    finally:
        del globals()["classify"]
    out = capsys.readouterr().out
    assert out.startswith("ex04: retry policy")
    assert "classify_never_sent" in out and "passed" in out
    assert "backoff" in out and "no such name" in out  # backoff is missing here
    assert "hidden" not in out  # students see public checks only
    assert "Traceback" not in out


def test_check_refuses_an_unknown_exercise_with_the_list() -> None:
    with pytest.raises(ValueError, match="ex01, ex02"):
        check("ex42")


def test_a_fault_that_never_fired_is_reported_not_passed() -> None:
    """ex05 crashes the run right after the payment API charges: a handler that never
    calls the API must not pass because no crash happened."""
    from labkit.grading import catalog

    [lost_reply] = [c for c in catalog.public("ex05") if c.name == "charge_survives_lost_response"]
    values = {"choose_ack": lambda: "late", "charge_handler": lambda job, ctx: {"id": "fake"}}
    [outcome] = run_checks([lost_reply], values)
    assert outcome.status == CheckStatus.FAILED
    assert "to fire" in outcome.expected and "never fired" in outcome.got
    assert "ctx.world.payments.charge" in outcome.got


def test_a_breaker_that_never_opens_is_sent_to_the_check_that_explains_it() -> None:
    """Not told to "read time only from the clock": it never opened in the first place."""
    from gradingkit import HIDDEN, grade_values, with_override

    from labkit.grading import catalog

    values = with_override(
        "ex07",
        """
        class Breaker:
            def __init__(self, threshold, cooldown_s, clock):
                self.state = "closed"
            def allow(self):
                return True
            def record_failure(self):
                pass
            def record_success(self):
                pass
        """,
    )
    outcomes = grade_values("ex07", values)
    wall = outcomes["ignores_the_wall_clock"]
    assert wall.status == CheckStatus.FAILED
    assert "threshold_of_one" in wall.expected and "fix that one first" in wall.expected
    assert "fake clock" not in wall.expected
    assert outcomes["threshold_of_one"].status == CheckStatus.FAILED
    assert any(c.name == "ignores_the_wall_clock" for c in catalog.all_checks("ex07", HIDDEN))


def test_graded_checks_get_the_time_the_students_check_gave_them() -> None:
    from pathlib import Path

    from labkit.grading import catalog
    from labkit.grading.checks import Check
    from labkit.grading.grade import Settings, check_timeout_for

    checks = catalog.all_checks("ex05", Path(__file__).resolve().parents[2] / "solutions/hidden")
    limit = check_timeout_for(Settings(Path("solutions")), checks)
    assert {min(c.timeout, limit) for c in checks} == {c.timeout for c in checks}
    assert max(c.timeout for c in checks) > 10.0  # ex05's runs are allowed 30 s
    capped = check_timeout_for(Settings(Path("solutions"), check_timeout=5.0), checks)
    assert capped == 5.0  # an instructor's explicit cap still wins
    assert check_timeout_for(Settings(Path("s")), [Check("c", 1, "h", lambda ns: None)]) == 10.0


def test_module_state_does_not_leak_from_one_check_into_the_next() -> None:
    """A module-level cache the student's code fills in one check is back as the
    notebook left it when the next check starts."""
    values: dict[str, object] = {"__name__": "__main__", "SEEN_EVER": {}}

    def accept(seen: dict[str, str], key: str, payload: dict[str, int]) -> bool:
        ever = values["SEEN_EVER"]
        assert isinstance(ever, dict)
        first = key not in ever
        ever[key] = "x"
        seen[key] = "x"
        return first

    values["accept"] = accept
    calls = [["billing:1:charge:v1", {"a": 1}]]
    runs = [
        Namespace(values).harness("labkit.grading.exercises.ex01.harness:accept_calls", calls)
        for _ in range(2)
    ]
    assert [r["results"][0] for r in runs] == [{"returned": True}] * 2
    assert values["SEEN_EVER"] == {}


def test_an_exception_from_student_code_inside_a_harness_is_named_with_its_line() -> None:
    def operation_key(source: str, entity_id: object, action: str, version: int = 1) -> str:
        return source + entity_id  # type: ignore[operator]

    ns = Namespace({"__name__": "__main__", "operation_key": operation_key})
    with pytest.raises(StudentRaised) as info:
        ns.harness(
            "labkit.grading.exercises.ex01.harness:keys_later", [["billing", 42, "charge"]], 60.0
        )
    assert info.value.is_a("TypeError") and "of operation_key" in info.value.where


def test_a_crash_check_says_when_the_job_goes_wrong_without_any_crash() -> None:
    from gradingkit import grade_values, with_override

    values = with_override(
        "ex05",
        """
        def charge_handler(job, ctx):
            pay = ctx.world.payments.charge
            pay(job.payload["customer"], job.payload["amount"], key=job.key)
            return pay(job.payload["customer"], job.payload["amount"], key=job.key)
        """,
    )
    outcomes = grade_values("ex05", values)
    assert outcomes["charge_runs_once_without_faults"].status == CheckStatus.FAILED
    after = outcomes["charge_survives_crash_after_effect"]
    assert after.status == CheckStatus.FAILED
    assert "charge_runs_once_without_faults" in after.expected
    assert outcomes["post_runs_once_without_faults"].status == CheckStatus.PASSED


def _plain(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        # Keys other than text (a number, a tuple of plain values) cross the channel as its
        # "$dict" tag: ex01 hands payload_fingerprint a dict keyed by tuples.
        return all(_plain(k) and not isinstance(k, list) and _plain(v) for k, v in value.items())
    return False


@pytest.mark.parametrize("exercise", ["ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07"])
def test_checks_reach_student_code_with_plain_data_only(exercise: str) -> None:
    """The grading contract: data in and out of ns.NAME(...) and ns.harness(...), so the
    calls can cross a process boundary (issue 10)."""
    from typing import Any

    from gradingkit import HIDDEN, SOLUTIONS, namespace_of, notebook_for

    from labkit.grading import catalog
    from labkit.grading.checks import run_check

    seen: list[str] = []

    class DataOnly(Namespace):
        def harness(self, target: str, *args: Any, **kwargs: Any) -> Any:
            assert _plain(list(args)) and _plain(kwargs), f"{target}: live object passed in"
            out = super().harness(target, *args, **kwargs)
            assert _plain(out), f"{target} returned a live object: {out!r:.200}"
            seen.append(target)
            return out

        def __getattr__(self, name: str) -> Any:
            fn = super().__getattr__(name)
            if not callable(fn):
                return fn

            def call(*args: Any, **kwargs: Any) -> Any:
                assert _plain(list(args)) and _plain(kwargs), f"{name}: live object passed in"
                out = fn(*args, **kwargs)
                assert _plain(out), f"{name} returned a live object: {out!r:.200}"
                return out

            return call

    values, _ = namespace_of(notebook_for(SOLUTIONS, exercise))
    for one in catalog.all_checks(exercise, HIDDEN):
        outcome = run_check(one, DataOnly(values))
        assert outcome.status == CheckStatus.PASSED, (one.name, outcome.expected, outcome.got)
    assert seen, "every exercise runs some student code through a harness"


def test_an_exception_caught_as_evidence_in_a_harness_still_names_the_students_line() -> None:
    from gradingkit import grade_values, with_override

    values = with_override(
        "ex03",
        """
        def claim(conn, worker, now, lease_s):
            row = conn.execute("SELECT * FROM jobs LIMIT 1").fetchone()
            return {"id": row["no_such_column"]}
        """,
    )
    outcome = grade_values("ex03", values)["claims_one_ready_job"]
    assert outcome.status == CheckStatus.FAILED
    assert outcome.got.startswith("your code raised IndexError: No item with that key")
    assert "of claim)" in outcome.got

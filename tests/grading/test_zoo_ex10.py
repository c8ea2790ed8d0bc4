"""Wrong ex10 apps, each caught by the check named after its mistake.

Each entry edits the reference ``ex10_app.py`` (old text -> new text, the old text must
be there) and runs two checks on it through real HTTP: the one named after the mistake
must fail, and a control check the mistake does not touch must still pass, so the
feedback points at the mistake and not at everything. Serving the app costs seconds
per check, so the zoo runs these two and not the whole list.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from gradingkit import HIDDEN, SOLUTIONS, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check

ACCEPT_OK = "accept_answers_202_with_location"
STATUS_OK = "status_shows_the_job_to_its_owner"

ZOO: list[tuple[str, str, str, str, str]] = [
    # (mistake, the check that must fail, a check that must pass, old text, new text)
    (
        "requests without a key share the key 'report:<owner>:None'",
        "requests_without_a_key_are_never_merged",
        STATUS_OK,
        '    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"\n',
        '    key = f"report:{owner}:{idempotency_key}"\n',
    ),
    (
        "the job is read before the caller is known (anonymous 404 for a missing id)",
        "no_token_is_401",
        ACCEPT_OK,
        """    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
""",
        """    try:
        job = store.get(job_id)
    except NotFound:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    owner = caller_of(authorization)
""",
    ),
    (
        "status shows any caller's job",
        "other_owner_gets_404",
        ACCEPT_OK,
        ' or job.payload.get("owner") != owner:',
        ":",
    ),
    (
        "403 for another owner's job (tells them the id exists)",
        "other_owner_gets_404",
        ACCEPT_OK,
        '    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") '
        "!= owner:\n",
        "    if job is not None and job.payload.get('owner') != owner:\n"
        "        return JSONResponse({'detail': 'not yours'}, status_code=403)\n"
        "    if job is None:\n",
    ),
    (
        "202 first, the job written in a background task after the answer",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
        """    from starlette.background import BackgroundTask

    next_id = 1 + len(store.jobs())
    later = BackgroundTask(store.enqueue, "report", {"owner": owner, "request": body}, key=key)
    return JSONResponse({"job_id": next_id}, status_code=202, background=later,
                        headers={"Location": f"/reports/{next_id}", "Retry-After": "2"})
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
    ),
    (
        "a fresh key per request: the Idempotency-Key is ignored",
        "same_key_same_job",
        STATUS_OK,
        'key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"',
        "key = None",
    ),
    (
        "the key is not scoped to the caller",
        "keys_are_scoped_to_the_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{idempotency_key}"',
    ),
    (
        # hash() of a str is salted per process: the restarted server computes another key.
        "the job key built with hash(), which changes with each server process",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{hash((owner, idempotency_key))}"',
    ),
    (
        "the status returns the whole job, payload included",
        "status_hides_the_payload",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))",
        "    return JSONResponse({**status_view(job), 'payload': job.payload})",
    ),
    (
        "200 OK instead of 202 Accepted",
        ACCEPT_OK,
        STATUS_OK,
        "        status_code=202,\n        headers={",
        "        status_code=200,\n        headers={",
    ),
    (
        "a conflict is answered with the first job (200) instead of refused",
        "same_key_other_body_is_refused",
        ACCEPT_OK,
        """    except IdempotencyConflict:
        return JSONResponse(""",
        """    except IdempotencyConflict:
        return JSONResponse({"job_id": store.get_by_key(key).id}, status_code=200)
        return JSONResponse(""",
    ),
]


def reference_app() -> str:
    nb = nbformat.read(notebook_for(SOLUTIONS, "ex10"), as_version=4)
    [cell] = [c for c in nb.cells if c.source.startswith("%%writefile ex10_app.py")]
    return cell.source.partition("\n")[2]


def outcome(check_name: str, workdir: Path):  # type: ignore[no-untyped-def]
    [check] = [c for c in catalog.all_checks("ex10", HIDDEN) if c.name == check_name]
    return run_check(check, Namespace({}, workdir))


@pytest.mark.parametrize(
    "mistake, failing, passing, old, new", ZOO, ids=[entry[0] for entry in ZOO]
)
def test_wrong_app_fails_the_check_named_after_its_mistake(
    tmp_path: Path, mistake: str, failing: str, passing: str, old: str, new: str
) -> None:
    source = reference_app()
    assert old in source, f"the zoo entry {mistake!r} no longer matches the reference"
    (tmp_path / "ex10_app.py").write_text(source.replace(old, new, 1), encoding="utf-8")
    caught = outcome(failing, tmp_path)
    assert caught.status == CheckStatus.FAILED, (caught.status, caught.expected, caught.got)
    assert caught.earned == 0 and caught.expected and caught.got and caught.hint
    assert "Traceback" not in caught.got
    control = outcome(passing, tmp_path)
    assert control.status == CheckStatus.PASSED, (control.status, control.expected, control.got)


def test_missing_app_file_says_which_cell_to_run(tmp_path: Path) -> None:
    result = outcome(ACCEPT_OK, tmp_path)
    assert result.status == CheckStatus.FAILED and "ex10_app.py" in result.expected
    assert "%%writefile" in result.hint


def test_app_that_does_not_import_shows_the_error(tmp_path: Path) -> None:
    (tmp_path / "ex10_app.py").write_text("import no_such_module_x\n", encoding="utf-8")
    result = outcome(ACCEPT_OK, tmp_path)
    assert result.status == CheckStatus.FAILED and "no_such_module_x" in result.got


class Watched(Namespace):
    """A namespace that remembers every process a check spawned."""

    def __init__(self, workdir: Path) -> None:
        super().__init__({}, workdir)
        self.started: list = []

    def spawn(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        proc = super().spawn(argv, **kwargs)
        self.started.append(proc)
        return proc


def test_no_check_leaves_a_server_or_a_scratch_folder_behind(tmp_path: Path) -> None:
    (tmp_path / "ex10_app.py").write_text(reference_app(), encoding="utf-8")
    [check] = [
        c
        for c in catalog.all_checks("ex10", HIDDEN)
        if c.name == "retry_after_the_crash_gets_the_same_job"
    ]
    ns = Watched(tmp_path)
    assert run_check(check, ns).status == CheckStatus.PASSED
    assert len(ns.started) == 2  # the server killed at its 202, then the healthy one
    assert [p.poll() for p in ns.started] == [-9, -9]
    assert [p.name for p in tmp_path.iterdir()] == ["ex10_app.py"]

# %% [markdown]
# # 12 · Async request-reply
#
# *Answer `202 Accepted` only once the job is committed, let a retried request find the
# same job, and show each job only to the caller who asked for it.*
#
# > **Resumo.** Uma requisição demorada vira um job durável: `202` com o id, `Location` e
# > `Retry-After`. Num servidor uvicorn real, só o dono vê o job (para os outros, `404`); se
# > o servidor cai entre o commit e a resposta, o retry com a mesma `Idempotency-Key` recebe
# > o mesmo job. Há ainda um cancelamento, uma credencial recusada no corpo, o `409` para
# > uma chave em andamento, o `X-Request-Id` nos logs do worker e o `408` do cliente lento.
#
# Run time: about 30 seconds (27 to 35 s measured on a busy machine), almost all of it
# starting five real server processes and three workers (each imports FastAPI or labkit).
#
# The async-jobs lesson opens with this question: a request that takes minutes cannot
# hold an HTTP connection open, so the service accepts it as a job and the caller comes
# back for the result. Its rules: the `202` comes only after **durable** acceptance
# ("received by the process" and "recorded for recovery" are different events), the
# status endpoint says who may read a job, and credentials never travel inside the
# message. This lesson runs `labkit.integrations.http.service`, a FastAPI app over the
# job table of lesson 04, as a real server:
#
# 1. `POST` answers `202` with the job id, `Location` and `Retry-After`, before any work;
# 2. a worker process does the work; the caller polls until `succeeded`;
# 3. another caller gets `404` for the same id, exactly like an id that does not exist;
# 4. the server is killed between the commit and the answer; the client's retry with the
#    same `Idempotency-Key` finds the one job, and without a key it makes a second;
# 5. a waiting job is cancelled; a running one cannot be;
# 6. a credential in the body is refused, and the worker resolves a reference instead;
# 7. a second request with a key whose first request is still in progress gets `409`;
# 8. the request's id reaches every log line the worker writes about its job;
# 9. a client that sends its request too slowly is cut off.

# %% [markdown]
# ## Setup
#
# The service needs labkit's `web` extra (FastAPI, uvicorn, httpx); the first cell checks
# and, if one is missing, says the command that installs it and stops there. Everything runs on this machine: no Docker needed.
# The server gets a `FakeClock` (through `LABKIT_HTTP_CLOCK_START`) so every time it
# stores reads the same on every run.

# %%
from labkit.notebook.needs import require

require("fastapi", "uvicorn", "httpx", extra="web")

# %%
import sqlite3
import threading
from contextlib import closing

import httpx

from labkit.clock import LAB_EPOCH, FakeClock, SystemClock
from labkit.errors import InvalidTransition
from labkit.integrations.http.connections import ConnectionLimits
from labkit.integrations.http.operations import Pause
from labkit.integrations.http.serve import start_server
from labkit.worker_process import run_worker_process
from labkit.tables import show
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore

folder = fresh_dir("12")
db = folder / "jobs.db"
APP = "labkit.integrations.http.service:app_from_env"
ENV = {"LABKIT_HTTP_DB": str(db), "LABKIT_HTTP_CLOCK_START": str(LAB_EPOCH)}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
servers = []  # every server this lesson starts, stopped in the last cell


def serve(name, faults=None, pause=None, limits=None):
    env = dict(ENV, LABKIT_HTTP_FAULTS=faults) if faults else dict(ENV)
    if pause is not None:
        env["LABKIT_HTTP_PAUSE"] = str(pause.folder)
    server = start_server(APP, factory=True, env=env, log_path=folder / f"{name}.log",
                          ready_path="/healthz", limits=limits)
    servers.append(server)
    return server


def job_table():
    """The jobs and who asked for them, read from the database file."""
    with closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT j.id, r.owner, r.idempotency_key AS idem_key, j.state, j.attempt,"
            " j.dead_reason FROM jobs j LEFT JOIN http_requests r ON r.job_id = j.id"
            " ORDER BY j.id").fetchall()
    show([dict(r) for r in rows])


print(f"folder={folder}")

# %% [markdown]
# ## 1. `202 Accepted`, before any work
#
# The server listens on 127.0.0.1 at a port the kernel picks (the parent binds port 0
# and hands the socket to uvicorn), so two lessons never fight over a port; the number
# changes every run and is not printed. No worker runs yet.

# %%
api = serve("api")
client = httpx.Client(base_url=api.url, timeout=30)
body = {"month": "2026-01", "credential_id": "erp-readonly"}
reply = client.post("/jobs/report", json=body, headers={**ALICE, "Idempotency-Key": "jan-1"})
print(reply.status_code, reply.json())
print("Location:", reply.headers["Location"], " Retry-After:", reply.headers["Retry-After"])
assert reply.status_code == 202
job_id = reply.json()["job_id"]

# %% [markdown]
# The answer is only a promise; the database is the proof. The job is there, `pending`,
# with its owner and key in `http_requests`, written in the **same transaction** as the
# job (the service passes its connection to `enqueue(conn=...)`), so there is never a
# job without an owner or an owner row without a job.

# %%
job_table()

# %% [markdown]
# The owner polls the `Location`. The status shows state, attempts and when the next
# attempt may run, and a `Retry-After` tells the client how long to wait before asking
# again. It never shows the payload.

# %%
status = client.get(reply.headers["Location"], headers=ALICE)
print(status.status_code, status.json())
print("Retry-After:", status.headers["Retry-After"])
assert status.json()["state"] == "pending" and "month" not in status.text

# %% [markdown]
# ## 2. Only the owner sees the job
#
# Bob asks for Alice's job. He gets `404`, not `403`: a `403` would confirm that job 1
# exists, and ids that leak are a map of other people's work. His answer is byte for
# byte the one for an id nobody has. Without a token, `401`.

# %%
theirs = client.get(f"/jobs/{job_id}", headers=BOB)
nobody = client.get("/jobs/999", headers=BOB)
anonymous = client.get(f"/jobs/{job_id}")
print("bob asks for alice's job:", theirs.status_code, theirs.json())
print("bob asks for job 999:    ", nobody.status_code, nobody.json())
print("no token:                ", anonymous.status_code, anonymous.json()["detail"][:60], "...")
assert theirs.status_code == nobody.status_code == 404 and theirs.text == nobody.text
assert anonymous.status_code == 401

# %% [markdown]
# ## 3. A worker does the work; the caller polls
#
# A worker process starts beside the server (`labkit.worker_process.run_worker_process`, the
# report handler of `labkit.integrations.http.report_job`), drains the queue and exits. The
# client polls the status until it is final. How many polls that takes depends on
# timing, so only the final status is printed.

# %%
worker = run_worker_process(db, "labkit.integrations.http.report_job:HANDLERS", name="w1",
                            clock_start=LAB_EPOCH + 5, mode="drain", log_path=folder / "w1.log")
final = None
for _ in range(600):
    final = client.get(f"/jobs/{job_id}", headers=ALICE).json()
    if final["state"] in ("succeeded", "dead"):
        break
    SystemClock().sleep(0.1)  # a real client would wait Retry-After seconds
print("worker exit code:", worker.wait(60))
print(final)
assert final["state"] == "succeeded" and final["result"]["signed_in"] is True

# %% [markdown]
# The job asked for its credential by reference (`credential_id: erp-readonly`). The
# worker looked the secret up in the lab's secret store at run time; the database file
# never held it:

# %%
from labkit.integrations.http.report_job import LAB_SECRET_STORE

secret = LAB_SECRET_STORE["erp-readonly"].encode()
on_disk = b"".join(p.read_bytes() for p in folder.glob("jobs.db*"))
print("secret in the database files:", secret in on_disk)
assert secret not in on_disk
job_table()

# %% [markdown]
# ## 4. The server dies between the commit and the answer
#
# The worst moment for an accept endpoint: the job is committed, the `202` is not sent
# yet, and the process dies (an OOM kill, a deploy). The client sees a broken
# connection and cannot know whether its request counted. We start a second server
# whose fault plan kills it for real (SIGKILL) right after the commit,
# `LABKIT_HTTP_FAULTS="after_commit:kill"`, and send it a request with a key.

# %%
KILL_AFTER_COMMIT = "seed=0; after_commit:kill nth=1"  # the fault plan's replay line
print("fault plan:", KILL_AFTER_COMMIT)
doomed = serve("doomed", faults=KILL_AFTER_COMMIT)
feb = {"month": "2026-02", "credential_id": "erp-readonly"}
try:
    httpx.post(doomed.url + "/jobs/report", json=feb,
               headers={**ALICE, "Idempotency-Key": "feb-1"}, timeout=30)
except httpx.TransportError:
    print("the client got: a broken connection, no answer")
else:
    raise AssertionError("the server answered: the after_commit kill did not fire")
doomed.popen.wait(30)
print("server exit code:", doomed.returncode)
print([line for line in doomed.log_text().splitlines() if line.startswith("FAULT")])
assert doomed.returncode == -9
job_table()

# %% [markdown]
# The job (id 2) is in the table although nobody was told. The client does what a
# client should: retry, with **the same** `Idempotency-Key`. The retry lands on the
# healthy server and gets job 2 back, `created: false`. One job. It is the client that
# must retry: a load balancer does not, by default, send a POST again once it reached
# a server (nginx's proxy module docs, `proxy_next_upstream`: a non-idempotent request
# goes to the next server only with the `non_idempotent` option).
#
# The answer also says, in a header, that it is a replay: `Idempotent-Replayed: true`,
# the header Stripe adds to a replayed response (Stripe's "Advanced error handling"
# page, docs.stripe.com/error-low-level). A first answer carries no such header.

# %%
retry = client.post("/jobs/report", json=feb, headers={**ALICE, "Idempotency-Key": "feb-1"})
print(retry.status_code, retry.json())
print("Idempotent-Replayed:", retry.headers.get("Idempotent-Replayed"),
      "| on the first answer, job 1:", reply.headers.get("Idempotent-Replayed"))
assert retry.status_code == 202 and retry.json() == {"job_id": 2, "state": "pending",
                                                     "created": False}
assert retry.headers["Idempotent-Replayed"] == "true"

# %% [markdown]
# Two spellings of one key. The IETF HTTPAPI draft "The Idempotency-Key HTTP Header
# Field" (draft-ietf-httpapi-idempotency-key-header, section "Syntax") makes the value
# an RFC 8941 structured-field String, in double quotes:
# `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`. Stripe's clients send the
# bare value (its API reference: `-H "Idempotency-Key: KG5LxwFBepaKHyUD"`). The service
# accepts both, and the quotes are syntax, not part of the key: `"feb-1"` is `feb-1`.

# %%
for sent in ('"feb-1"', "feb-1"):
    again_feb = client.post("/jobs/report", json=feb, headers={**ALICE, "Idempotency-Key": sent})
    print(f"Idempotency-Key: {sent:9} ->", again_feb.status_code, again_feb.json(),
          "replayed:", again_feb.headers.get("Idempotent-Replayed"))
    assert again_feb.json()["job_id"] == 2
job_table()

# %% [markdown]
# A value that opens a quote must be one well-formed String. A missing closing quote,
# or text after it, or an escape other than `\"` and `\\`, is `400`, and the answer
# says which of these it was.

# %%
broken = client.post("/jobs/report", json=feb, headers={**ALICE, "Idempotency-Key": '"feb-1'})
print(broken.status_code, broken.json()["detail"])
assert broken.status_code == 400 and "closing quote is missing" in broken.text

# %% [markdown]
# The same crash without a key: the retry cannot be recognised, so the report is
# queued twice (jobs 3 and 4), and the customer would get it twice.

# %%
doomed_again = serve("doomed-again", faults=KILL_AFTER_COMMIT)
mar = {"month": "2026-03", "credential_id": "erp-readonly"}
try:
    httpx.post(doomed_again.url + "/jobs/report", json=mar, headers=ALICE, timeout=30)
except httpx.TransportError:
    print("the client got: a broken connection, no answer")
doomed_again.popen.wait(30)
print("server exit code:", doomed_again.returncode)
again = client.post("/jobs/report", json=mar, headers=ALICE)
print(again.status_code, again.json())
job_table()
assert doomed_again.returncode == -9 and again.json()["job_id"] == 4

# %% [markdown]
# The same key with a **different** body is not a retry but a mistake (or a bug that
# reuses keys). Answering with the old job would be wrong, and so would a new one: the
# service refuses and says why. `422` is the status the IETF Idempotency-Key draft
# gives this case; Stripe refuses it too, with its own `idempotency_error`.
#
# This service keeps a key as long as its job row. Stripe's v1 API may prune a key
# once it is at least 24 hours old (its API reference, "Idempotent requests"); its v2
# API uses a 30-day window (docs.stripe.com/error-low-level). A client that retries
# later than the server remembers gets a new operation.

# %%
clash = client.post("/jobs/report", json={"month": "2026-12"},
                    headers={**ALICE, "Idempotency-Key": "feb-1"})
print(clash.status_code, clash.json()["detail"])
assert clash.status_code == 422

# %% [markdown]
# ## 5. Cancel
#
# Alice cancels a job that has not started: it leaves the queue in the state
# `cancelled`, which is final and is not a dead letter. The dead letters (lesson 07) are
# what an operator must look at and fix; a job its owner took back needs nobody, so it
# is not among them, and a redrive cannot bring it back. Oban keeps `cancelled` apart
# from `discarded` the same way ([Oban: job lifecycle](https://hexdocs.pm/oban/job_lifecycle.html)),
# and so does River (its `JobState`, [riverqueue on docs.rs](https://docs.rs/riverqueue/latest/riverqueue/job/enum.JobState.html)).
# The cancelled job is number 5; the table below is read from the database.

# %%
apr = client.post("/jobs/report", json={"month": "2026-04", "credential_id": "erp-readonly"},
                  headers=ALICE).json()
cancelled = client.delete(f"/jobs/{apr['job_id']}", headers=ALICE)
print(cancelled.status_code, {k: cancelled.json()[k] for k in ("job_id", "state", "cancelled")})
assert cancelled.json()["cancelled"] is True
with JobStore(db, clock=FakeClock(LAB_EPOCH)) as store:
    dead_ids = [d.id for d in store.dead_letters()]
    show([{"job": apr["job_id"], "state": store.get(apr["job_id"]).state,
           "among the dead letters": apr["job_id"] in dead_ids}])
    try:
        store.redrive(apr["job_id"])
    except InvalidTransition as exc:
        print("redrive:", exc)
assert apr["job_id"] not in dead_ids

# %% [markdown]
# A job a worker is running cannot be taken back: the work is under way, and stopping
# it halfway needs the handler's cooperation. Here we play the worker and claim the
# next job by hand; the worker then finishes every job still waiting (2, 3 and 4), and
# the running one is released at the end.

# %%
hand = JobStore(db, clock=FakeClock(LAB_EPOCH + 20))
worker = run_worker_process(db, "labkit.integrations.http.report_job:HANDLERS", name="w2",
                            clock_start=LAB_EPOCH + 10, mode="until_idle",
                            log_path=folder / "w2.log")
print("worker exit code:", worker.wait(60))
may = client.post("/jobs/report", json={"month": "2026-05", "credential_id": "erp-readonly"},
                  headers=ALICE).json()
running = hand.claim("hand-worker")
refused = client.delete(f"/jobs/{may['job_id']}", headers=ALICE)
print(refused.status_code, refused.json()["detail"])
assert running.id == may["job_id"] and refused.status_code == 409
hand.complete(running, result={"report": "sales 2026-05"})
hand.close()
job_table()

# %% [markdown]
# ## 6. Credentials never go into a job
#
# A job row is read by workers, operators, dashboards and backups. A request that puts a
# secret in the body is refused with `422`, and nothing is stored; the answer names the
# field's path and the kind of secret, never the value, and says what to send instead.
# A field named like a credential is refused at any depth (`password`, and also `auth`,
# `otp`, and `password` spelled with a Cyrillic `а`), by the same rule `enqueue` applies
# to every job (`labkit.redact.is_secret_field`).

# %%
bad = client.post("/jobs/report", json={"month": "2026-06", "erp": {"password": "hunter2"}},
                  headers=ALICE)
print(bad.status_code, bad.json()["errors"])
print(bad.json()["detail"])
with JobStore(db, clock=FakeClock(LAB_EPOCH)) as store:
    print("jobs in the table:", sum(store.counts().values()))
assert bad.status_code == 422 and "hunter2" not in bad.text

# %% [markdown]
# A harmless name does not make a value harmless: a note can carry `password=...`, a
# URL its password, a field a bearer token, a JWT, a cloud key or a card number. The
# service scans every value with the rules that scrub stored errors (`labkit.redact`,
# lesson 07), so one list decides both what is hidden and what is refused.

# %%
note = client.post("/jobs/report", headers=ALICE, json={
    "month": "2026-06", "note": "ERP login is report / password=hunter2",
    "source": "postgresql://report:hunter2@erp-db/erp"})
print(note.status_code, note.json()["errors"])
assert note.status_code == 422 and "hunter2" not in note.text

# %% [markdown]
# Every refusal follows that rule, including the ones FastAPI writes itself: its
# validation error lists the `input` it could not take, so the service replaces it
# with the field and the fault. A body that is a JSON list instead of an object:

# %%
typo = client.post("/jobs/report", json=["2026-06", "hunter2"], headers=ALICE)
print(typo.status_code, typo.json()["errors"])
assert typo.status_code == 422 and "hunter2" not in typo.text

# %% [markdown]
# ## 7. The same key while the first request is still in progress
#
# The draft's third case: a retry that arrives **before** the original request has
# been answered. There is no answer to replay yet, so the draft says `409 Conflict`
# (its "Error Scenarios"), and the client retries later. To make "still in progress"
# last long enough to see, a third server starts with a pause
# (`LABKIT_HTTP_PAUSE`, `labkit.integrations.http.service.Pause`): the first request
# with a key stops while it holds its key, before its transaction, and waits until the
# lesson resumes it. One thread sends that first request; the main thread sends the
# second one while the first is held.

# %%
pause = Pause(folder / "pause")
pause.folder.mkdir()
slow = serve("slow", pause=pause)
jul, JUL_KEY = {"month": "2026-07", "credential_id": "erp-readonly"}, '"jul-1"'
answers = []
first = threading.Thread(target=lambda: answers.append(httpx.post(
    slow.url + "/jobs/report", json=jul, headers={**ALICE, "Idempotency-Key": JUL_KEY},
    timeout=30)))
first.start()
print("the server holds the first request, key:", pause.wait_until_held())
second = httpx.post(slow.url + "/jobs/report", json=jul,
                    headers={**ALICE, "Idempotency-Key": JUL_KEY}, timeout=30)
print(second.status_code, second.json()["detail"])
print("Retry-After:", second.headers["Retry-After"], "| first answered yet:", bool(answers))
assert second.status_code == 409 and first.is_alive() and not answers

# %% [markdown]
# The lesson resumes the first request: it commits job 7 and gets the `202`. The
# second client, retrying after its `Retry-After`, now gets the replay. One job.
# The `409` comes from a list of keys in progress that each server process keeps in
# memory, so a crash cannot leave a key stuck "in progress"; two server processes do
# not see each other's list, and there the unique key still makes one job (the second
# request waits for SQLite's write lock, then gets the replay).

# %%
pause.resume()
first.join(30)
print("first: ", answers[0].status_code, answers[0].json())
later = httpx.post(slow.url + "/jobs/report", json=jul,
                   headers={**ALICE, "Idempotency-Key": JUL_KEY}, timeout=30)
print("retry: ", later.status_code, later.json(),
      "replayed:", later.headers.get("Idempotent-Replayed"))
assert answers[0].json() == {"job_id": 7, "state": "pending", "created": True}
assert later.json()["job_id"] == 7 and later.headers["Idempotent-Replayed"] == "true"
job_table()

# %% [markdown]
# ## 8. One id from the request to the job's logs
#
# A customer writes: "the August report I asked for never came". Their client logged
# the id it sent with the request; the server logs its own lines, the worker its own,
# on another machine, hours later. Without a name they share, nobody can say which
# worker lines belong to that request. The service reads an `X-Request-Id` header (or
# makes one), sends it back on every answer, and keeps the id of the request that
# **created** a job beside the job's owner, in the job's own transaction
# (`labkit.integrations.http.correlation`). The name `X-Request-Id` is a convention,
# not a standard; the W3C standard for the same idea, across services, is the
# `traceparent` header of [Trace Context](https://www.w3.org/TR/trace-context/).
#
# Alice asks for August with `req-7f3a`; her client times out and retries with the same
# `Idempotency-Key` and a fresh request id, `req-9b21`.

# %%
aug, AUG = {"month": "2026-08", "credential_id": "erp-readonly"}, {**ALICE, "Idempotency-Key": "aug-1"}
asked = client.post("/jobs/report", json=aug, headers={**AUG, "X-Request-Id": "req-7f3a"})
again = client.post("/jobs/report", json=aug, headers={**AUG, "X-Request-Id": "req-9b21"})
for reply in (asked, again):
    print(reply.status_code, reply.json(), "X-Request-Id:", reply.headers["X-Request-Id"],
          "replayed:", reply.headers.get("Idempotent-Replayed"))
assert asked.json()["job_id"] == again.json()["job_id"] == 8

# %% [markdown]
# The retry is a replay, not a `422`: the request id is **not** in the payload, so the
# fingerprint that compares a retried body with the first one never sees it. The
# database keeps the first request's id for job 8, and the payload has no id at all:

# %%
with closing(sqlite3.connect(db)) as conn:
    conn.row_factory = sqlite3.Row
    row = conn.execute("SELECT j.id, r.request_id, j.payload FROM jobs j"
                       " JOIN http_requests r ON r.job_id = j.id WHERE j.id = 8").fetchone()
show([dict(row)])
assert row["request_id"] == "req-7f3a" and "req-" not in row["payload"]

# %% [markdown]
# A worker knows only the job. Its log lines are JSON (`labkit.logs.JobFormatter`), and
# a log filter, `labkit.logs.FieldsByJob`, looks each line's `job_id` up in
# `http_requests` (`log_fields=` names the lookup) and adds the `request_id`. The
# worker drains the queue, so jobs 2, 3, 4 and 7 of the earlier sections run too.
# Then one search over both logs for `req-7f3a`:

# %%
from labkit import logs

w2 = run_worker_process(db, "labkit.integrations.http.report_job:HANDLERS", name="w2",
                        clock_start=LAB_EPOCH + 60, mode="drain", log_path=folder / "w2.log",
                        log_fields="labkit.integrations.http.correlation:job_request_ids")
print("worker exit code:", w2.wait(60))
lines = logs.parse(api.log_text()) + logs.parse(w2.log_text())
FIELDS = ("at", "logger", "job_id", "request_id", "event")
found = [{k: line.get(k) for k in FIELDS} for line in lines if line.get("request_id") == "req-7f3a"]
show(found)
replay = [line["event"] for line in lines if line.get("request_id") == "req-9b21"]
print("the retry's line:", replay)
assert [line["logger"] for line in found] == ["labkit.http", "labkit.worker"]
assert replay == ["replayed job 8 to a retry: it was accepted by request req-7f3a"]

# %% [markdown]
# Two lines for `req-7f3a`: the server accepted job 8, and worker `w2` ran it, a minute
# later by its clock, in another process. The retry's own id, `req-9b21`, finds the
# replay, which names the first request; either id leads to the whole story. The id
# stays out of the payload on purpose. In production it travels as the message's
# metadata, beside the body: OpenTelemetry's conventions for messaging attach the
# context a message was created in to the message itself
# ([messaging spans](https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/)).

# %% [markdown]
# ## 9. A slow client gets a deadline
#
# A server that waits for a request as long as the client likes can be held by anyone:
# connect and send nothing, or a header a byte a second (the "slowloris" attack), and
# each connection keeps a file descriptor and a slot. uvicorn bounds two things
# (its [Settings](https://github.com/encode/uvicorn/blob/master/docs/settings.md),
# "Resource Limits" and "Timeouts"): `--timeout-keep-alive` closes a connection idle
# between two requests, and `--limit-concurrency` answers `503` to a request that
# arrives while that many connections or tasks are open. Keep-alive is its only timeout
# ([Server Behavior](https://github.com/encode/uvicorn/blob/master/docs/server-behavior.md),
# "Timeouts"): nothing limits how long a request's head or body may take to arrive.
#
# `labkit.integrations.http.connections` adds both deadlines to uvicorn's protocol and
# sets all of it from one record, `ConnectionLimits`; every server of this lesson ran
# with its defaults:

# %%
print(ConnectionLimits())

# %% [markdown]
# A fifth server with a one-second head deadline. A client sends half a request head
# and stops; the server answers `408 Request Timeout` and closes the connection.

# %%
import json
import socket
from urllib.parse import urlsplit

guarded = serve("guarded", limits=ConnectionLimits(head_s=1.0, body_s=2.0))
where = urlsplit(guarded.url)
answer = b""
with socket.create_connection((where.hostname, where.port), timeout=15) as slow:
    slow.sendall(b"POST /jobs/report HTTP/1.1\r\nHost: lab\r\nAuthoriz")  # then nothing
    while chunk := slow.recv(4096):  # until the server closes the connection
        answer += chunk
head, _, body = answer.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode(), "|", json.loads(body)["detail"])
assert answer.startswith(b"HTTP/1.1 408")

# %% [markdown]
# ## Stop everything
#
# Every server ran in its own process group; stopping one kills the whole group. Both
# crashed servers are already dead (`-9`); the other three are stopped now.

# %%
client.close()
for server in servers:
    server.stop()
print([server.returncode is not None for server in servers])
assert all(server.returncode is not None for server in servers)

# %% [markdown]
# ## What you should see
#
# | step | HTTP answer | in the database |
# |---|---|---|
# | POST with a key | `202`, `Location: /jobs/1`, `Retry-After: 2` | job 1 `pending`, owner alice, key `jan-1` |
# | bob, job 1 / job 999 | `404` / `404`, the same body | unchanged |
# | worker drains, client polls | `succeeded`, result `sales 2026-01` | attempt 1; the secret not in the file |
# | server killed after commit | the client gets a broken connection | job 2 `pending` |
# | retry, same key | `202`, job 2, `created: false`, `Idempotent-Replayed: true` | still one job for `feb-1` |
# | the key quoted (`"feb-1"`) and bare (`feb-1`) | `202`, job 2 both times, replayed | still one job for `feb-1` |
# | a quoted key without its closing quote | `400`, "the closing quote is missing" | unchanged |
# | the same crash without a key | `202`, job 4 | jobs 3 and 4: a duplicate |
# | same key, other body | `422` with the reason | unchanged |
# | cancel a waiting job | `200`, `cancelled: true` | job 5 `cancelled`, not a dead letter; a redrive refused |
# | cancel a running job | `409`, "cannot be cancelled now" | job 6 `running`, then `succeeded` |
# | password in the body | `422`, field named, value not echoed | no new job |
# | `password=` in a note, a password in a URL, a list for a body | `422`, each field and its fault, no value | no new job |
# | same key while the first is paused | `409`, "still being handled", `Retry-After: 2` | unchanged |
# | the first resumed, then the retry | `202` job 7 `created: true`; the retry replayed | job 7 `pending`, key `jul-1` |
# | POST `X-Request-Id: req-7f3a`, retry `req-9b21` | `202` job 8 twice, each answer echoing its own id | job 8 with request id `req-7f3a`; no id in the payload |
# | a worker drains; search the logs for `req-7f3a` | | the server's "accepted job 8" and `w2`'s line for job 8 |
# | half a request head, then silence | `408` after the 1 s head deadline, connection closed | unchanged |
#
# **What to take away**
#
# - Answer `202` only after the job is committed: "received" and "recorded" are different
#   events.
# - An `Idempotency-Key` lets a client retry after a lost answer and get the same job
#   back; without one, the retry makes a duplicate.
# - Show a job only to its owner, and answer `404` to everyone else, exactly as for an id
#   that does not exist.
# - Keep secrets out of jobs: refuse them by field name and by value, and send a
#   reference the worker resolves.
# - Carry one request id from the HTTP request to the worker's log lines, beside the
#   payload, not in it.
# - Put deadlines on slow clients: a server that waits forever can be held by anyone.
#
# In production the same shape is a FastAPI or Django view in front of Celery, RQ or a
# job table, behind a load balancer; callers are identified by your
# identity provider and the secret store is Vault or a cloud secrets manager.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 13 · Beyond one machine](13_beyond_one_machine.ipynb)

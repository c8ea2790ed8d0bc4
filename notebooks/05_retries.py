# %% [markdown]
# # 05 · Retries: classify, back off, add jitter, know when to stop
#
# *Retry only what can succeed later, wait longer each time with a cap, spread the
# waits with jitter so clients do not come back together, and stop at a budget.*
#
# > **Resumo.** Só faça retry do que pode dar certo depois: classifique o erro, espere
# > cada vez mais (backoff com teto), espalhe as esperas com jitter e saiba quando parar.
# > Você vai ver a classificação dos erros, o jitter em gráfico, Retry-After e deadline,
# > o thundering herd simulado em números, o token expirado que precisa falhar na hora (e
# > por que um refresh não é um retry) e o retry guardado como estado na tabela de jobs.
#
# Run time: about 3 seconds (mostly the thundering-herd simulation: 250 simulated runs).
#
# The cron article says it bluntly: a retry without a limit is automated stubbornness, and a
# retry without idempotency is duplication with self-esteem. The Celery-in-production article shows the Celery
# settings that do it in production (`autoretry_for`, `retry_backoff`,
# `retry_backoff_max`, `retry_jitter`, `max_retries`). This lesson takes those apart
# with `labkit.retry`:
#
# 1. classify errors: never sent, maybe done, permanent, shown with a real HTTP call;
# 2. exponential backoff with a cap;
# 3. jitter (full, equal, decorrelated), plotted;
# 4. Retry-After, a deadline and an attempts budget, against the outside world; an
#    expired token, and how a refresh differs from a retry;
# 5. the thundering herd, simulated: why jitter matters, in numbers;
# 6. retries in the process (`retry_call`) versus retries as job state (`JobStore`);
# 7. retry layers that multiply, and a shared retry budget.

# %% [markdown]
# ## Setup
#
# A `FakeClock` (a one-minute backoff takes no time and prints exact timestamps), a
# seeded rng for every random draw, and a fresh folder. Matplotlib draws inline; its
# font-cache notice is silenced so a first run prints the same text as every other.

# %%
import logging
import random
from collections import Counter

logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
import matplotlib.pyplot as plt  # noqa: E402

from labkit.clock import FakeClock, isoformat
from labkit.errors import PermanentError, ResponseLost, TransientError
from labkit.patterns.herd import compare
from labkit.tables import jobs_table, show
from labkit.retry import (
    RetryBudget,
    RetryPolicy,
    decorrelated_jitter,
    default_classify,
    delays,
    equal_jitter,
    exponential,
    full_jitter,
    random_uniform,
    retry_call,
)
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.world import World
from labkit.worker import Worker

SEED = 5
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("05")
world = World(folder / "world.db", clock=clock)
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. Classify before you retry
#
# Not every failure deserves another try, and not every retry is safe. The cron article
# sorts failures into transient and permanent and counts timeouts among the transient
# ones. That skips the question that decides whether a retry can charge a customer
# twice: **did the request reach the other side?** `labkit.retry` sorts every error in
# three groups:
#
# * **never sent**: the connection was refused, the name did not resolve, or the server
#   said it did not take the request: 408 (it gave up waiting for the request), 429
#   (rate limited), 503 (not taking requests now). Nothing happened; retry with backoff.
# * **maybe done**: the request went out and the answer did not come back: a read
#   timeout, a connection reset after sending, a 500, 502 or 504, a lost response. The
#   effect may have happened, so retry only under an idempotency key the destination
#   honours, or after checking the destination first (reconciliation, lesson 06).
# * **permanent**: 400 (bad payload), 401 (bad credential), 404, validation errors, and
#   bugs. Retrying repeats them, and the Celery-in-production article's trap
#   (`autoretry_for=(Exception,)`) hides a `KeyError` behind five retries.
#
# RFC 9110 (section 15.6) defines the server errors: a 500 is an "unexpected condition"
# met while handling the request, a 502 and a 504 come from a gateway whose upstream
# answered badly or too late, and a 503 is a temporary overload or maintenance, often
# with a `Retry-After`. Only the 503 says the request was turned away; after the others
# the upstream may have done the work.
#
# First, the two timeouts on a real socket. A small HTTP server on this machine makes
# the charge as soon as it reads the request, then takes 1 s to answer. The client,
# Python's own `http.client`, gives up after 0.3 s.

# %% tags=["no-output"]
import http.client  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

charged: list[str] = []  # what the server did, whatever the client heard
answer_now = threading.Event()


class SlowPayments(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        charged.append(self.path)  # the effect happens here...
        answer_now.wait(1.0)  # ...and the answer is late
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), SlowPayments)
threading.Thread(target=server.serve_forever, daemon=True).start()


def post(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.3)
    try:
        conn.request("POST", path, body=b'{"amount": 4990}')
        return conn.getresponse().status
    except OSError as error:
        return error
    finally:
        conn.close()

# %% [markdown]
# One call to the slow server, one to a port where nothing listens:

# %%
with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
    probe.bind(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
read_timeout = post(server.server_address[1], "/charges/ana")
refused = post(closed_port, "/charges/bruno")
answer_now.set()
server.shutdown()
server.server_close()
show([{"call": "slow server", "error": type(read_timeout).__name__,
       "verdict": default_classify(read_timeout), "server charged": "/charges/ana" in charged},
      {"call": "closed port", "error": type(refused).__name__,
       "verdict": default_classify(refused), "server charged": "/charges/bruno" in charged}])
assert isinstance(read_timeout, TimeoutError) and charged == ["/charges/ana"]
assert isinstance(refused, ConnectionRefusedError)

# %% [markdown]
# The read timeout is a `TimeoutError`, and the charge was made: a client that retries
# every timeout charges ana twice. That is the duplicate e-mail of the
# Celery-in-production article under another name. The refused connection never
# reached anyone, so retrying it is always safe. Real clients raise the read timeout
# (`TimeoutError` here, `httpx.ReadTimeout` or `requests.ReadTimeout` elsewhere), never
# a tidy "response lost"; `default_classify` knows those libraries' class names too.
#
# An **idempotency key** (lesson 06 takes it apart) is a name for one request that the
# caller sends along, as Stripe's `Idempotency-Key` header. The destination stores its
# reply under that key; when a request arrives again with the same key and the same
# parameters, it answers with the stored reply and does nothing new. It must be the
# *destination* that honours it: our own job key (lesson 03) protects our table, not
# the payment provider.
#
# `RetryPolicy.decide` turns the verdict into a decision after a failed first attempt,
# once for a call without an idempotency key and once for a call with one.

# %%
class HTTPStatusError(Exception):
    """What an HTTP client raises for an error status (httpx's and requests' carry it)."""

    def __init__(self, status, message=""):
        super().__init__(f"HTTP {status} {message}".strip())
        self.status = status


policy = RetryPolicy(max_attempts=5, backoff=exponential(base=1, cap=60))
errors = [
    ("connection refused", refused),
    ("429 rate limited", TransientError("429 Too Many Requests", status=429, retry_after=20)),
    ("503 unavailable", HTTPStatusError(503, "Service Unavailable")),
    ("read timeout", read_timeout),
    ("500 server error", HTTPStatusError(500, "Internal Server Error")),
    ("504 gateway timeout", HTTPStatusError(504, "Gateway Timeout")),
    ("response lost", ResponseLost("timeout after the request was sent")),
    ("400 bad request", PermanentError("400: amount must be positive", status=400)),
    ("401 unauthorized", PermanentError("401: invalid API key", status=401)),
    ("404 not found", PermanentError("404: no customer cus_9", status=404)),
    ("validation", ValueError("e-mail address 'ana@' is not valid")),
    ("bug", KeyError("customer_id")),
]


def decision(error, idempotent):
    d = policy.decide(error, 1, random.Random(SEED), idempotent=idempotent)
    return f"retry in {d.delay:g}s" if d.retry else "stop"


table = [{"error": label, "type": type(e).__name__, "verdict": default_classify(e),
          "no key": decision(e, False), "with idempotency key": decision(e, True)}
         for label, e in errors]
show(table)
rows = {row["error"]: row for row in table}
never_sent = ("connection refused", "429 rate limited", "503 unavailable")
maybe_done = ("read timeout", "500 server error", "504 gateway timeout", "response lost")
assert {rows[k]["verdict"] for k in never_sent} == {"never_sent"}
assert {rows[k]["verdict"] for k in maybe_done} == {"maybe_done"}
assert {rows[k]["no key"] for k in maybe_done} == {"stop"}
assert {rows[k]["with idempotency key"] for k in maybe_done} == {"retry in 1s"}
assert {r["verdict"] for r in table[7:]} == {"permanent"}
assert rows["429 rate limited"]["no key"] == "retry in 20s"  # the Retry-After, not 1 s

# %% [markdown]
# Three things to read in that table. Permanent errors stop at once, whatever the key.
# The 429 waits 20 s, not 1 s: the server said when to come back (section 4). And every
# maybe-done failure, the read timeout first, stops unless the call carries an
# idempotency key: without one, a retry is exactly lesson 01's third lie. A job in the
# job table follows the same rule: `JobStore.fail` retries a maybe-done failure only for
# a job enqueued with a natural key, and buries a keyless one as "outcome unknown".

# %% [markdown]
# ## 2. Exponential backoff, with a cap
#
# If the service is down, retrying at once only adds load to a service that is already
# failing. Exponential backoff waits `base * 2**n` before retry `n` (1 s, 2 s, 4 s, ...),
# giving it time to recover. Without a cap the wait grows without bound (after 20
# failures it would be 12 days), so it is capped: Celery's `retry_backoff_max` defaults
# to 600 s. Here the cap is 60 s.

# %%
expo = exponential(base=1, cap=60)
waits = delays(expo, 10, rng)
show([{"retry n": n, "wait (s)": w, "waited so far (s)": sum(waits[: n + 1])}
      for n, w in enumerate(waits)])
assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]

# %% [markdown]
# ## 3. Jitter
#
# Exponential backoff has one flaw, and it shows when many clients fail together, say a
# hundred workers whose calls all failed when the payment API went down at 00:00:00.
# They all wait exactly 1 s, all come back at the same instant, all fail again, all
# wait 2 s... Every retry is a synchronised wave. **Jitter** draws each wait at random
# in a window, so the waves flatten out. The AWS article on backoff (Marc Brooker,
# 2015) compares three ways, all in `labkit.retry`, all drawn from the injected rng:
#
# | strategy | wait before retry `n`, with `e = min(cap, base * 2**n)` |
# |---|---|
# | full jitter | `U(0, e)` (Celery's `retry_jitter=True`) |
# | equal jitter | `e/2 + U(0, e/2)`: never less than half |
# | decorrelated jitter | `min(cap, U(base, 3 * previous wait))` |
#
# One client's first six waits under each. Decorrelated jitter grows from the previous
# wait, not from `n`, so it can also fall back towards `base`:

# %%
STRATEGIES = {
    "exponential": exponential(base=1, cap=60),
    "full jitter": full_jitter(base=1, cap=60),
    "equal jitter": equal_jitter(base=1, cap=60),
    "decorrelated jitter": decorrelated_jitter(base=1, cap=60),
}
show([{"strategy": name, **{f"n={n}": round(w, 2) for n, w in enumerate(delays(b, 6, rng))}}
      for name, b in STRATEGIES.items()])

# %% [markdown]
# Now the hundred clients. Each keeps failing (the API is still down) and retries six
# times; every dot is one retry arriving at the API. With plain exponential backoff the
# dots stack into vertical lines: a hundred calls at the same instant, six times over.
# With jitter they spread across each window.

# %%
retry_times = {}
for name, backoff in STRATEGIES.items():
    retry_times[name] = []
    for client in range(100):
        t = 0.0
        for wait in delays(backoff, 6, rng):
            t += wait
            retry_times[name].append((t, client))

fig, axes = plt.subplots(4, 1, figsize=(10, 8), sharex=True)
for ax, (name, points) in zip(axes, retry_times.items(), strict=True):
    ax.scatter([t for t, _ in points], [c for _, c in points], s=2)
    ax.set_title(name, fontsize=10, loc="left")
    ax.set_ylabel("client")
axes[-1].set_xlabel("seconds after the outage began")
axes[-1].set_xlim(0, 130)
fig.tight_layout()
plt.show()

# %% [markdown]
# The same thing as a number the API's operators would feel: the most retries that
# arrive within any one 100 ms slice (its peak load).

# %%
peaks = {name: Counter(int(t * 10) for t, _ in points).most_common(1)[0][1]
         for name, points in retry_times.items()}
show([{"strategy": name, "retries": len(retry_times[name]), "peak per 100 ms": peak}
      for name, peak in peaks.items()])
assert peaks["exponential"] == 100
assert all(peaks[name] < 50 for name in ("full jitter", "equal jitter", "decorrelated jitter"))

# %% [markdown]
# ## 4. Retry-After, a deadline and an attempts budget
#
# `retry_call(fn, policy, clock, rng)` retries one call inside the process, asking the
# policy after every failure. In production this is tenacity's job; here it runs on the
# `FakeClock`, so every wait is exact and instant. `say` prints each decision as
# `retry_call` makes it.
#
# **Retry-After.** The payment API answers 429 with "retry after 30 s", twice, then
# works. The backoff alone would wait 2 s; the server's word is a floor under it.

# %%
def say(attempt, error, decided):
    print(f"{isoformat(clock.now())}  attempt {attempt} failed: {error}")
    print(f"{'':19}  -> {decided.reason}")


world.payments.script("rate_limit", "rate_limit", "ok", retry_after=30)
started = clock.now()
reply = retry_call(lambda: world.payments.charge("ana", 4_990, key="inv-2026-01-ana"),
                   RetryPolicy(backoff=full_jitter(base=2, cap=60)), clock, rng, on_retry=say)
print(f"{isoformat(clock.now())}  succeeded: {reply}")
assert clock.now() - started >= 60  # two waits of at least 30 s each
assert world.count("inv-2026-01-ana") == 1

# %% [markdown]
# **A deadline.** An invoice email is worth sending within a minute of the event, not
# an hour later. With `deadline=60`, the policy stops scheduling retries that would end
# after it, even though attempts are left.

# %%
world.mail.script("fail_before", "fail_before", "fail_before")
started = clock.now()
try:
    retry_call(lambda: world.mail.send("bruno@example.com", "Your invoice", key="mail-bruno"),
               RetryPolicy(max_attempts=10, backoff=exponential(base=10, cap=600), deadline=60),
               clock, rng, on_retry=say)
except TransientError as exc:
    why = exc.__notes__[-1]
    print(f"{isoformat(clock.now())}  gave up: {why}")
else:
    raise AssertionError("the deadline should have stopped the retries")
assert clock.now() - started == 30 and "deadline passed" in why
assert world.count("mail-bruno") == 0

# %% [markdown]
# **An attempts budget.** `max_attempts=3` counts every call, the first included (Celery's
# `max_retries=2`). After the third failure the error is raised with the reason, for
# the caller (or the job store, section 6) to deal with.

# %%
world.webhook.script("fail_before", "fail_before", "fail_before")
try:
    retry_call(lambda: world.webhook.post("https://crm.example/hook", {"lead": 7}, key="lead-7"),
               RetryPolicy(max_attempts=3, backoff=exponential(base=5)), clock, rng, on_retry=say)
except TransientError as exc:
    why = exc.__notes__[-1]
    print(f"{isoformat(clock.now())}  gave up: {why}")
else:
    raise AssertionError("the attempts budget should have stopped the retries")
assert "attempts exhausted (3 of 3)" in why
assert [c.outcome for c in world.calls(service="webhook")] == ["failed_before"] * 3

# %% [markdown]
# **A maybe-done failure.** The API charges carla and the reply is lost. Without an
# idempotency key `retry_call` refuses to retry: the charge *did* happen (the world has
# it), and a retry would make it two. The outcome is unknown to the caller, which must
# now find out (lesson 06's reconciliation) instead of guessing.

# %%
world.payments.script("lose_response")
try:
    retry_call(lambda: world.payments.charge("carla", 4_990, key="inv-2026-01-carla"),
               RetryPolicy(), clock, rng, on_retry=say)
except ResponseLost as exc:
    why = exc.__notes__[-1]
    print(f"gave up: {why}")
else:
    raise AssertionError("a lost response without a key must not be retried")
assert "outcome unknown" in why
print(f"charges the world recorded for carla: {world.count('inv-2026-01-carla')}")
assert world.count("inv-2026-01-carla") == 1

# %% [markdown]
# With an idempotency key the API honours, the same failure is safe to retry: the
# second call carries the same key, and the API answers with the stored reply instead
# of charging again (`replayed` in its log of calls).

# %%
key = "inv-2026-01-davi"
world.payments.script("lose_response")
reply = retry_call(lambda: world.payments.charge("davi", 9_990, idempotency_key=key),
                   RetryPolicy(backoff=full_jitter(base=2, cap=60)), clock, rng,
                   idempotency_key=key, on_retry=say)
print(f"succeeded: {reply}")
show([{"key": c.key, "outcome": c.outcome, "at": isoformat(c.at)}
      for c in world.calls(service="payments") if c.key == key])
assert world.count(key) == 1
assert [c.outcome for c in world.calls(service="payments") if c.key == key] == [
    "ok_response_lost", "replayed"]

# %% [markdown]
# **An expired token.** The cron article: "if the token expired, trying fifty times does
# not renew it by osmosis." A 401 is permanent for the *request as it is*; repeating it
# unchanged can only fail again, so a good job fails loudly, at once. Here is an ERP
# client whose access token lives 15 minutes, used 20 minutes after login:

# %%
class ErpSession:
    """An ERP client with an access token that expires; the ERP answers 401 after that."""

    def __init__(self, clock, refresh_works=True):
        self.clock, self.refresh_works = clock, refresh_works
        self.calls, self.refreshes = 0, 0
        self.token_until = clock.now() + 15 * 60

    def get_orders(self):
        self.calls += 1
        if self.clock.now() >= self.token_until:
            raise PermanentError("401 from the ERP: access token expired", status=401)
        return ["order 42", "order 43"]

    def refresh(self):
        """Trade the refresh token for a new access token (a new credential, not a retry)."""
        self.refreshes += 1
        if not self.refresh_works:
            raise PermanentError("401 from the ERP's token endpoint: refresh token revoked; "
                                 "a person must authorise the integration again", status=401)
        self.token_until = self.clock.now() + 15 * 60


erp = ErpSession(clock)
clock.advance(20 * 60)
try:
    retry_call(erp.get_orders, RetryPolicy(max_attempts=50), clock, rng, on_retry=say)
except PermanentError as exc:
    print(f"failed loudly after {erp.calls} call: {exc} ({exc.__notes__[-1]})")
assert erp.calls == 1

# %% [markdown]
# A **refresh** is not a retry. A retry sends the same request again and hopes the world
# changed; a refresh changes the request: it gets a new credential, then sends the call
# once more with it. So it happens once, only for "token expired", and if the refresh is
# refused too (the refresh token was revoked) the job stops and says a person is needed,
# instead of looping. OAuth client libraries (Authlib, requests-oauthlib) do this for
# you; the rule to keep is "refresh once, then fail loudly".

# %%
def with_refresh(session):
    try:
        return session.get_orders()
    except PermanentError as exc:
        if exc.status != 401:
            raise
        session.refresh()  # raises, loudly, if the refresh is refused
        return session.get_orders()  # once, with the new token


rows = []
for refresh_works in (True, False):
    erp = ErpSession(clock, refresh_works)
    clock.advance(20 * 60)
    try:
        outcome = f"ok: {with_refresh(erp)}"
    except PermanentError as exc:
        outcome = f"stopped: {exc}"
    rows.append({"refresh token": "valid" if refresh_works else "revoked",
                 "calls": erp.calls, "refreshes": erp.refreshes, "outcome": outcome})
show(rows)
assert [(r["calls"], r["refreshes"]) for r in rows] == [(2, 1), (1, 1)]
assert rows[1]["outcome"].startswith("stopped")

# %% [markdown]
# ## 5. The thundering herd, simulated
#
# Section 3 showed the waves; this measures what they cost. `labkit.patterns.herd` is the model
# behind the AWS article: N clients each want to write the same row once, with
# optimistic concurrency, so when several read the same version only one write wins and
# the rest must back off and try again. Every failed write is work the service did for
# nothing. Simulated time (milliseconds, base 5 ms, cap 2 s), ten seeds per point. The
# waits use the window `e(n) = min(cap, base * 2**n)` of section 3's table. As in the AWS
# simulator, a client's first wait uses `e(1)` = 10 ms (not `e(0)` = 5 ms as
# `RetryPolicy` does), counted from its first failure. `none` retries at once with no
# backoff at all.

# %%
herd = compare(clients=(10, 20, 30, 40, 50), seeds=range(10))
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
for name in herd.calls:
    left.plot(herd.clients, herd.calls[name], marker="o", label=name)
    right.plot(herd.clients, herd.completion_ms[name], marker="o", label=name)
left.set(title="calls the service handled", xlabel="clients", ylabel="calls (mean)")
right.set(title="time until the last client finished", xlabel="clients",
          ylabel="ms (mean)", yscale="log")
left.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# The numbers for 50 clients:

# %%
at50 = [row for row in herd.rows() if row["clients"] == 50]
show(at50)
calls50 = {row["strategy"]: row["calls"] for row in at50}
done50 = {row["strategy"]: row["completion_ms"] for row in at50}
sooner = {name: round(done50["exponential"] / done50[name], 1)
          for name in ("full_jitter", "equal_jitter", "decorrelated_jitter")}
print("\nfinished how many times sooner than exponential without jitter:", sooner)
for name in sooner:
    assert calls50[name] < 0.7 * calls50["exponential"], name
    assert sooner[name] > 5, name
assert calls50["none"] == max(calls50.values())

# %% [markdown]
# * **No backoff** finishes early only by hammering: the most calls of all.
# * **Exponential without jitter** barely reduces the calls (the clients that collided
#   collide again, 10, 20, 40 ms later, together) and takes by far the longest, because
#   the waits keep doubling while the collisions continue.
# * **Any jitter** cuts the calls by about 40% and finishes 8 to 18 times sooner
#   (the ratios printed above). Full and decorrelated jitter do best; the differences between the three
#   matter far less than having jitter at all.

# %% [markdown]
# **The cron article's jitter.** Its retry waits `min(60, 2**attempt + random.uniform(0,
# 1.5))` seconds: exponential backoff plus a small *additive* jitter. The spread is
# 1.5 s whatever the wait, so it separates the clients at the first retry (2 s + up to
# 1.5 s) and barely at the fifth (32 s + up to 1.5 s). In the simulator's units (base
# 5 ms) that jitter is `random_uniform(0, 7.5)` added to `exponential`. Same 50 clients,
# same seeds:

# %%
additive = {"exponential": exponential(5, 2000),
            "cron article: + U(0, 1.5 base)": exponential(5, 2000) + random_uniform(0, 7.5),
            "full_jitter": full_jitter(5, 2000)}
spread = compare(clients=(50,), seeds=range(10), chosen=additive)
show(spread.rows())
got = {row["strategy"]: row for row in spread.rows()}
cron = got["cron article: + U(0, 1.5 base)"]
assert got["full_jitter"]["calls"] < cron["calls"] < got["exponential"]["calls"]

# %% [markdown]
# The additive jitter helps a little over none at all, and stays far from full jitter:
# full jitter spreads the clients over the whole window, which grows with every retry,
# so the crowd keeps thinning out. Use `full_jitter` (tenacity's `wait_random_exponential`,
# Celery's `retry_jitter=True`), not a constant spread added to the wait.

# %% [markdown]
# ## 6. Retries in the process versus retries as job state
#
# `retry_call` keeps the retry in memory: the worker sits in `sleep` for the whole
# backoff, and if the process dies during a 10-minute wait, the retry dies with it. A
# job store keeps the retry as **state**: the failed attempt is recorded, the job goes
# to `retry_wait` with `run_after = now + backoff` from the store's `RetryPolicy`, and
# any worker picks it up when that time comes, after a restart too.
#
# The same payment API, now failing twice (a 503, then a 429 with Retry-After 120 s)
# before it works. The store's policy: equal jitter from 30 s, at most 5 attempts.

# %%
JOB_SEED = 50
job_policy = RetryPolicy(max_attempts=5, backoff=equal_jitter(base=30, cap=600))
store = JobStore(folder / "jobs.db", clock=clock, rng=random.Random(JOB_SEED), retry=job_policy)


def charge(job, ctx):
    p = job.payload
    return ctx.world.payments.charge(p["customer"], p["amount"], idempotency_key=job.key)


worker = Worker(store, {"charge": charge}, name="worker-1", world=world)
job, _ = store.enqueue("charge", {"customer": "elis", "amount": 29_990},
                       key="billing:elis:2026-01:charge:v1")
world.payments.script("fail_before", "rate_limit", "ok", retry_after=120)
COLUMNS = ("id", "state", "attempt", "run_after", "last_error")
print(f"{clock}: worker ran {worker.run_until_idle()} job(s)")
show(jobs_table(store, columns=COLUMNS))

# %% [markdown]
# The first attempt failed with a 503. The job is not sleeping in anybody's memory: it
# is a row in `retry_wait` whose `run_after` the policy chose. Running the worker again
# now does nothing, because the job is not due.

# %%
first = store.get(job.id)
expected = random.Random(JOB_SEED)  # replays the store's draws, to check its arithmetic
wait1 = job_policy.backoff(0, expected)
print(f"backoff drawn for retry 1: {wait1:.2f}s, so run_after = "
      f"{isoformat(first.updated_at + wait1)}")
print(f"{clock}: worker ran {worker.run_until_idle()} job(s)")
assert first.state == "retry_wait" and first.attempt == 1
assert first.run_after == first.updated_at + wait1

# %% [markdown]
# When `run_after` comes, the worker takes it: attempt 2 meets the 429. Equal jitter
# would wait 30 to 60 s; the server asked for 120 s, and the policy honours it.

# %%
clock.set(first.run_after)
print(f"{clock}: worker ran {worker.run_until_idle()} job(s)")
show(jobs_table(store, columns=COLUMNS))
second = store.get(job.id)
wait2 = job_policy.backoff(1, expected, wait1)
print(f"backoff drawn for retry 2: {wait2:.2f}s; Retry-After: 120s; waiting "
      f"{second.run_after - second.updated_at:g}s")
assert second.state == "retry_wait" and second.attempt == 2 and wait2 < 120
assert second.run_after == second.updated_at + 120

# %% [markdown]
# Two minutes later the third attempt succeeds. The attempts history in the database
# tells the whole story, and the world confirms a single charge.

# %%
clock.set(second.run_after)
print(f"{clock}: worker ran {worker.run_until_idle()} job(s)")
show(jobs_table(store, columns=("id", "key", "state", "attempt", "result")))
print()
show([{"attempt": a.attempt, "started_at": isoformat(a.started_at), "outcome": a.outcome,
       "error": a.error} for a in store.attempts(job.id)])
assert store.get(job.id).state == "succeeded"
assert [a.outcome for a in store.attempts(job.id)] == ["retry_wait", "retry_wait", "succeeded"]
assert world.count(job.key) == 1

# %% [markdown]
# ## 7. Retry layers multiply
#
# A request often passes through several layers that each retry: an HTTP client with
# 3 attempts, inside a task that retries 3 times, inside a job the store runs up to 5
# times. Each layer is reasonable alone. Together, one request to a service that is
# down becomes 3 × 3 × 5 calls, and every caller does the same, which is how a short
# outage becomes a retry storm. Three `retry_call` layers against a payment API that
# answers every call with a 503:

# %%
down_calls = 0


def payments_down():
    global down_calls
    down_calls += 1
    raise TransientError("503 Service Unavailable", status=503)


def layer(fn, attempts, budget=None):
    """One more layer that retries ``fn``: a client, a task, a job runner."""
    layer_policy = RetryPolicy(max_attempts=attempts, backoff=exponential(base=1, cap=60))
    return lambda: retry_call(fn, layer_policy, clock, rng, budget=budget)


def one_request(budget=None):
    global down_calls
    down_calls = 0
    try:
        layer(layer(layer(payments_down, 3, budget), 3, budget), 5, budget)()
    except TransientError as error:
        return down_calls, error.__notes__[-1]


layers_alone = one_request()
print(f"calls for one request: {layers_alone[0]}  ({layers_alone[1]})")
assert layers_alone[0] == 3 * 3 * 5

# %% [markdown]
# Two fixes, used together. Retry in **one** layer, the one that knows whether the call
# is safe to repeat (for a job, the job store), and let the others fail fast. And give
# the calls to one dependency a shared **retry budget**: `RetryBudget` follows gRPC's
# retry throttling (the gRPC proposal A6, "Retry throttling"): every failure takes a
# token, every success gives back a tenth of one, and retries stop while half the
# tokens or fewer are left. First attempts always go through, so callers still see the
# service come back. The same three layers, three requests in a row, sharing one budget:

# %%
budget = RetryBudget(max_tokens=10, token_ratio=0.1)
with_budget = [one_request(budget) for _ in range(3)]
show([{"request": n, "calls": calls, "why it stopped": why}
      for n, (calls, why) in enumerate(with_budget, 1)])
print(f"tokens left: {budget.tokens:g} of {budget.max_tokens:g}")
assert [calls for calls, _ in with_budget] == [4, 1, 1]
assert all("retry budget spent" in why for _, why in with_budget)

# %% [markdown]
# ## What you should see
#
# | step | what the output shows |
# |---|---|
# | real HTTP call | read timeout: `TimeoutError`, maybe done, and the server charged; closed port: `ConnectionRefusedError`, never sent |
# | classification | refused, 429, 503 never sent; read timeout, 500, 504, lost response maybe done (stop without a key); 400, 401, 404, validation, bug permanent |
# | lost response | stop without a key; retry with an idempotency key |
# | exponential, cap 60 | 1, 2, 4, 8, 16, 32, then 60 s every time |
# | 100 clients, plotted | vertical lines without jitter; spread dots with jitter |
# | peak per 100 ms | 100 without jitter; under 50 with any jitter |
# | Retry-After 30 s | two waits of 30 s, then one charge |
# | deadline 60 s | two retries (10 s, 20 s), then "deadline passed": the next wait would end past 60 s |
# | attempts budget 3 | three `failed_before` calls, "attempts exhausted (3 of 3)" |
# | lost response, no key | one charge recorded, no retry |
# | lost response, with key | `ok_response_lost`, then `replayed`: one charge |
# | expired token, 50 attempts allowed | one call, then a loud `PermanentError` (401) |
# | refresh, then one more call | valid refresh token: 2 calls, ok; revoked: 1 call, stopped |
# | herd, 50 clients | jitter: ~40% fewer calls than exponential, finishes 8 to 18 times sooner |
# | cron article's additive jitter, 50 clients | fewer calls than no jitter, far more than full jitter |
# | job-level retries | `retry_wait` with `run_after` from the policy; 120 s after the 429; then `succeeded`, one charge |
# | retry layers 3, 3, 5 | 45 calls for one request; with a shared budget 4, then 1 and 1 |
#
# **What to take away**
#
# - Classify before you retry: a never-sent error is safe to retry; a maybe-done one only
#   under an idempotency key the destination honours; a permanent one stops at once.
# - Back off exponentially with a cap, and add jitter (full jitter by default): without
#   it, clients that fail together come back together.
# - Stop at a budget: an attempts limit and a deadline, with the server's Retry-After as
#   a floor under the wait.
# - An expired token is not a transient error: refresh once, then fail loudly; never
#   send the same request again unchanged.
# - Keep the retry as job state (`retry_wait` with `run_after`), not as a sleep in
#   memory, so it survives a restart.
# - Retry in one layer only, and share a retry budget per dependency: layers multiply
#   (3 × 3 × 5 = 45 calls for one request).
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 06 · Crash between effect and ack](06_crash_matrix.ipynb)

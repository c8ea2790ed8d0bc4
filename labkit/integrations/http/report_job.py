"""The lab's example job behind the HTTP service: a report that needs a credential.

The request names its credential by reference (``credential_id``); the secret itself
lives in a secret store that only the worker reads, at run time. The job row, the
status page and the logs hold the reference and never the secret, so rotating the
secret needs no change to queued jobs, and reading the job table reveals nothing.

In production the secret store is Vault, AWS Secrets Manager or a Kubernetes secret,
read by the worker with its own identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labkit.errors import PermanentError
from labkit.job import Job

#: The lab's secret store: reference -> secret. Only the worker reads it.
LAB_SECRET_STORE: Mapping[str, str] = {
    "erp-readonly": "lab-erp-password-do-not-log",
    "warehouse-reports": "lab-warehouse-password-do-not-log",
}


class UnknownCredential(PermanentError):
    """The job names a credential the secret store does not hold."""


def resolve(credential_id: str, store: Mapping[str, str] = LAB_SECRET_STORE) -> str:
    """The secret behind ``credential_id``; ``UnknownCredential`` (permanent) if none."""
    try:
        return store[credential_id]
    except KeyError:
        known = ", ".join(sorted(store))
        raise UnknownCredential(
            f"no credential {credential_id!r} in the secret store (it holds: {known}); "
            "fix the request's credential_id, then redrive the job"
        ) from None


def build_report(job: Job, ctx: Any) -> dict[str, Any]:
    """Build the report the payload asks for, logging in with the referenced credential."""
    payload = job.payload
    secret = resolve(str(payload.get("credential_id", "")))
    # A real report would log in to the ERP with ``secret`` here; the lab only proves it
    # had one, without returning or logging it.
    month = str(payload.get("month", "?"))
    return {"report": f"sales {month}", "rows": 3 * len(month), "signed_in": bool(secret)}


#: ``labkit.worker_process`` / ``labkit worker --handlers`` name this: kind -> handler.
HANDLERS = {"report": build_report}

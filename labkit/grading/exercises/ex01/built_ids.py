"""Entity ids a check cannot send as data: datetimes, dates and Decimals, built on each side.

The channel to the student's process carries plain data only (``labkit.grading.
isolation.channel``), so a check describes such an id in plain data and the harness
builds it beside the student's code (``built``); the check builds the same description
on its own side only to show it (``shown``). A description is a one-key dict:

- ``{"$datetime": [year, month, day, hour, minute, second, microsecond, zone]}``, with
  ``zone`` minutes east of UTC, or None for a naive datetime (a nightly run's wall time);
- ``{"$date": [year, month, day]}``;
- ``{"$decimal": "42.4"}`` (a NUMERIC column as a driver reads it).

Anything else is a part as it is.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from typing import Any


def built(part: Any) -> Any:
    """The object ``part`` describes (above), or ``part`` itself."""
    if not (isinstance(part, dict) and len(part) == 1):
        return part
    [(kind, args)] = part.items()
    if kind == "$datetime":
        *when, zone = args
        tz = None if zone is None else _dt.timezone(_dt.timedelta(minutes=zone))
        return _dt.datetime(*when).replace(tzinfo=tz)
    if kind == "$date":
        return _dt.date(*args)
    if kind == "$decimal":
        return decimal.Decimal(args)
    return part


def shown(intent: Any) -> str:
    """An intent (a list or tuple of parts) as Python writes it, its built ids included."""
    return repr(tuple(built(part) for part in intent))


def shown_id(part: Any) -> str:
    """One part (an entity id) as Python writes it, built when it is described."""
    return repr(built(part))


def _moment(when: tuple[int, ...], zone: int | None) -> dict[str, list[Any]]:
    """A datetime's description: ``when`` from the year on, the rest of it 0."""
    return {"$datetime": [*when, *[0] * (7 - len(when)), zone]}


def naive(*when: int) -> dict[str, list[Any]]:
    """A naive datetime's description."""
    return _moment(when, None)


def aware(zone_minutes: int, *when: int) -> dict[str, list[Any]]:
    """An aware datetime's description, ``zone_minutes`` east of UTC."""
    return _moment(when, zone_minutes)


def day(*when: int) -> dict[str, list[Any]]:
    """A date's description."""
    return {"$date": list(when)}


def number(text: str) -> dict[str, str]:
    """A Decimal's description."""
    return {"$decimal": text}

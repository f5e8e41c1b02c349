"""What EventBridge Scheduler accepts of a schedule: its team's name (the group's), its
expression, its times and its retries, checked at synth."""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from zoneinfo import available_timezones

from aws_cdk import Duration, TimeZone, Token

from compiled_training.schedules.expressions import validate_expression

_TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
# CreateSchedule's FlexibleTimeWindow (minutes) and RetryPolicy (MaximumEventAgeInSeconds,
# MaximumRetryAttempts) ranges.
FLEXIBLE_WINDOW_MINUTES = (1, 1440)
MAX_EVENT_AGE_SECONDS = (60, 86400)
RETRY_ATTEMPTS = (0, 185)


def check_schedule(where: str, team: str, expression: str, time_zone: TimeZone | None,
                   start_date: datetime | None, end_date: datetime | None,
                   flexible_window: Duration | None, max_event_age: Duration | None,
                   retry_attempts: int) -> None:
    """The team's name, the expression, the schedule's times and its retries, as Scheduler
    takes them; ``where`` names the schedule in each error."""
    if not _TEAM.match(team):
        raise ValueError(f"{where}: team must be 1-40 letters, digits, '-' or '_', starting "
                         f"with a letter or digit, got {team!r}")
    try:
        validate_expression(expression)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if (time_zone is not None and not Token.is_unresolved(time_zone.timezone_name)
            and time_zone.timezone_name not in _time_zones()):
        raise ValueError(f"{where}: time_zone must be an IANA time zone such as "
                         f"'Europe/Berlin', got {time_zone.timezone_name!r}")
    if start_date and end_date and end_date <= start_date:
        raise ValueError(f"{where}: end_date ({end_date.isoformat()}) must be after "
                         f"start_date ({start_date.isoformat()})")
    low, high = FLEXIBLE_WINDOW_MINUTES
    if flexible_window is not None and not low <= flexible_window.to_minutes() <= high:
        raise ValueError(f"{where}: flexible_window must be {low} to {high} minutes, got "
                         f"{flexible_window.to_minutes()} minutes")
    low, high = MAX_EVENT_AGE_SECONDS
    if max_event_age is not None and not Token.is_unresolved(max_event_age.to_string()) \
            and not low <= max_event_age.to_seconds() <= high:
        raise ValueError(f"{where}: max_event_age must be {low} seconds to {high // 3600} "
                         f"hours, got {max_event_age.to_seconds():g} seconds")
    low, high = RETRY_ATTEMPTS
    if not low <= retry_attempts <= high:
        raise ValueError(f"{where}: retry_attempts must be {low}-{high}, got {retry_attempts}")


@cache
def _time_zones() -> frozenset[str]:
    return frozenset(available_timezones())

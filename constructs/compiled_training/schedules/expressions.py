"""EventBridge Scheduler expressions, checked at synth and evaluated for the synth summary.

``cron(minutes hours day-of-month month day-of-week year)``: six fields; exactly one of
day-of-month and day-of-week is ``?``; ``L`` and ``W`` in day-of-month, ``L`` and ``#`` in
day-of-week. Also ``rate(value unit)`` and ``at(yyyy-mm-ddThh:mm:ss)``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

MONTHS = {name: i for i, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], 1)}
FIELDS = ("minutes", "hours", "day-of-month", "month", "day-of-week", "year")
_RANGES = {"minutes": (0, 59), "hours": (0, 23), "day-of-month": (1, 31), "month": (1, 12),
           "day-of-week": (1, 7), "year": (1970, 2199)}
_NAMES = {"month": MONTHS, "day-of-week": DAYS}
_RATE = re.compile(r"^rate\((?P<value>\d+) (?P<unit>minutes?|hours?|days?)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
MAX_EXPRESSION_LENGTH = 256  # CreateSchedule's ScheduleExpression


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression: the allowed values of each field."""

    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    day_of_month: str
    day_of_week: str

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months or day.year not in self.years:
            return False
        if self.day_of_month != "?":
            return _day_of_month_matches(self.day_of_month, day)
        return _day_of_week_matches(self.day_of_week, day)

    def fire_times(self, after: datetime) -> Iterator[datetime]:
        """Start times after ``after`` (an aware datetime), in its time zone."""
        zone = after.tzinfo
        day = after.date()
        limit = date(max(self.years), 12, 31)
        while day <= limit:
            if self.matches_day(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        moment = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                        if moment > after:
                            yield moment
            day += timedelta(days=1)


def validate_expression(expression: str) -> None:
    """Raises ``ValueError`` naming what is wrong with a schedule expression."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"schedule expression must be at most {MAX_EXPRESSION_LENGTH} "
                         f"characters, got {len(expression)}: {expression[:40]!r}...")
    foreign = next((c for c in expression if not c.isascii()), None)
    if foreign is not None:
        # Python reads '２' as a digit; EventBridge reads 0-9 only.
        raise ValueError(f"schedule expression must be ASCII (digits 0-9), got {foreign!r} in "
                         f"{expression!r}")
    if expression.startswith("cron("):
        parse_cron(expression)
    elif expression.startswith("rate("):
        match = _RATE.match(expression)
        if not match or int(match["value"]) < 1:
            raise ValueError(f"rate expression must look like 'rate(5 minutes)' with a positive "
                             f"value and a unit of minutes, hours or days, got {expression!r}")
        singular = not match["unit"].endswith("s")
        if singular != (int(match["value"]) == 1):
            raise ValueError(f"rate expression needs the singular unit for 1 and the plural "
                             f"otherwise ('rate(1 hour)', 'rate(2 hours)'), got {expression!r}")
    elif expression.startswith("at("):
        match = _AT.match(expression)
        try:
            datetime.fromisoformat(match[1]) if match else None
        except ValueError:
            match = None
        if not match:
            raise ValueError(f"one-time expression must look like 'at(2026-12-01T02:00:00)', "
                             f"got {expression!r}")
    else:
        raise ValueError(f"schedule expression must start with cron(, rate( or at(, "
                         f"got {expression!r}")


def parse_cron(expression: str) -> Cron:
    match = re.fullmatch(r"cron\((.*)\)", expression)
    fields = match[1].split(" ") if match else []
    if len(fields) != 6 or not all(fields):
        raise ValueError(
            f"cron expression must have six fields separated by single spaces "
            f"({' '.join(FIELDS)}), got {expression!r}"
        )
    minutes, hours, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ValueError(
            f"cron expression must set exactly one of day-of-month and day-of-week to '?' "
            f"(EventBridge cannot combine them), got {expression!r}"
        )
    try:
        parsed = Cron(
            minutes=_values("minutes", minutes),
            hours=_values("hours", hours),
            months=_values("month", month),
            years=_values("year", year),
            day_of_month=dom,
            day_of_week=dow,
        )
        if dom != "?":
            _check_day_of_month(dom)
        if dow != "?":
            _check_day_of_week(dow)
    except ValueError as error:
        raise ValueError(f"cron expression {expression!r}: {error}") from None
    return parsed


def next_start_times(expression: str, time_zone: str, *, now: datetime,
                     count: int = 5) -> list[datetime]:
    """The next ``count`` start times of an expression, in its time zone."""
    zone = ZoneInfo(time_zone)
    local_now = now.astimezone(zone)
    if expression.startswith("cron("):
        times = parse_cron(expression).fire_times(local_now)
        return [t for _, t in zip(range(count), times, strict=False)]
    if expression.startswith("at("):
        moment = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=zone)
        return [moment] if moment > local_now else []
    match = _RATE.match(expression)
    assert match, expression
    step = timedelta(**{match["unit"].rstrip("s") + "s": int(match["value"])})
    return [local_now + step * (i + 1) for i in range(count)]


def _number(field: str, token: str) -> int:
    names = _NAMES.get(field, {})
    if token.upper() in names:
        return names[token.upper()]
    if not token.isdigit():
        allowed = f" or {', '.join(names)}" if names else ""
        raise ValueError(f"{field} value must be a number{allowed}, got {token!r}")
    low, high = _RANGES[field]
    value = int(token)
    if not low <= value <= high:
        raise ValueError(f"{field} value must be within {low}-{high}, got {token!r}")
    return value


def _values(field: str, text: str) -> frozenset[int]:
    """Expands ``*``, ``a-b``, ``a/n``, ``*/n`` and lists of them."""
    low, high = _RANGES[field]
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"{field} step must be a positive number, got {part!r}")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _number(field, first), _number(field, last)
            if start > end:
                raise ValueError(f"{field} range must go upwards, got {part!r}")
        else:
            start = _number(field, base)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _check_day_of_month(text: str) -> None:
    if text in ("L", "LW"):
        return
    if re.fullmatch(r"\d{1,2}W", text):
        _number("day-of-month", text[:-1])
        return
    _values("day-of-month", text)


def _check_day_of_week(text: str) -> None:
    hash_match = re.fullmatch(r"(\w+)#(\d)", text)
    if hash_match:
        _number("day-of-week", hash_match[1])
        if not 1 <= int(hash_match[2]) <= 5:
            raise ValueError(f"day-of-week '#' must be 1-5 (which week), got {text!r}")
        return
    if re.fullmatch(r"\w*L", text):
        if text != "L":
            _number("day-of-week", text[:-1])
        return
    _values("day-of-week", text)


def _day_of_month_matches(text: str, day: date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    if text == "L":
        return day.day == last
    if text.endswith("W"):
        target = last if text == "LW" else min(int(text[:-1]), last)
        return day == _nearest_weekday(date(day.year, day.month, target))
    return day.day in _values("day-of-month", text)


def _nearest_weekday(target: date) -> date:
    """The weekday nearest to ``target`` in the same month (the ``W`` rule)."""
    if target.weekday() == 5:  # Saturday: Friday before, unless that leaves the month
        return target - timedelta(days=1) if target.day > 1 else target + timedelta(days=2)
    if target.weekday() == 6:  # Sunday: Monday after, unless that leaves the month
        last = calendar.monthrange(target.year, target.month)[1]
        return target + timedelta(days=1) if target.day < last else target - timedelta(days=2)
    return target


def _weekday(day: date) -> int:
    """EventBridge numbering: 1 is Sunday, 7 is Saturday."""
    return (day.weekday() + 1) % 7 + 1


def _day_of_week_matches(text: str, day: date) -> bool:
    if "#" in text:
        name, nth = text.split("#")
        return _weekday(day) == _number("day-of-week", name) and (day.day - 1) // 7 + 1 == int(nth)
    if text.endswith("L"):
        weekday = 7 if text == "L" else _number("day-of-week", text[:-1])
        last = calendar.monthrange(day.year, day.month)[1]
        return _weekday(day) == weekday and day.day + 7 > last
    return _weekday(day) in _values("day-of-week", text)

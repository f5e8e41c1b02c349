"""The cron validator against an independent reference of EventBridge's rules (hypothesis).

The reference below is written from the EventBridge Scheduler documentation as one regular
expression per field plus the cross-field rule; the library's validator is a parser. Both
must agree on every generated expression, and every start time the library computes must
satisfy the reference's fields.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiled_training.schedules.expressions import (
    next_start_times,
    parse_cron,
    validate_expression,
)

_MIN = r"(?:[0-5]?\d)"
_HOUR = r"(?:[01]?\d|2[0-3])"
_DOM = r"(?:0?[1-9]|[12]\d|3[01])"
_MON = r"(?:0?[1-9]|1[0-2]|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)"
_DOW = r"(?:[1-7]|SUN|MON|TUE|WED|THU|FRI|SAT)"
_YEAR = r"(?:19[7-9]\d|2[01]\d\d)"


def _list_of(value: str) -> str:
    item = rf"(?:\*(?:/[1-9]\d*)?|{value}(?:-{value})?(?:/[1-9]\d*)?)"
    return rf"{item}(?:,{item})*"


REFERENCE = {
    "minutes": _list_of(_MIN),
    "hours": _list_of(_HOUR),
    "day-of-month": rf"\?|L|LW|{_DOM}W|{_list_of(_DOM)}",
    "month": _list_of(_MON),
    "day-of-week": rf"\?|L|{_DOW}L|{_DOW}#[1-5]|{_list_of(_DOW)}",
    "year": _list_of(_YEAR),
}
ORDER = (["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])


def _ranges_ascend(field: str) -> bool:
    for low, high in re.findall(r"(\w+)-(\w+)", field):
        names = ORDER[0] if low in ORDER[0] or high in ORDER[0] else ORDER[1]
        as_number = [names.index(v) + 1 if v in names else int(v) for v in (low, high)]
        if as_number[0] > as_number[1]:
            return False
    return True


def reference_accepts(expression: str) -> bool:
    match = re.fullmatch(r"cron\(([^()]*)\)", expression)
    fields = match[1].split(" ") if match else []
    if len(fields) != 6 or not all(fields):
        return False
    if (fields[2] == "?") == (fields[4] == "?"):
        return False
    return all(re.fullmatch(REFERENCE[name], value) and _ranges_ascend(value)
               for name, value in zip(REFERENCE, fields, strict=True))


def library_accepts(expression: str) -> bool:
    try:
        validate_expression(expression)
    except ValueError:
        return False
    return True


def _field(values: list[str]) -> st.SearchStrategy[str]:
    atom = st.sampled_from(values)
    single = st.one_of(atom, st.builds(lambda a, b: f"{a}-{b}", atom, atom),
                       st.builds(lambda a, n: f"{a}/{n}", st.sampled_from([*values, "*"]),
                                 st.sampled_from(["1", "5", "15", "0", "x"])))
    return st.lists(single, min_size=1, max_size=3).map(",".join)


minutes = _field(["0", "5", "30", "59", "60", "*", "-1", "ab"])
hours = _field(["0", "9", "23", "24", "*"])
day_of_month = st.one_of(st.sampled_from(["?", "L", "LW", "15W", "32W", "W"]),
                         _field(["1", "15", "31", "32", "0", "*"]))
month = _field(["1", "12", "13", "JAN", "DEC", "FOO", "*"])
day_of_week = st.one_of(st.sampled_from(["?", "L", "6L", "MON#2", "FRI#6", "#1", "8L"]),
                        _field(["1", "7", "8", "MON", "FRI", "SUN", "*"]))
year = _field(["2026", "2199", "2200", "1969", "*"])
expressions = st.builds(
    lambda *fields: f"cron({' '.join(fields)})",
    minutes, hours, day_of_month, month, day_of_week, year,
) | st.sampled_from(["cron(0 1 * * ?)", "cron()", "cron(0  1 * * ? *)", "cron(0 1 * * ? * *)"])


@settings(max_examples=600, deadline=None)
@given(expressions)
def test_validator_agrees_with_the_reference(expression):
    assert library_accepts(expression) == reference_accepts(expression), expression


def _valid_field(values: list[str]) -> st.SearchStrategy[str]:
    atom = st.sampled_from(values)
    single = st.one_of(atom, st.builds(lambda a, n: f"{a}/{n}", st.sampled_from([*values, "*"]),
                                       st.sampled_from(["1", "5", "15"])))
    return st.lists(single, min_size=1, max_size=3).map(",".join)


valid_expressions = st.builds(
    lambda m, h, days, mon, y: f"cron({m} {h} {days[0]} {mon} {days[1]} {y})",
    _valid_field(["0", "5", "30", "59", "*"]),
    _valid_field(["0", "9", "23", "*", "8-17"]),
    st.one_of(
        st.tuples(st.sampled_from(["L", "LW", "15W", "1", "28", "*", "1-15"]), st.just("?")),
        st.tuples(st.just("?"), st.sampled_from(["L", "6L", "MON#2", "MON-FRI", "SAT", "*"])),
    ),
    _valid_field(["1", "JAN", "DEC", "*", "3-6"]),
    st.sampled_from(["*", "2026-2030", "2027", "2026/2"]),
)


@settings(max_examples=150, deadline=None)
@given(valid_expressions)
def test_every_start_time_satisfies_the_fields(expression):
    assert reference_accepts(expression)
    cron = parse_cron(expression)
    times = next_start_times(expression, "Europe/Berlin",
                             now=datetime(2026, 11, 22, tzinfo=timezone.utc), count=3)
    for moment in times:
        assert moment.minute in cron.minutes and moment.hour in cron.hours
        assert moment.month in cron.months and moment.year in cron.years
        assert cron.matches_day(moment.date())
    assert times == sorted(times)


@pytest.mark.parametrize(("expression", "first"), [
    ("cron(0 1 ? * MON,WED,FRI *)", "2026-11-23T01:00"),
    ("cron(0 9 L * ? *)", "2026-11-30T09:00"),         # last day of the month
    ("cron(0 9 ? * 6#3 *)", "2026-12-18T09:00"),       # third Friday
    ("cron(0 9 ? * 2L *)", "2026-11-30T09:00"),        # last Monday
    ("cron(0 9 1W * ? *)", "2026-12-01T09:00"),        # weekday nearest the 1st (a Tuesday)
    ("cron(0 9 LW * ? *)", "2026-11-30T09:00"),        # last weekday of the month
    ("cron(15 10 ? * SAT 2027)", "2027-01-02T10:15"),
])
def test_known_start_times(expression, first):
    times = next_start_times(expression, "Europe/Berlin",
                             now=datetime(2026, 11, 22, tzinfo=timezone.utc))
    assert times[0].strftime("%Y-%m-%dT%H:%M") == first
    assert len(times) == 5


def test_start_times_follow_daylight_saving_in_the_time_zone():
    times = next_start_times("cron(0 1 * * ? *)", "Europe/Berlin",
                             now=datetime(2027, 3, 26, tzinfo=timezone.utc), count=4)
    assert [t.utcoffset().total_seconds() / 3600 for t in times] == [1, 1, 2, 2]

"""The service model's patterns: Java regular expressions, read as Python's ``re`` reads them,
and said in words for the names and texts users write."""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from itertools import groupby

# Java reads "." as any character but a line terminator; Python's "." excludes only "\n".
_JAVA_DOT = "[^\\n\\r\\u0085\\u2028\\u2029]"
LINE_BREAK = re.compile(_JAVA_DOT.replace("[^", "["))
# The model writes supplementary characters as UTF-16 surrogate pairs.
_SURROGATE_RANGE = "\\uD800\\uDC00-\\uDBFF\\uDFFF"


@functools.cache
def java_regex(pattern: str, ascii_value: bool = False) -> re.Pattern[str]:
    """A pattern of the service model (a Java regular expression) as Python's ``re``.

    ``\\p{...}`` classes and ``.`` follow Java; for an ASCII value the Unicode classes reduce
    to their ASCII members, which spares building the full Unicode tables on every synth.
    Raises ValueError on a construct this translation does not know.
    """
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        if pattern.startswith(_SURROGATE_RANGE, i):
            out.append("\\U00010000-\\U0010FFFF")
            i += len(_SURROGATE_RANGE)
            continue
        named = re.match(r"\\p\{(\w+)\}", pattern[i:])
        if named:
            body = _java_class(named[1], ascii_value)
            out.append(body if in_class else f"[{body}]")
            i += len(named[0])
            continue
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        quantified_end = re.match(r"\$\{\d*,?\d*\}", pattern[i:])
        if char == "$" and not in_class and quantified_end:
            # Java takes a quantifier on the end anchor (``$``{1,128}, CustomerMetadataKey) as
            # the anchor itself; the length is the shape's min and max, checked apart.
            out.append("$")
            i += len(quantified_end[0])
            continue
        out.append(_JAVA_DOT if char == "." and not in_class else char)
        i += 1
    return re.compile("".join(out))


def _java_class(name: str, ascii_value: bool) -> str:
    if name == "Alnum":  # a POSIX class: ASCII in Java
        return "A-Za-z0-9"
    if len(name) != 1 or name not in "CLMNPSZ":
        raise ValueError(f"unsupported Java character class \\p{{{name}}}")
    if ascii_value:
        return "".join(re.escape(chr(code)) for code in range(128)
                       if unicodedata.category(chr(code))[0] == name)
    ranges = _unicode_ranges()[name]
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)


@functools.lru_cache(maxsize=1)
def _unicode_ranges() -> dict[str, list[tuple[int, int]]]:
    """Code point ranges by Unicode major category (L, N, Z...)."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    start = 0
    categories = map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))
    for major, run in groupby(categories, key=lambda category: category[0]):
        length = sum(1 for _ in run)
        ranges.setdefault(major, []).append((start, start + length - 1))
        start += length
    return ranges


# The model's patterns for the names and texts users write, said in words (tests hold each to
# a pattern of the model, so a changed one is noticed).
_ALNUM_HYPHENS = ("hold only letters, digits and hyphens, beginning and ending with a letter "
                  "or digit")
PATTERN_WORDS = {
    "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}": _ALNUM_HYPHENS,
    "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,119}": _ALNUM_HYPHENS,
    "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}": _ALNUM_HYPHENS,
    "[A-Za-z0-9\\.\\-_]+": "hold only letters, digits, '.', '-' and '_'",
    "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)": "hold only letters, digits, spaces and _ . : / = + - @",
    "[a-zA-Z_][a-zA-Z0-9_]*": "hold only letters, digits and '_', not beginning with a digit",
    "[-0-9a-zA-Z]+": "hold only letters, digits and hyphens",
    "[A-Za-z0-9\\-_]*": "hold only letters, digits, '-' and '_'",
    "[a-zA-Z0-9:/_-]*": "hold only letters, digits and : / _ -",
    "(https|s3)://([^/]+)/?(.*)": "be an s3:// or https:// URL with a bucket or host",
    ".+": "be one line",
    ".*": "be one line",
}


def pattern_in_words(pattern: str) -> str:
    """What a value must be to match one of the model's patterns, in words where this module
    knows them; otherwise the pattern itself."""
    return PATTERN_WORDS.get(pattern) or f"match the pattern {pattern}"

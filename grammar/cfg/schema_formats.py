"""``format`` values as regular expressions over the string's characters.

The formats a grammar can check are written here as ECMA-262 patterns (anchored at both
ends) following the RFCs JSON Schema cites; any other ``format`` is an annotation and is
ignored, as current drafts specify. Where the RFC grammar is not a practical regular
language the pattern accepts a documented superset or subset:

- ``date``, ``time``, ``date-time`` (RFC 3339): days per month and leap years are checked;
  a leap second ``:60`` is accepted at any time of day;
- ``duration`` (RFC 3339 appendix A, ISO 8601): ``P1Y2M3DT4H5M6S``, ``P2W``;
- ``email`` (RFC 5321 mailbox): dot-atom local part (quoted local parts are not accepted)
  at a host name or a bracketed IPv4 literal;
- ``hostname`` (RFC 1123): dot-separated labels of 1–63 letters, digits and inner hyphens
  (the 253-character total is not checked);
- ``ipv4``, ``ipv6`` (RFC 2673 dotted quad, RFC 4291 text forms, exact);
- ``uri``, ``uri-reference`` (RFC 3986): a scheme (required for ``uri``) followed by URI
  characters and ``%XX`` escapes (the component structure is not checked);
- ``uuid`` (RFC 4122), ``json-pointer`` (RFC 6901)."""

from __future__ import annotations

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = rf"(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_DURATION_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = (
    r"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
    rf"(?:{_DURATION_TIME})?|{_DURATION_TIME}|[0-9]+W)"
)
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_URI_CHARS = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*:"


def _ipv6() -> str:
    """RFC 3986 ``IPv6address``: the nine forms with and without ``::``."""
    ls32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
    forms = [rf"(?:{_H16}:){{6}}{ls32}", rf"::(?:{_H16}:){{5}}{ls32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1), (4, 0)):
        head = rf"(?:(?:{_H16}:){{0,{before}}}{_H16})?"
        forms.append(rf"{head}::(?:{_H16}:){{{after}}}{ls32}")
    forms.append(rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}")
    forms.append(rf"(?:(?:{_H16}:){{0,6}}{_H16})?::")
    return "(?:" + "|".join(forms) + ")"


FORMAT_PATTERNS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": rf"{_ATOM}(?:\.{_ATOM})*@(?:{_HOSTNAME}|\[{_IPV4}\])",
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "uri": _SCHEME + _URI_CHARS,
    "uri-reference": rf"(?:{_SCHEME})?{_URI_CHARS}",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "json-pointer": r"(?:/(?:[^~/]|~[01])*)*",
}
"""Unanchored bodies; ``format_pattern`` anchors them."""


def format_pattern(name: str) -> str | None:
    """The anchored pattern for a ``format`` value, or None for an annotation-only format."""
    body = FORMAT_PATTERNS.get(name)
    return None if body is None else f"^(?:{body})$"

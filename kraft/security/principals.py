"""The principal of a call: the client certificate's subject through
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``, KIP-371).

Rules are a comma-separated list tried in order; the first that matches names the principal:

- ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash: when the
  Java-style regex ``pattern`` matches the *whole* distinguished name, the name becomes
  ``replacement`` (``$1`` ... refer to groups), lower- or upper-cased with ``L`` / ``U``;
- ``DEFAULT``: the distinguished name unchanged.

A name no rule matches is refused (Kafka fails the authentication; kraft treats the call as
unauthenticated). The principal is ``User:<name>``; a connection without a client certificate
is ``User:ANONYMOUS``.

The distinguished name is the RFC 4514 form of the certificate's subject, most specific
attribute first (``CN=alice,OU=eng,O=example``), as Java's ``X500Principal.getName()`` gives
it. Pure apart from parsing a PEM certificate (`subject_of_pem`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kraft.security.acls import ANONYMOUS

DEFAULT_RULES: Final = "DEFAULT"
"""``ssl.principal.mapping.rules``'s default."""

_RULE = re.compile(r"\s*RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*$")
_GROUP_REF = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class MappingRule:
    """One parsed rule; ``pattern is None`` is DEFAULT."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when the rule does not match."""
        if self.pattern is None:
            return distinguished_name
        match = self.pattern.fullmatch(distinguished_name)
        if match is None:
            return None
        name = match.expand(_GROUP_REF.sub(r"\\g<\1>", self.replacement))
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """``ssl.principal.mapping.rules`` -> the rules, in order.

    Raises:
        ValueError: a rule is neither DEFAULT nor ``RULE:pattern/replacement/[LU]``, or its
            pattern is not a regex (the message names it).
    """
    rules: list[MappingRule] = []
    for raw in _split_rules(text):
        if raw.strip() == "DEFAULT":
            rules.append(MappingRule(None))
            continue
        match = _RULE.match(raw)
        if match is None:
            raise ValueError(
                f"ssl.principal.mapping.rules: {raw.strip()[:80]!r} is neither DEFAULT nor "
                "RULE:pattern/replacement/[LU]"
            )
        pattern, replacement, case = (g.replace("\\/", "/") for g in match.groups())
        try:
            rules.append(MappingRule(re.compile(pattern), replacement, case))
        except re.error as e:
            raise ValueError(
                f"ssl.principal.mapping.rules: bad pattern {pattern[:80]!r}: {e}"
            ) from None
    if not rules:
        raise ValueError("ssl.principal.mapping.rules: no rule (the default is DEFAULT)")
    return tuple(rules)


def _split_rules(text: str) -> list[str]:
    """Split at the commas between rules, not at those inside a rule's pattern: a new rule
    starts only where ``RULE:`` or ``DEFAULT`` follows the comma."""
    parts = re.split(r",\s*(?=RULE:|DEFAULT\b)", text.strip())
    return [p for p in parts if p.strip()]


def map_principal(distinguished_name: str, rules: Sequence[MappingRule]) -> str | None:
    """``User:<name>`` for the first rule that matches, or None when none does."""
    for rule in rules:
        name = rule.apply(distinguished_name)
        if name is not None:
            return "User:" + name
    return None


def subject_of_pem(pem: bytes) -> str:
    """The RFC 4514 subject of a PEM certificate (most specific attribute first)."""
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem).subject.rfc4514_string()


def principal_of_auth_context(
    auth_context: Mapping[str, Sequence[bytes]], rules: Sequence[MappingRule]
) -> str:
    """The principal of a gRPC call from its ``context.auth_context()``: the mapped subject of
    the peer's certificate, or `ANONYMOUS` without one (or when no rule maps it)."""
    certificates = auth_context.get("x509_pem_cert") or ()
    if not certificates:
        return ANONYMOUS
    return map_principal(subject_of_pem(certificates[0]), rules) or ANONYMOUS


__all__ = [
    "DEFAULT_RULES",
    "MappingRule",
    "map_principal",
    "parse_mapping_rules",
    "principal_of_auth_context",
    "subject_of_pem",
]

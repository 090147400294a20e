"""The authorization keys of a broker or controller (Kafka's names), parsed and checked once.

- ``authorizer.class.name``: any non-empty value turns authorization on. kraft has one
  built-in authorizer, Kafka's StandardAuthorizer rules (`kraft.security.authorizer`), so
  Kafka's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` is accepted as is;
- ``super.users``: ``User:a;User:b``;
- ``allow.everyone.if.no.acl.found``: false by default;
- ``ssl.principal.mapping.rules``: DEFAULT by default (`kraft.security.principals`).

Every key, its default and its doc line are in the config registry (`storage.config_registry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kraft.security.authorizer import AuthorizerConfig, parse_super_users
from kraft.security.principals import DEFAULT_RULES, MappingRule, parse_mapping_rules
from storage.errors import InvalidConfigError

STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's name of the authorizer kraft implements (any non-empty name selects it)."""

_CLASS, _SUPER, _EVERYONE, _RULES = (
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "ssl.principal.mapping.rules",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizationSettings:
    """The four keys; `authorizer` and `principal_rules` are what the guard uses."""

    authorizer_class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    principal_mapping_rules: str = DEFAULT_RULES
    principal_rules: tuple[MappingRule, ...] = (MappingRule(None),)

    @property
    def enabled(self) -> bool:
        return bool(self.authorizer_class_name)

    @property
    def authorizer(self) -> AuthorizerConfig:
        return AuthorizerConfig(
            enabled=self.enabled,
            super_users=self.super_users,
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuthorizationSettings:
        """Read the keys.

        Raises:
            InvalidConfigError: ``allow.everyone.if.no.acl.found`` is not a boolean, or a
                ``super.users`` entry or a mapping rule is malformed (the message names it).
        """
        everyone = props.get(_EVERYONE, "false").strip().lower()
        if everyone not in ("true", "false"):
            raise InvalidConfigError(f"{_EVERYONE} must be true or false, got {everyone[:40]!r}")
        supers = parse_super_users(props.get(_SUPER, ""))
        for principal in supers:
            kind, colon, name = principal.partition(":")
            if not (kind and colon and name):
                raise InvalidConfigError(
                    f"{_SUPER}: {principal[:80]!r} is not TYPE:NAME (e.g. User:admin)"
                )
        rules_text = props.get(_RULES, DEFAULT_RULES).strip() or DEFAULT_RULES
        try:
            rules = parse_mapping_rules(rules_text)
        except ValueError as e:
            raise InvalidConfigError(str(e)) from None
        return cls(
            authorizer_class_name=props.get(_CLASS, "").strip(),
            super_users=supers,
            allow_everyone_if_no_acl_found=everyone == "true",
            principal_mapping_rules=rules_text,
            principal_rules=rules,
        )

    def to_properties(self) -> dict[str, str]:
        """The keys that differ from their defaults."""
        props: dict[str, str] = {}
        if self.authorizer_class_name:
            props[_CLASS] = self.authorizer_class_name
        if self.super_users:
            props[_SUPER] = ";".join(sorted(self.super_users))
        if self.allow_everyone_if_no_acl_found:
            props[_EVERYONE] = "true"
        if self.principal_mapping_rules != DEFAULT_RULES:
            props[_RULES] = self.principal_mapping_rules
        return props


__all__ = ["STANDARD_AUTHORIZER", "AuthorizationSettings"]

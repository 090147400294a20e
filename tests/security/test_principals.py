"""``ssl.principal.mapping.rules`` as Kafka's SslPrincipalMapper applies them, and the principal
of a call from its gRPC auth context."""

from __future__ import annotations

import pytest

from kraft.security.principals import (
    map_principal,
    parse_mapping_rules,
    principal_of_auth_context,
)

DN = "CN=Alice,OU=ServiceUsers,O=Example,C=US"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", f"User:{DN}"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "User:Alice"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", "User:alice"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", "User:ALICE"),
        (
            "RULE:^CN=(.*?),OU=Admins.*$/$1/, RULE:^CN=([^,]*),OU=[^,]*,O=([^,]*),.*$/$1@$2/L",
            "User:alice@example",
        ),
        ("RULE:^CN=(.*?),OU=Admins.*$/$1/,DEFAULT", f"User:{DN}"),
        ("RULE:^CN=([a-zA-Z]+),.*$/$1/L,DEFAULT", "User:alice"),
        ("RULE:^OU=.*$/x/", None),
        (r"RULE:^CN=(.*?),.*$/svc\/$1/", "User:svc/Alice"),
    ],
)
def test_the_first_matching_rule_names_the_principal(rules: str, expected: str | None) -> None:
    assert map_principal(DN, parse_mapping_rules(rules)) == expected


@pytest.mark.parametrize("rules", ["", "RULE:^CN=(.*$/x/", "RULE:no-slashes", "USER:x/y/"])
def test_a_malformed_rule_list_is_refused_with_its_text(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        parse_mapping_rules(rules)


def test_a_call_without_a_certificate_is_anonymous() -> None:
    rules = parse_mapping_rules("DEFAULT")
    assert principal_of_auth_context({}, rules) == "User:ANONYMOUS"
    assert principal_of_auth_context({"transport_security_type": [b"insecure"]}, rules) == (
        "User:ANONYMOUS"
    )


def test_a_call_with_a_certificate_is_its_mapped_subject() -> None:
    x509 = pytest.importorskip("cryptography.x509")
    import datetime

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example"),
            x509.NameAttribute(NameOID.COMMON_NAME, "bob"),
        ]
    )
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    context = {"x509_pem_cert": [pem]}
    assert (
        principal_of_auth_context(context, parse_mapping_rules("DEFAULT"))
        == "User:CN=bob,O=Example"
    )
    rules = parse_mapping_rules("RULE:^CN=(.*?),.*$/$1/")
    assert principal_of_auth_context(context, rules) == "User:bob"
    assert principal_of_auth_context(context, parse_mapping_rules("RULE:^OU=.*$/x/")) == (
        "User:ANONYMOUS"
    )

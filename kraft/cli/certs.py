"""``kraft certs create``: a CA and per-node and per-client certificates for mTLS
(`kraft.security.certs`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

_EPILOG = """\
examples:
  kraft certs create --out /tmp/kraft-certs --nodes controller-1,broker-101 --clients alice,bob
  kraft certs create --out certs --clients alice --json
  kraft certs create --out certs --nodes controller-1,broker-101 --clients alice \\
      --san controller-1=ctl1.example.net,10.0.0.1 --san broker-101=10.0.0.11

Writes, all PEM (keys unencrypted, mode 0600): ca.pem and ca-key.pem (the CA); for every name
<name>.pem (the certificate, then the CA), <name>-key.pem (its key) and <name>-keystore.pem
(key and chain in one file). Subjects are CN=<name> (the principal mapping reads it: User:CN=
alice); SANs are localhost, 127.0.0.1, the name, and every host name and IP address --san gives
for it. A peer or client checks the address it dials against them, so on separate hosts give each
node the addresses its listeners (and voter entries) name. Node certificates serve and dial (mTLS
between nodes); client certificates only dial. Use them as:
  node:    listeners=SSL://10.0.0.11:9092  ssl.keystore.location=DIR/broker-101-keystore.pem
           ssl.truststore.location=DIR/ca.pem  ssl.client.auth=required
  client:  export KRAFT_SSL_CAFILE=DIR/ca.pem KRAFT_SSL_CERTFILE=DIR/alice.pem \\
                  KRAFT_SSL_KEYFILE=DIR/alice-key.pem
Running it again makes a new CA: certificates of the old one are then not trusted.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "certs",
        help="make a CA and node and client certificates for mTLS",
        description="Certificates for mTLS (test and development: an operator with a CA uses "
        "its own).",
    )
    csub = p.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    c = csub.add_parser(
        "create",
        help="a CA and per-node and per-client certificates (PEM)",
        description="Make a CA in --out and sign a certificate for every node and client.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--out", required=True, metavar="DIR", help="the directory to write to")
    c.add_argument(
        "--nodes",
        default="",
        metavar="NAME[,NAME...]",
        help="node certificates (server and client use)",
    )
    c.add_argument(
        "--clients",
        default="",
        metavar="NAME[,NAME...]",
        help="client certificates (client use only)",
    )
    c.add_argument(
        "--san",
        action="append",
        default=[],
        metavar="NODE=HOST[,HOST...]",
        help="subject alternative names for one node of --nodes: host names and IP addresses "
        "it is dialled by (repeatable)",
    )
    c.add_argument("--json", action="store_true", help="print the files written as JSON")
    c.set_defaults(handler=create)


def create(args: argparse.Namespace) -> int:
    from kraft.security.certs import create_certs, parse_san

    nodes = [n.strip() for n in args.nodes.split(",") if n.strip()]
    clients = [n.strip() for n in args.clients.split(",") if n.strip()]
    if not nodes and not clients:
        raise ValueError("give --nodes and/or --clients (names of the certificates to make)")
    sans: dict[str, tuple[str, ...]] = {}
    for value in args.san:
        node, hosts = parse_san(value)
        sans[node] = (*sans.get(node, ()), *hosts)
    made = create_certs(args.out, nodes=nodes, clients=clients, sans=sans)
    doc: dict[str, Any] = {
        "ca": str(made.cafile),
        "ca_key": str(made.ca_keyfile),
        "nodes": {
            c.name: {"cert": str(c.certfile), "key": str(c.keyfile), "keystore": str(c.keystore)}
            for c in made.nodes
        },
        "clients": {
            c.name: {"cert": str(c.certfile), "key": str(c.keyfile), "keystore": str(c.keystore)}
            for c in made.clients
        },
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"CA: {doc['ca']} (key {doc['ca_key']})")
    for kind in ("nodes", "clients"):
        for name, files in doc[kind].items():
            print(f"{kind[:-1]} {name}: {files['cert']} (key {files['key']})")
    return 0

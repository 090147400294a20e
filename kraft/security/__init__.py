"""Transport security and authorization (issue 17).

- `tls`, `certs`: mTLS credentials for every channel and server (Kafka's PEM keys), and
  `kraft certs create`.
- `principals`, `authorizer`: the principal of a call (from the client certificate through
  ``ssl.principal.mapping.rules``) and Kafka's StandardAuthorizer rules over the ACLs that the
  metadata image holds.
"""

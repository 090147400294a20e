"""kraft's tests. Importing `kraft` first sets gRPC's fork support off before any test module
imports grpc (see kraft/__init__.py: Spark's JVM launch otherwise fails now and then)."""

import kraft  # noqa: F401

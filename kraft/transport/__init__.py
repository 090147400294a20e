"""The gRPC shells' wire layer: proto <-> dataclass codecs and the clients' one retry policy.

Proto objects stop here: `kraft.transport.codec` is the only code that converts between the
generated messages of ``kraft._generated`` and the cores' dataclasses.
"""

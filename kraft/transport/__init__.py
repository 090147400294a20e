"""The gRPC shells' wire layer: proto <-> dataclass codecs, channels and the clients' one retry
policy.

Proto objects stop at one converter per gRPC service: `kraft.transport.codec` (the Raft RPCs),
`kraft.transport.controller_codec` (the controller service: one by-name converter driven by
the dataclasses' type hints) and the broker's `replication.codec` (the same by-name converter,
plus hand-written Produce and Fetch, the hot path). The dataclasses they convert have one home
per layer: `kraft.raft.messages`, `kraft.controller.messages`, `replication.messages`.
"""

"""``kraft interop diff``: a differential test of kraft's Kafka protocol against Apache Kafka.

`wire` sends kio requests over sockets (the same bytes to both systems), `steps` is the
scripted sequence (one function per step, each returning normalized fields), `normalize` the
rules that make legitimately different answers comparable, `diff` the comparison and the
accepted differences, `run` the composition (given bootstraps, or clusters it starts).
"""

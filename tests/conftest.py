"""Fixtures shared by the whole suite (plugins, so that each exists once per run)."""

pytest_plugins = ["tests.kafka_peer", "tests.kraft_cluster"]

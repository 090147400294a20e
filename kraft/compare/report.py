"""``report.md`` and the terminal summary of ``kraft compare``: each claim of the comparison
beside the figure measured in this run that confirms or qualifies it."""

from __future__ import annotations

from typing import Any

CLAIMS = {
    "failures": "With ISR, f+1 replicas tolerate f failures; a majority quorum needs 2f+1.",
    "slow-follower": "ISR commits once every in-sync replica has a write, so one slow follower "
    "stalls produce latency until `replica.lag.time.max.ms` shrinks it out; a quorum commits "
    "at a majority and does not notice.",
    "power-loss": "ISR needs no fsync, because a crashed replica rejoins only after catching "
    "up; a quorum must fsync before it acknowledges, or a correlated power loss loses "
    "acknowledged data. The last replica standing loses its unflushed data globally "
    "(KIP-966's eligible leader replicas address it).",
    "unclean": "Unclean leader election trades acknowledged data for availability.",
}


def _f(value: Any, spec: str = ".1f", none: str = "-") -> str:
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _modes(results: dict[str, Any]) -> str:
    return ", ".join(f"`{k}` ({v})" for k, v in results.get("modes", {}).items())


def _clients(results: dict[str, Any]) -> list[str]:
    clients = results.get("clients", {})
    out = []
    if clients:
        out += [
            "",
            f"Clients: kraft's columns are driven by {clients['kraft']}"
            + (
                f"; the Apache Kafka {results.get('kafka_version', '')} column by "
                f"{clients['kafka']}, after kraft's cluster stopped and "
                f"{results.get('kafka_warmup_records', 0):,} untimed records (its JIT), its "
                "times shifted so that its fault starts where kraft's did"
                if "kafka" in clients
                else ""
            )
            + ". The data-loss cases use their column's client too, and read back with kraft's "
            "own client on kraft's columns, with librdkafka on Kafka's.",
        ]
    if results.get("kafka_error"):
        out += ["", f"**The Apache Kafka column failed**: `{results['kafka_error']}`."]
    return out


KAFKA_MODE = "kafka-isr"
KRAFT_ISR = "isr-min2"


def _versus_kafka(results: dict[str, Any]) -> list[str]:
    """The same figure for kraft's ISR (min.insync.replicas=2) and Apache Kafka's, and their
    ratio: where kraft behaves as Kafka does and where it differs, shown, not claimed."""
    s = results["scenarios"]

    def get(scenario: str, mode: str, *path: str) -> Any:
        value: Any = s.get(scenario, {}).get("modes", {}).get(mode)
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    rows = []
    for label, scenario, path, spec in (
        ("slow follower: ISR shrink after the pause, s", "slow-follower", ("isr_shrink_s",), ".2f"),
        (
            "slow follower: ISR expand after the resume, s",
            "slow-follower",
            ("isr_expand_s",),
            ".2f",
        ),
        ("slow follower: p99 before, ms", "slow-follower", ("before", "p99_ms"), ".1f"),
        ("slow follower: p99 during the pause, ms", "slow-follower", ("during", "p99_ms"), ".1f"),
        ("leader kill: to the next ack, p50 s", "leader-kill", ("p50_s",), ".2f"),
        ("leader kill: max s", "leader-kill", ("max_s",), ".2f"),
        (f"{STEADY_LABEL}: records/s", "steady", ("records_per_s",), ",.0f"),
        (f"{STEADY_LABEL}: p99 ms", "steady", ("p99_ms",), ".1f"),
        (
            f"{STEADY_LABEL}: brokers' CPU µs/record",
            "steady",
            ("brokers_cpu_us_per_record",),
            ".1f",
        ),
        ("one record at a time: p50 ms", "steady", ("one_at_a_time_p50_ms",), ".2f"),
    ):
        a, b = get(scenario, KRAFT_ISR, *path), get(scenario, KAFKA_MODE, *path)
        if a is None and b is None:
            continue
        ratio = (
            f"{a / b:.2f}x"
            if isinstance(a, int | float)
            and isinstance(b, int | float)
            and b
            and not label.startswith(STEADY_LABEL)
            else "-"
        )
        rows.append([label, _f(a, spec), _f(b, spec), ratio])
    rows += [[label, a, b, "-"] for label, a, b in _faults_versus_kafka(s)]
    out = [
        f"`{KRAFT_ISR}` (kraft's ISR, min.insync.replicas=2) against `{KAFKA_MODE}` (Apache "
        "Kafka's, the same settings) in the phases both ran; kraft / Kafka in the last column. "
        "Both clusters ran on this machine, one after the other (see the load above).",
        "",
        *_table(["figure", KRAFT_ISR, KAFKA_MODE, "kraft / Kafka"], rows),
    ]
    if any(r[0].startswith(STEADY_LABEL) for r in rows):
        out += ["", NOT_THROUGHPUT.format(clients=_steady_clients(results))]
    return out


STEADY_LABEL = "steady load (not a throughput figure)"
NOT_THROUGHPUT = (
    "The steady-load rows are not a throughput comparison, and have no ratio: each system ran "
    "one short load once, one after the other, at whatever load the machine had then; "
    "{clients}; and Kafka's JVM was warmed with only 10 times the phase's records, far from "
    "the ~2,000,000 its JIT needs (docs/benchmarks.md). They show how each behaves under a "
    "burst next to the fault phases. The same-client, warmed comparison, alternated in one "
    "run, is `kraft bench produce --against kafka` (docs/benchmarks.md)."
)
"""Why the steady rows beside Kafka are not throughput (the report, and docs/comparison.md)."""


def _steady_clients(results: dict[str, Any]) -> str:
    clients = results.get("clients", {})
    kraft, kafka = clients.get("kraft"), clients.get("kafka")
    if kraft and kafka and kraft != kafka:
        return f"the clients differ (kraft's column: {kraft}; Kafka's: {kafka})"
    return "both through the same client"


KAFKA_TWINS = ((KRAFT_ISR, KAFKA_MODE), ("isr-min1", "kafka-isr-min1"))
"""kraft's ISR mode and the Kafka mode with the same ``min.insync.replicas`` (2, then 1)."""


def _faults_versus_kafka(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, kraft's, Kafka's) of the failures and data-loss scenarios: yes/no, error
    names and counts, side by side (no ratio)."""
    rows: list[tuple[str, str, str]] = []
    fail = s.get("failures", {}).get("modes", {})
    for kraft_mode, kafka_mode in KAFKA_TWINS:
        a, b = fail.get(kraft_mode), fail.get(kafka_mode)
        if a is None or b is None:
            continue
        min_isr = "2" if kraft_mode == KRAFT_ISR else "1"
        for pa, pb in zip(a["phases"], b["phases"], strict=False):
            rows.append(
                (
                    f"failures, min.insync.replicas={min_isr}, {pa['phase']}: accepting; "
                    "one Produce",
                    f"{_f(pa['accepting'])}; {pa.get('produce_once', '-')}",
                    f"{_f(pb['accepting'])}; {pb.get('produce_once', '-')}",
                )
            )
    loss = s.get("data-loss", {})
    kill = loss.get("acks1_leader_kill", {}).get("modes", {})
    a, b = kill.get(KRAFT_ISR), kill.get(KAFKA_MODE)
    if a and b:
        for acks in ("acks=1", "acks=all"):
            rows.append(
                (
                    f"leader kill under {acks}: acknowledged records lost (of)",
                    f"{a[acks]['lost']} ({a[acks]['acknowledged']:,})",
                    f"{b[acks]['lost']} ({b[acks]['acknowledged']:,})",
                )
            )
    unclean = loss.get("unclean_election", {}).get("modes", {})
    for setting in ("true", "false"):
        a = unclean.get(f"{KRAFT_ISR}, unclean={setting}")
        b = unclean.get(f"{KAFKA_MODE}, unclean={setting}")
        if a and b:
            rows.append(
                (
                    f"stale replica, unclean.leader.election.enable={setting}: lost (of); "
                    "led again after s",
                    f"{a['lost']} ({a['acknowledged']:,}); "
                    f"{_f(a.get('led_again_after_s'), '.1f', 'not before the old leader')}",
                    f"{b['lost']} ({b['acknowledged']:,}); "
                    f"{_f(b.get('led_again_after_s'), '.1f', 'not before the old leader')}",
                )
            )
    return rows


def render_report(results: dict[str, Any], plots: list[str]) -> str:
    s = results["scenarios"]
    lines = [
        "# kraft compare: ISR and quorum replication under the same faults",
        "",
        f"Run: {'--quick' if results['quick'] else 'full'}, replication factor "
        f"{results['replication_factor']} ({results['brokers']} broker processes, "
        f"{results['controllers']} controller), one partition per topic, "
        f"broker config {results['broker_config']}, {results['cpus']} CPUs, load average "
        f"{results['load_average_before']} before and {results['load_average_after']} after, "
        f"{results['seconds']:.0f} s in all.",
        "",
        f"Modes: {_modes(results)}.",
    ]
    if results.get("network") == "netns":
        from kraft.compare.report_links import NO_KAFKA

        lines += [
            "",
            "Network: every node on its own network host (a network namespace on a bridge, "
            "this machine the clients' host), started from per-node properties files; faults "
            f"and limits act on the hosts' links. {NO_KAFKA}",
        ]
    if results.get("quorum_pending"):
        lines += [
            "",
            "**The quorum column is pending**: this cluster refused `replication.mode=quorum` "
            f'("{results["quorum_pending"][:160]}"). The figures below compare the ISR modes; '
            "the same command fills the quorum column once quorum topics exist.",
        ]
    lines += _clients(results)
    lines += ["", *_measures(results, plots)]
    if "kafka" in results.get("clients", {}):
        lines += ["", "## kraft's ISR beside Apache Kafka's", "", *_versus_kafka(results)]
    for plot in plots:
        lines += ["", f"![{plot}]({plot})"]
    if "failures" in s:
        lines += ["", "## Failures", "", f"Claim: {CLAIMS['failures']}", ""]
        lines += _failures(s["failures"])
    if "slow-follower" in s:
        lines += ["", "## Slow follower", "", f"Claim: {CLAIMS['slow-follower']}", ""]
        lines += _slow(s["slow-follower"], results)
    if "leader-kill" in s:
        lines += ["", "## Leader kill", ""]
        lines += _kill(s["leader-kill"])
    if "data-loss" in s:
        lines += ["", "## Acknowledged data lost", ""]
        lines += _loss(s["data-loss"])
    if "slow-link" in s:
        from kraft.compare.report_links import slow_link_section

        lines += ["", "## Slow link: a delay or a bandwidth limit on real links", ""]
        lines += slow_link_section(s["slow-link"], results)
    if "steady" in s:
        lines += ["", "## Steady state", ""]
        lines += _steady(s["steady"])
    return "\n".join(lines) + "\n"


_FIGURES = {
    "latency-slow-follower.png": "produce latency percentiles (p50, p99, p99.9) of the "
    "slow-follower probe, acks=all, over time, the pause shaded and the ISR changes marked",
    "latency-slow-link.png": "the same for the slow-link probe, each link limit shaded and "
    "named (what, on which host, how much)",
    "throughput.png": "the records/s each probe got acknowledged, over time, faults shaded, "
    "the offered rate dotted: availability under the faults at a fixed low load, **not a "
    "throughput measurement** (nor is the steady-state table: `kraft bench produce` is)",
    "unavailability.png": "seconds of each failures phase with no acknowledged acks=all write",
    "slow-link-bursts.png": "the records/s of an acks=all burst per mode under each link "
    "limit (one short burst each, one mode after the other, at the load above)",
    "records-lost.png": "acknowledged records lost per case and mode (the simulator's "
    "power-loss cases count acks=all batches, not records)",
}


def _measures(results: dict[str, Any], plots: list[str]) -> list[str]:
    """The load each figure was measured at and what it measures: a probe's rate over time
    is not a mode's throughput, and timings on a machine loaded above its CPU count are
    inflated, which a reader must know before ranking the modes."""
    rate = results.get("timing", {}).get("rate_per_s")
    load = results.get("load_average_before") or []
    cpus = results.get("cpus") or 0
    lines = ["**Load and what each figure measures.**"]
    if rate:
        lines.append(
            f"The slow-follower and slow-link probes offer {rate:g} records/s per mode and the "
            f"failures probe {min(rate, 100):g} records/s: low, fixed loads, so their records/s "
            "show when writes were acknowledged, not how many a mode can take."
        )
    if load and cpus and max(load) > cpus:
        lines.append(
            f"The machine's load average was {load[0]:g} on {cpus} CPUs before the run: every "
            "latency and rate here is inflated by waiting for a CPU, and a ratio between modes "
            "from one such run is not a benchmark (`kraft bench produce` on a quiet machine is)."
        )
    lines += [f"`{p}`: {_FIGURES[p]}." for p in plots if p in _FIGURES]
    return [" ".join(lines)]


def _error(r: dict[str, Any]) -> list[str] | None:
    return [f"The scenario failed: `{r['error']}`."] if "error" in r else None


def _failures(r: dict[str, Any]) -> list[str]:
    if (e := _error(r)) is not None:
        return e
    rows = []
    for mode, m in r["modes"].items():
        for p in m["phases"]:
            rows.append(
                [
                    mode,
                    p["phase"],
                    f"{p['acked']}/{p['sent']}",
                    _f(p["accepting"]),
                    _f(p["unavailable_s"], ".2f"),
                    p.get("produce_once", "-"),
                    ", ".join(p["errors"]) or "-",
                ]
            )
    killed = "; ".join(
        f"`{mode}`: Kafka brokers {m['kafka_killed']}"
        for mode, m in r["modes"].items()
        if "kafka_killed" in m
    )
    out = [
        f"Killed (SIGKILL) brokers {r['killed']} one after the other"
        + (f" ({killed}, in Kafka's own run)" if killed else "")
        + f", each phase {r['phases'][0]['end'] - r['phases'][0]['start']:.0f} s; acks=all "
        "probe, delivery.timeout.ms=3000. *Accepting*: a record sent in the second half of the "
        "phase was acknowledged. *Unavailable*: seconds of the phase in gaps of more than 0.5 s "
        "between acknowledgements. *One Produce*: the error of one acks=all Produce request "
        "sent to the leader's Kafka listener at the phase's end (NONE: written; "
        "NOT_ENOUGH_REPLICAS: refused, the ISR is below `min.insync.replicas`; "
        "REQUEST_TIMED_OUT: held for replicas that never answered).",
        "",
        *_table(
            ["mode", "phase", "acked/sent", "accepting", "unavailable s", "one Produce", "errors"],
            rows,
        ),
    ]
    verdicts = []
    for mode, m in r["modes"].items():
        two = next((p for p in m["phases"] if p["phase"] == "2 replicas killed"), None)
        if two is not None:
            verdicts.append(f"`{mode}` {'kept' if two['accepting'] else 'stopped'} accepting")
    if verdicts:
        out += ["", f"With 2 of 3 replicas down: {'; '.join(verdicts)}."]
    return out


def _slow(r: dict[str, Any], results: dict[str, Any]) -> list[str]:
    if (e := _error(r)) is not None:
        return e
    lag = results["broker_config"].get("replica.lag.time.max.ms")
    f = r["fault"]
    rows = []
    for mode, m in r["modes"].items():
        for window in ("before", "during", "after"):
            w = m[window]
            rows.append(
                [
                    mode,
                    window,
                    str(w["acked"]),
                    _f(w["p50_ms"]),
                    _f(w["p99_ms"]),
                    _f(w["p999_ms"]),
                    _f(w["max_ms"]),
                ]
            )
    out = [
        f"Broker {r['victim']} (a follower of every mode's partition) was paused with SIGSTOP "
        f"from {f['start']:.1f} s to {f['end']:.1f} s; `replica.lag.time.max.ms`={lag}. "
        "Latency is per record, acknowledgement minus send, acks=all, by send time.",
        "",
        *_table(["mode", "window", "acked", "p50 ms", "p99 ms", "p99.9 ms", "max ms"], rows),
        "",
    ]
    for mode, m in r["modes"].items():
        if "kafka_victim" in m:
            f = m["kafka_fault"]
            out.append(
                f"- `{mode}`: Kafka broker {m['kafka_victim']} was paused for "
                f"{f['end'] - f['start']:.1f} s in Kafka's own run (times above shifted to "
                "kraft's pause)."
            )
        isr = (
            f"ISR shrank {m['isr_shrink_s']:.1f} s after the pause, expanded "
            f"{_f(m['isr_expand_s'], '.1f', 'never')} s after the resume"
            if m["isr_shrink_s"] is not None
            else "the paused follower never left the replica set's ISR"
        )
        out.append(
            f"- `{mode}`: {isr}; "
            f"p99 during the pause {_f(m['during']['p99_ms'])} ms against "
            f"{_f(m['before']['p99_ms'])} ms before."
        )
    return out


def _kill(r: dict[str, Any]) -> list[str]:
    if (e := _error(r)) is not None:
        return e
    rows = [
        [
            mode,
            f"{len(m['samples_s']) + m.get('not_recovered', 0)} ({len(m['samples_s'])})",
            _f(m["p50_s"], ".2f"),
            _f(m["max_s"], ".2f"),
            ", ".join(f"{x:.2f}" for x in m["samples_s"])
            + (
                f"; {m['not_recovered']} kill(s) with no write acknowledged within 15 s"
                if m.get("not_recovered")
                else ""
            ),
        ]
        for mode, m in r["modes"].items()
    ]
    stuck = [k for k in r["kills"] if k.get("not_recovered")]
    notes = [
        f"- kill at {k['t']:.0f} s of broker {k['victim']}: no record sent after it was "
        f"acknowledged within 15 s on {', '.join(k['not_recovered'])}; a new producer "
        + (
            "then wrote at once, so the long-lived producer was stuck, not the partition"
            if k.get("new_producer_acked")
            else "could not write either"
        )
        for k in stuck
    ]
    return [
        "Time from SIGKILL of the partition's leader to the acknowledgement of the first "
        "record sent after the kill (acks=all; the producer finds the new leader itself). ISR: "
        "the controller elects once `broker.session.timeout.ms` fences the dead broker; "
        "quorum: the Raft group elects.",
        "",
        *_table(["mode", "kills (measured)", "p50 s", "max s", "each (s)"], rows),
        *(["", *notes] if notes else []),
    ]


def _loss(r: dict[str, Any]) -> list[str]:
    out: list[str] = []
    a = r.get("acks1_leader_kill", {})
    if a and (e := _error(a)) is None:
        rows = [
            [mode, acks, str(c["acknowledged"]), str(c["lost"]), str(c["duplicates"])]
            for mode, m in a["modes"].items()
            for acks, c in m.items()
        ]
        out += [
            "### acks=1 with a leader kill",
            "",
            "Per mode, an acks=1 and an acks=all probe (1000 records/s each) on two topics led "
            "by one broker, SIGKILLed, then restarted; a final read is checked against every "
            "acknowledgement (`kraft.compare.checker`).",
            "",
            *_table(["mode", "acks", "acknowledged", "lost", "duplicates"], rows),
        ]
    elif a:
        out += e or []
    u = r.get("unclean_election", {})
    if u and (e := _error(u)) is None:
        rows = [
            [
                mode,
                str(c["acknowledged"]),
                str(c.get("acknowledged_with_followers_down", "-")),
                str(c["lost"]),
                _f(c.get("led_again_after_s"), ".1f", "not before the old leader"),
                c.get("fresh_producer_write") or "-",
                f"{c.get('acknowledged_in_window', '-')}",
                _f(c["stale_only_s"], ".1f"),
            ]
            for mode, c in u["modes"].items()
        ]
        out += [
            "",
            "### Unclean leader election with a stale replica",
            "",
            f"Claim: {CLAIMS['unclean']}",
            "",
            "min.insync.replicas=1; steps: " + "; ".join(s["name"] for s in u["steps"]) + ". "
            "*Led again*: seconds from the stale replicas' restart to a leader. *Fresh write*: "
            "the error of one acks=all Produce request once a stale replica leads (NONE: "
            "written). *Probe acks*: "
            "acknowledgements the long-running idempotent probe got while only the stale "
            "replicas were up.",
            "",
            *_table(
                [
                    "topic",
                    "acknowledged",
                    "acked, followers down",
                    "lost",
                    "led again after s",
                    "fresh write",
                    "probe acks, stale only",
                    "stale-only window s",
                ],
                rows,
            ),
        ]
        stuck = [
            m
            for m, c in u["modes"].items()
            if c.get("fresh_producer_write") == "NONE" and c.get("acknowledged_in_window") == 0
        ]
        if stuck:
            out += [
                "",
                f"Observed: on {', '.join(f'`{m}`' for m in stuck)} a new producer wrote to "
                "the uncleanly elected leader, but the long-running idempotent probe got no "
                "acknowledgement until the old leader returned (its sends timed out: "
                f"{u['modes'][stuck[0]].get('errors_while_stale_only')}): the producer "
                "did not find the new leader. This was the symptom of a client bug fixed "
                "since (with every broker suspect, each metadata refresh asked the same dead "
                "one; docs/comparison.md, Known issues): seen again, it is a regression.",
            ]
    elif u:
        out += e or []
    p = r.get("power_loss", {})
    if p:
        rows = []
        for mode, m in p["modes"].items():
            if "pending" in m:
                rows.append([mode, "-", "-", "-", f"pending: {m['pending']}"])
                continue
            last, corr = m["last_standing"], m["correlated"]
            rows.append(
                [
                    mode,
                    str(last["acked_while_leader_alone"]),
                    f"{last['lost_acked_batches']} of {last['acked_batches']}",
                    f"{corr['lost_acked_batches']} of {corr['acked_batches']}",
                    f"{len(last['runs'])} seeds",
                ]
            )
        out += [
            "",
            "### Power loss: the last replica standing, and every broker at once",
            "",
            f"Claim: {CLAIMS['power-loss']}",
            "",
            f"Where: the {p['where']}; deterministic, so a seed gives the same figures in "
            "every run. The brokers flush every 5 s (a quorum also fsyncs before it "
            "acknowledges, unless `quorum.write.caching=true`). *Last replica standing*: the "
            "followers crash, the leader goes on alone for 1.5 s, loses power (its unflushed "
            "tail is cut) and restarts as the only in-sync replica. *Correlated*: every broker "
            "loses power at the same instant under load. Counted in acks=all batches (1 to 4 "
            "records) acknowledged before the power loss.",
            "",
            *_table(
                [
                    "mode",
                    "batches acked, leader alone",
                    "lost, last replica standing",
                    "lost, correlated",
                    "runs",
                ],
                rows,
            ),
            "",
            "ISR with min.insync.replicas=2 refuses writes once the leader is alone, yet loses "
            "too: the batches acknowledged by the full ISR in the seconds before the followers "
            "crashed were unflushed on the leader, and once the followers left the ISR the "
            "leader was the last in-sync replica, so the clean election after its power loss "
            "picks its cut log, and the followers that had those batches truncate to it.",
        ]
    return out


def _steady(r: dict[str, Any]) -> list[str]:
    rows = [
        [
            mode,
            _f(m["records_per_s"], ",.0f"),
            _f(m["p50_ms"]),
            _f(m["p99_ms"]),
            _f(m["client_cpu_us_per_record"]),
            _f(m["brokers_cpu_us_per_record"]),
            _f(m["one_at_a_time_p50_ms"], ".2f"),
        ]
        for mode, m in r["modes"].items()
    ]
    return [
        f"{r['records']:,} records of 100 B, acks=all, window 20,000, linger.ms=5 "
        "(`kraft bench produce`'s harness); then 300 records one at a time. One short run "
        "per mode, at the load above: the modes' latency and CPU under a burst, not a "
        "throughput benchmark (that is `kraft bench produce`, and beside Apache Kafka "
        "`kraft bench produce --against kafka`).",
        "",
        *_table(
            [
                "mode",
                "records/s",
                "p50 ms",
                "p99 ms",
                "client µs/rec",
                "brokers µs/rec",
                "one-at-a-time p50 ms",
            ],
            rows,
        ),
    ]


def summary_table(results: dict[str, Any]) -> str:
    """One line per mode: the headline figure of each scenario."""
    s = results["scenarios"]
    modes = list(results.get("modes", {}))
    header = ["mode", "slow p99 ms", "2 down: writes", "leader kill p50/max s", "records/s"]
    link = s.get("slow-link", {})
    if "modes" in link:
        from kraft.compare.report_links import slow_link_summary

        limits = "/".join(f"{p['limit']['kind']}@{p['limit']['where']}" for p in link["phases"][1:])
        header.append(f"slow link p50 ms (none/{limits})")
    rows = []
    for mode in modes:
        slow = s.get("slow-follower", {}).get("modes", {}).get(mode)
        fail = s.get("failures", {}).get("modes", {}).get(mode)
        kill = s.get("leader-kill", {}).get("modes", {}).get(mode)
        steady = s.get("steady", {}).get("modes", {}).get(mode)
        two = (
            next((p for p in fail["phases"] if p["phase"] == "2 replicas killed"), None)
            if fail
            else None
        )
        rows.append(
            [
                mode,
                f"{_f(slow['before']['p99_ms'], '.0f')} -> {_f(slow['during']['p99_ms'], '.0f')}"
                if slow
                else "-",
                ("accepted" if two["accepting"] else "refused") if two else "-",
                f"{_f(kill['p50_s'], '.2f')}/{_f(kill['max_s'], '.2f')}" if kill else "-",
                _f(steady["records_per_s"], ",.0f") if steady else "-",
                *([slow_link_summary(link, mode)] if "modes" in link else []),
            ]
        )
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    loss = s.get("data-loss", {})
    lost = []
    for key, part in (("acks1_leader_kill", "acks=1 kill"), ("unclean_election", "unclean")):
        for mode, m in loss.get(key, {}).get("modes", {}).items():
            if key == "acks1_leader_kill":
                lost += [f"{part} {mode} acks={k[5:]}: {c['lost']}" for k, c in m.items()]
            else:
                lost.append(f"{part} {mode}: {m['lost']}")
    for mode, m in loss.get("power_loss", {}).get("modes", {}).items():
        if "correlated" in m:
            lost.append(
                f"power loss (sim, batches) {mode}: last standing "
                f"{m['last_standing']['lost_acked_batches']}, correlated "
                f"{m['correlated']['lost_acked_batches']}"
            )
    if any(row[4] != "-" for row in rows):  # the steady records/s
        load = results.get("load_average_before") or ["?"]
        lines += [
            "",
            f"records/s: one short steady load each, at load average {load[0]} on "
            f"{results.get('cpus', '?')} CPUs: not a throughput figure (kraft bench produce "
            "--against kafka is)",
        ]
    if lost:
        lines += ["", "acknowledged records lost: " + "; ".join(lost)]
    if results.get("quorum_pending"):
        lines += ["", "quorum: pending (the cluster refused replication.mode=quorum)"]
    return "\n".join(lines)


__all__ = ["render_report", "summary_table"]

"""The main job (``make demo``, ``python -m kraft.demo``) and its parts.

- `kraft.demo.main_job`: the story: a 3+3 cluster, a million acks=all records, a broker killed
  and restarted, every record read back, a consumer group losing a member, Spark, a summary;
- `kraft.demo.acks`: the demo's values and the tracker of their acknowledgements;
- `kraft.demo.verify`: the read-back that checks every acknowledged record;
- `kraft.demo.group_step`: the consumer group: 3 consumer processes, one killed, the rebalance
  and the lag draining; `kraft.demo.group_worker` is one of those processes;
- `kraft.demo.report`: the summary;
- `kraft.demo.console`: the progress bar and live lines;
- `kraft.demo.watch`: narrates the failover as the controller and the producer live it;
- `kraft.demo.spark_step`: the Spark read through the ``kraft`` data source;
- `kraft.demo.storage_crash`: the older single-log crash-recovery demo (``--storage``).
"""

"""The main job (``make demo``, ``python -m kraft.demo``) and its parts.

- `kraft.demo.main_job`: the story: a 3+3 cluster, a million acks=all records, a broker killed
  and restarted, every record read back, Spark, a summary;
- `kraft.demo.console`: the progress bar and live lines;
- `kraft.demo.watch`: narrates the failover as the controller and the producer live it;
- `kraft.demo.spark_step`: the Spark read through the ``kraft`` data source;
- `kraft.demo.storage_crash`: the older single-log crash-recovery demo (``--storage``).
"""

"""A broker's life in the cluster: its metadata, its registration and heartbeats, its way to
the controllers, and a clean stop.

- `broker_lifecycle`: `BrokerLifecycle`, registration, heartbeats, fencing and controlled
  shutdown (KIP-631);
- `controllers`: the controller channel (the voters, KIP-853, and the broker's requests);
- `metadata_loader`: the metadata images, built off the event loop;
- `clean_shutdown`: the record of a clean stop (KIP-966).
"""

"""The window: how long a change at the source takes to be in force while a watcher runs
(``retrieval-indexer watch``; docs/indexer.md, "Watching").

    python -m bench.freshness [--objects 100000] [--changes 20] [--sources folder,s3]
                              [--modes events,relisting,outage,restart] [--rescan 60]
                              [--s3-server seaweedfs|moto|minio] [--out DIR]

A source of ``--objects`` documents under folder rules (公共 public, 法务 and 人事 restricted)
is indexed and watched, through the local embedding model. Changes then arrive at a steady
rate, the way a company's share changes: a document moved from 公共 into 法务, one deleted,
one given a sidecar that names a restricted role, a rules edit that restricts a folder of
公共, an edit of a document's text, a new document. A prober asks Elasticsearch as the
affected people every 100 ms — the service's own ACL clause: anonymous for what must leave
公共, the public reader for what must appear — and each change's window is the time from the
change at the source to the first moment every answer agrees. Reported per kind: p50, p95 and
max, for events and for the re-listing alone (``--events none``), for a folder and for an S3
bucket with its notifications through SQS (``--s3-server``: SeaweedFS beside moto's queue, or
moto alone) or posted by MinIO's webhook to the watcher's ``--listen`` (``minio``; see
``servers``), and how many changes were missed.

Each source is written and indexed once; the modes then watch it in turn, each changing
documents, folders and words of its own (the watcher's first re-listing checks the whole
source against the index: its time is reported as ``first_relisting_s``).

Two more modes interrupt the events mode a quarter into its changes, while they go on arriving:
``outage`` cuts Elasticsearch off from the watcher for a minute (a TCP proxy between them;
the prober still asks it directly), ``restart`` kills the watcher (SIGKILL) and starts it again
5 s later — it takes over its dead predecessor's lease at once, then re-lists. Their target
is that nothing is missed; their windows say what the interruption cost.

Targets (issue #55 §4): narrowing p95 ≤ 5 s with events, ≤ one re-listing interval + 5 s
without; widening (new text, embedded) p95 ≤ 30 s with events — without them nothing is seen
before the next re-listing, so ≤ one interval + 30 s; none missed, also through an outage
and a restart.
"""

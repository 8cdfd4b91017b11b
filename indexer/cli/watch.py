"""``retrieval-indexer watch``: ``index``'s options and pipeline, kept running — a change at
the source in force in seconds, narrowing first (``indexer.watch``)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from elasticsearch import AsyncElasticsearch
from rich.markup import escape

from indexer.cli.common import app, before_writing, err, open_embedder, run
from indexer.cli.index import index
from indexer.cli.prepare import Prepared, exclude_from, load_manifest, prepare
from indexer.convergence import RulesEditRecorder
from indexer.loading import IndexOptions
from indexer.passing_over import PassedOver
from indexer.permissions import load_rules
from indexer.sources import LocalSource, ObjectStoreSource, SmbSource
from indexer.sources.local import refuse_links_inside
from indexer.watch.events import FileStamps, Heard, folder_events, queue_events, queue_url
from indexer.watch.health import Health, WatchMetrics
from indexer.watch.mns_signature import MnsVerifier, cert_hosts
from indexer.watch.pushed import Listener, parse_address, token_from
from indexer.watch.root import RootWatch
from indexer.watch.settle import Settled
from indexer.watch.watcher import Watcher, WatchOptions
from retrieval_svc.search.index import ensure_configured_index
from retrieval_svc.settings import IndexSettings
from retrieval_svc.words import reason, say

# index's options a watcher has no use for: it writes (no dry run), serves its own /metrics,
# and says what each settle did on a line of its own.
NOT_WATCHED = ("dry_run", "as_json", "metrics_textfile", "pushgateway", "lease_wait")


def _reloader(prepared: Prepared, args: dict[str, Any]) -> Any:
    """Read the rules file and the manifest again, through the checks the start applies
    (raises on a bad one — one reached through a link inside the source too: the old ones
    stay)."""

    def reload() -> IndexOptions:
        options = prepared.options
        refuse_links_inside(
            prepared.src, {"--acl-rules": args["acl_rules"], "--manifest": args["manifest"]}
        )
        rules = load_rules(args["acl_rules"]) if args["acl_rules"] else None
        manifest = load_manifest(args["manifest"])
        fresh = PassedOver()
        old, prepared.src.passed_over = prepared.src.passed_over, fresh
        try:
            exclude_from(prepared.src, args["exclude"], rules)
        except ValueError:
            prepared.src.passed_over = old
            raise
        return replace(options, acl_rules=rules, manifest=manifest)

    return reload


def _listener(prepared: Prepared, args: dict[str, Any]) -> Listener | None:
    """The HTTP listener for pushed events (--listen), bound now: a taken port or a missing
    token is said at the start."""
    if not args["listen"]:
        if args["listen_mns"]:
            raise typer.BadParameter(say("listen_mns_alone"))
        return None
    src, spec = prepared.src, args["listen"]
    if not isinstance(src, ObjectStoreSource):
        raise typer.BadParameter(say("listen_folder"))
    if args["events"]:
        raise typer.BadParameter(say("listen_or_events"))
    try:
        parse_address(spec)
    except ValueError:
        raise typer.BadParameter(say("listen_address", spec=spec)) from None
    try:
        token = token_from(args["listen_token_file"], dict(os.environ))
    except OSError as exc:
        raise typer.BadParameter(f"--listen-token-file: {exc.strerror or exc}") from None
    mns = _mns(args["listen_mns"])
    if not token and mns is None:
        raise typer.BadParameter(say("listen_token"))
    try:
        return Listener(spec, token, src.bucket, src.prefix, mns=mns)
    except OSError as exc:
        raise typer.BadParameter(say("listen_unavailable", spec=spec, why=exc.strerror)) from None


def _mns(enabled: bool) -> MnsVerifier | None:
    """MNS's signed push (--listen-mns): the certificate hosts allowed
    (``RSVC_WATCH_MNS_CERT_HOSTS``, else Alibaba Cloud's) and the CAs their TLS is verified
    against (``RSVC_WATCH_MNS_CA_FILE``, else the system's)."""
    if not enabled:
        return None
    try:
        hosts = cert_hosts(os.environ.get("RSVC_WATCH_MNS_CERT_HOSTS"))
    except ValueError as exc:
        raise typer.BadParameter(f"RSVC_WATCH_MNS_CERT_HOSTS: {exc}") from None
    ca_file = os.environ.get("RSVC_WATCH_MNS_CA_FILE") or None
    if ca_file is not None and not os.path.isfile(ca_file):
        raise typer.BadParameter(say("listen_mns_ca", path=ca_file))
    return MnsVerifier(hosts, ca_file)


def _events(prepared: Prepared, args: dict[str, Any], listener: Listener | None) -> Any:
    """Where changes are heard: a folder's own events, the bucket's queue (--events), or
    what is pushed to the listener (--listen)."""
    src, spec = prepared.src, args["events"]
    if listener is not None:
        return listener.events
    if spec == "none":
        return None  # (the re-listing alone)
    if isinstance(src, LocalSource):
        if spec:
            raise typer.BadParameter("--events is for a bucket: a folder's events are its own")
        root, debounce = src.root, args["debounce_ms"]

        def heard_in_folder(stop: asyncio.Event) -> AsyncIterator[Heard]:
            return folder_events(root, stop, debounce)

        return heard_in_folder
    if isinstance(src, SmbSource):
        if spec:
            raise typer.BadParameter("--events is for a bucket: a share's events are its own")
        share = src

        def heard_on_share(stop: asyncio.Event) -> AsyncIterator[Heard]:
            from indexer.watch.share_events import share_events

            return share_events(share, stop)

        return heard_on_share
    if not spec:
        return None  # (a bucket without notifications: the re-listing alone)
    assert isinstance(src, ObjectStoreSource)
    if src.scheme != "s3":
        raise typer.BadParameter(
            "--events reads an SQS queue: for OSS, let EventBridge push its events to "
            "--listen, or let the re-listing alone find changes (docs/indexer.md, 'Watching')"
        )
    import boto3

    # (the endpoint and credentials as the bucket's: --endpoint, or AWS_ENDPOINT_URL[_SQS])
    region = args["region"] or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    sqs = boto3.client("sqs", endpoint_url=args["endpoint"], region_name=region)
    url = queue_url(sqs, spec)
    bucket, prefix = src.bucket, src.prefix

    def heard_on_queue(stop: asyncio.Event) -> AsyncIterator[Heard]:
        return queue_events(sqs, url, bucket, prefix, stop)

    return heard_on_queue


def _said(what: str, done: Settled) -> None:
    report = done.report
    indexed = report.documents_indexed if report else 0
    retagged = report.documents_retagged if report else 0
    failed = report.documents_failed if report else 0
    kind = say({"events": "what_events", "rules": "what_rules"}.get(what, "what_relisting"))
    line = say("settled", at=time.strftime("%H:%M:%S"), what=kind, looked=done.looked,
               deleted=done.deleted, held=done.held, indexed=indexed, retagged=retagged,
               failed=failed)  # fmt: skip
    err.print(escape(line), soft_wrap=True)
    for failure in (report.failures if report else [])[:20]:
        item = say("failed_item", document=failure["document"], reason=reason(failure["reason"]))
        err.print(escape(item), soft_wrap=True)


def watch(**args: Any) -> None:
    """Keep a knowledge base true to SOURCE, in seconds: the source's events (a folder's own;
    a bucket's through --events sqs://QUEUE) and a re-listing every --rescan seconds,
    narrowing first (a deleted or moved document leaves, a changed one answers no one until it
    is read again), then the same pipeline as `index`. Runs until stopped (SIGTERM, Ctrl-C)."""
    for name in NOT_WATCHED:
        args.setdefault(name, None if name in ("metrics_textfile", "pushgateway") else False)
    # A service's warnings are its operator's (a lease waited for, a settle tried again).
    logging.getLogger("indexer.watch").setLevel(logging.WARNING)
    prepared = prepare(args)
    options = prepared.options
    files = [Path(f) for f in (args["acl_rules"], args["manifest"]) if f]
    listener = _listener(prepared, args)
    events = _events(prepared, args, listener)
    settings = prepared.settings

    async def work(es: AsyncElasticsearch, settings: IndexSettings) -> int:
        async with open_embedder(settings) as (embedder, model):
            await before_writing(es, settings)
            await ensure_configured_index(es, settings, model, options.tenant)
            labels = {"knowledge_id": options.knowledge_id, "shard": str(options.shard or "")}
            health = Health(WatchMetrics(labels))
            if args["health_port"] >= 0:
                port = health.serve(args["health_port"])
                watching = say("watching", source=prepared.src.description, port=port)
                err.print(escape(watching), soft_wrap=True)
            if listener is not None:
                address = f"{args['listen'].rpartition(':')[0] or '0.0.0.0'}:{listener.port}"
                err.print(escape(say("listening", address=address)), soft_wrap=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, stop.set)
            # A rules edit's permission history, as `index` keeps it (the watcher's options
            # are the ones in force: a rules edit replaces them).
            edits = RulesEditRecorder(
                settings, options.tenant, options.acl_rules, lambda: watcher.options.acl_rules
            )

            def said(what: str, done: Settled) -> None:
                _said(what, done)
                if warning := edits.said(what, done.report, done.held):
                    err.print(escape(say("warning", what=warning)), soft_wrap=True)

            watcher = Watcher(
                es,
                prepared.src,
                options,
                index_alias=settings.index_alias,
                watch=WatchOptions(
                    rescan_s=args["rescan"],
                    lease_ttl_s=args["lease_ttl"],
                    lease_name=(args["lease_name"] or "").strip(),
                ),
                events=events,
                files=FileStamps(files) if files else None,
                reload=_reloader(prepared, args) if files else None,
                embedder=embedder,
                health=health,
                said=said,
                root=RootWatch(prepared.src.root, prepared.src.given)
                if isinstance(prepared.src, LocalSource)
                else None,
            )
            try:
                await watcher.run(stop)
            finally:
                health.close()
                if listener is not None:
                    listener.close()
            return 0

    raise typer.Exit(run(work, settings))


WATCH_OPTIONS = [
    inspect.Parameter(
        "rescan",
        inspect.Parameter.KEYWORD_ONLY,
        default=60.0,
        annotation=Annotated[
            float,
            typer.Option(
                min=1.0,
                help="Seconds between re-listings of the whole source (sizes, times and "
                "sidecars compared; unchanged files are not read): the path that finds what "
                "events missed — a mounted share may deliver none.",
            ),
        ],
    ),
    inspect.Parameter(
        "events",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                help="A bucket's event notifications: sqs://QUEUE (or the queue's URL), "
                "ObjectCreated, ObjectRemoved and ObjectTagging events. A folder's events "
                "are its own. 'none': the re-listing alone.",
                show_default=False,
            ),
        ],
    ),
    inspect.Parameter(
        "listen",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                help="A bucket's events pushed over HTTP to HOST:PORT (or :PORT): MinIO's "
                "webhook or EventBridge's HTTP target (OSS). "
                "Requests carry Authorization: Bearer TOKEN.",
                show_default=False,
            ),
        ],
    ),
    inspect.Parameter(
        "listen_token_file",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                help="A file whose first line is --listen's token (else the environment's "
                "RSVC_WATCH_LISTEN_TOKEN).",
                show_default=False,
            ),
        ],
    ),
    inspect.Parameter(
        "listen_mns",
        inspect.Parameter.KEYWORD_ONLY,
        default=False,
        annotation=Annotated[
            bool,
            typer.Option(
                "--listen-mns",
                envvar="RSVC_WATCH_LISTEN_MNS",
                help="--listen also takes Alibaba Cloud MNS's HTTP push (a topic's HTTP "
                "subscription), verified by its signature instead of the token: the "
                "certificate only from RSVC_WATCH_MNS_CERT_HOSTS (default: Alibaba Cloud's).",
            ),
        ],
    ),
    inspect.Parameter(
        "debounce_ms",
        inspect.Parameter.KEYWORD_ONLY,
        default=300,
        annotation=Annotated[
            int, typer.Option(min=10, help="A folder's events gathered this long (ms).")
        ],
    ),
    inspect.Parameter(
        "health_port",
        inspect.Parameter.KEYWORD_ONLY,
        default=9464,
        annotation=Annotated[
            int,
            typer.Option(min=-1, help="Port of /metrics, /healthz, /readyz (0: any; -1: none)."),
        ],
    ),
    inspect.Parameter(
        "lease_name",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                envvar="RSVC_WATCH_LEASE_NAME",
                help="Who this watcher is to its source's lease [the host's name]. A watcher "
                "started again under the same name takes over its predecessor's lease at once "
                "(on the same host: once the old process is gone; under a name given here: "
                "from any host). Give a Deployment's one replica a fixed name.",
                show_default=False,
            ),
        ],
    ),
]


def _signature() -> inspect.Signature:
    """``index``'s parameters (its options, one definition) less ``NOT_WATCHED``, and the
    watcher's own."""
    own = inspect.signature(index, eval_str=True)
    kept = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.default is not p.empty else p
        for p in own.parameters.values()
        if p.name not in NOT_WATCHED
    ]
    return own.replace(parameters=[*kept, *WATCH_OPTIONS], return_annotation=None)


watch.__signature__ = _signature()  # type: ignore[attr-defined]
app.command()(watch)

"""What a queue or a listener hears, read as untrusted input (``indexer.watch.notices``):
every message and every record on its own, within limits; what cannot be read is a named
problem, never an exception, and never hides the real events beside it. The formats real
servers send: S3's and MinIO's records, SNS's envelope, AWS EventBridge's, and OSS's as
Alibaba Cloud documents them — base64 in an MNS queue message, inside MNS's XML or JSON HTTP
notification, and as Alibaba Cloud EventBridge's CloudEvents envelope."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.watch.notices import LIMITS, PROBLEMS, Limits, read_message


def s3_record(bucket: str, key: str) -> dict[str, Any]:
    return {"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
            "eventTime": "2026-12-04T09:00:00.000Z",
            "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket},
                   "object": {"key": key, "size": 12}}}  # fmt: skip


def oss_event(bucket: str, key: str) -> dict[str, Any]:
    """One record as OSS's event notification documents it (keys as stored)."""
    return {
        "eventName": "ObjectCreated:PutObject", "eventSource": "acs:oss",
        "eventTime": "2026-12-04T09:00:00.000Z", "eventVersion": "1.0",
        "oss": {
            "bucket": {"arn": f"acs:oss:cn-hangzhou:1148956468****:{bucket}", "name": bucket,
                       "ownerIdentity": "1148956468****"},
            "object": {"deltaSize": 12, "eTag": "0CC175B9C0F1B6468E1199E269772661", "key": key,
                       "size": 12},
            "ossSchemaVersion": "1.0", "ruleId": "watch-rule",
        },
        "region": "cn-hangzhou", "requestParameters": {"sourceIPAddress": "198.51.100.1"},
        "responseElements": {"requestId": "5FF16B65F05BC932307A3C3C"},
        "userIdentity": {"principalId": "1148956468****"},
    }  # fmt: skip


def test_one_unreadable_record_is_named_and_the_rest_of_the_message_read() -> None:
    body = {"Records": [{"s3": "x"}, s3_record("corp", "kb/a.md"), "text", {"s3": {"bucket": 1}}]}
    read = read_message(json.dumps(body), "corp", "kb/")
    assert read.keys == {"a.md"}
    assert read.problems == ["bad_record", "bad_record", "bad_record"]


def test_hostile_messages_are_named_problems_never_exceptions() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    cases = {
        '{"Records":[{"s3":"x"}]}': "bad_record",
        deep[: LIMITS.body_bytes // 2] + deep[-LIMITS.body_bytes // 2 :]: "too_deep",
        "[" * 50 + "]" * 50: "too_deep",
        '"a string"': "not_an_event",
        '{"Records": "x"}': "not_an_event",
        "{not json": "not_json",
        "": "not_json",
        "x" * (LIMITS.body_bytes + 1): "too_large",
        json.dumps({"Records": [s3_record("corp", f"kb/{i}")
                                for i in range(LIMITS.records + 1)]}): "too_many_records",
        json.dumps({"Message": "{"}): "not_json",
        "1" * 10_000: "not_json",
        "<!DOCTYPE x [<!ENTITY a 'b'>]><Notification><Message>&a;</Message></Notification>":
            "not_an_event",
    }  # fmt: skip
    for body, problem in cases.items():
        read = read_message(body, "corp", "kb/")
        assert (read.keys, read.problems) == (set(), [problem]), body[:80]


def test_a_limit_is_a_parameter() -> None:
    body = json.dumps({"Records": [s3_record("corp", "kb/a.md")] * 3})
    assert read_message(body, "corp", "kb/", Limits(records=2)).problems == ["too_many_records"]
    assert read_message(body, "corp", "kb/", Limits(body_bytes=100)).problems == ["too_large"]
    assert read_message(body, "corp", "kb/", Limits(depth=4)).problems == ["too_deep"]


def test_minio_s_webhook_body_is_read() -> None:
    record = s3_record("corp", "kb/%E6%B3%95%E5%8A%A1/a+b.md")
    record["s3"]["object"]["userMetadata"] = {"content-type": "text/markdown"}
    body = {"EventName": "s3:ObjectCreated:Put", "Key": "corp/kb/法务/a b.md", "Records": [record]}
    assert read_message(json.dumps(body).encode(), "corp", "kb/").keys == {"法务/a b.md"}


def test_oss_events_through_mns_and_eventbridge_are_read() -> None:
    event = {"events": [oss_event("corp", "kb/法务/合同 2026.md"),
                        oss_event("corp", "kb/a.md.meta.json")]}  # fmt: skip
    encoded = base64.b64encode(json.dumps(event).encode()).decode()
    xml = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<Notification xmlns="http://mns.aliyuncs.com/doc/v1/">'
        "<TopicOwner>1148956468****</TopicOwner><TopicName>oss-events</TopicName>"
        "<Subscriber>1148956468****</Subscriber><SubscriptionName>watch</SubscriptionName>"
        "<MessageId>5F9C2E3A7B2C4D2C-1-15E2C5C1F4B-200000001</MessageId>"
        "<MessageMD5>8D9C1B0E3A5F4C2B9E7D6A5C4B3A2F1E</MessageMD5>"
        f"<Message>{encoded}</Message><PublishTime>1733302800000</PublishTime></Notification>"
    )
    as_json = json.dumps({"TopicOwner": "1148956468****", "TopicName": "oss-events",
                          "Subscriber": "1148956468****", "SubscriptionName": "watch",
                          "MessageId": "5F9C2E3A7B2C4D2C-1-15E2C5C1F4B-200000001",
                          "Message": encoded, "PublishTime": 1733302800000})  # fmt: skip
    cloud_event = json.dumps({
        "datacontenttype": "application/json;charset=utf-8", "aliyunaccountid": "1148956468****",
        "aliyunpublishtime": "2026-12-04T09:00:00.123Z", "aliyuneventbusname": "default",
        "aliyunregionid": "cn-hangzhou", "id": "c2g71017-6f65-fhcf-a814-a396fc8d****",
        "source": "acs.oss", "specversion": "1.0", "subject": "acs:oss:cn-hangzhou:x:corp/kb/a.md",
        "time": "2026-12-04T09:00:00Z", "type": "oss:ObjectCreated:PutObject",
        "data": oss_event("corp", "kb/法务/合同 2026.md"),
    })  # fmt: skip
    for body in (encoded, xml, as_json):
        read = read_message(body, "corp", "kb/")
        assert (read.keys, read.problems) == ({"法务/合同 2026.md", "a.md"}, []), body[:40]
    assert read_message(cloud_event, "corp", "kb/").keys == {"法务/合同 2026.md"}
    assert read_message(cloud_event, "other", "kb/").keys == set()


# The property: real events interleaved with random and hostile bodies, one message each or
# mixed into one message; every real event is read, and nothing raises.
keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)  # fmt: skip
hostile_records = st.one_of(
    json_values,
    st.sampled_from([{"s3": "x"}, {"s3": {"bucket": "x"}}, {"oss": {"bucket": {"name": 1}}},
                     {"s3": {"bucket": {"name": "corp"}, "object": {"key": ["kb/a"]}}}]),
)  # fmt: skip
hostile_bodies = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200),
    json_values.map(json.dumps),
    st.lists(hostile_records, max_size=5).map(lambda r: json.dumps({"Records": r})),
    st.lists(hostile_records, max_size=5).map(lambda r: json.dumps({"events": r})),
    st.integers(40, 3000).map(lambda n: "{" * n),
    st.integers(40, 3000).map(lambda n: '{"Records":' + "[" * n + "]" * n + "}"),
    st.just("x" * (LIMITS.body_bytes + 1)),
)


@st.composite
def traffic(draw: st.DrawFn) -> tuple[list[str | bytes], set[str]]:
    real = draw(st.lists(keys, min_size=1, max_size=8, unique=True))
    bodies: list[str | bytes] = draw(st.lists(hostile_bodies, max_size=8))
    for key in real:
        form = draw(st.sampled_from(["s3", "mixed", "oss", "mns", "sns"]))
        from urllib.parse import quote_plus

        encoded = quote_plus("kb/" + key, safe="/")
        if form == "s3":
            body = json.dumps({"Records": [s3_record("corp", encoded)]})
        elif form == "mixed":
            junk = draw(st.lists(hostile_records, max_size=3))
            body = json.dumps({"Records": [*junk, s3_record("corp", encoded), *junk]})
        elif form == "oss":
            body = json.dumps({"events": [oss_event("corp", "kb/" + key)]})
        elif form == "mns":
            text = json.dumps({"events": [oss_event("corp", "kb/" + key)]})
            body = base64.b64encode(text.encode()).decode()
        else:
            inner = json.dumps({"Records": [s3_record("corp", encoded)]})
            body = json.dumps({"Type": "Notification", "Message": inner})
        bodies.insert(draw(st.integers(0, len(bodies))), body)
    return bodies, {k.removesuffix(".meta.json") for k in real}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traffic())
def test_every_real_event_is_read_whatever_is_sent_beside_it(
    sent: tuple[list[str | bytes], set[str]],
) -> None:
    bodies, real = sent
    heard: set[str] = set()
    for body in bodies:
        read = read_message(body, "corp", "kb/")
        assert set(read.problems) <= set(PROBLEMS)
        heard |= read.keys
    assert real <= heard

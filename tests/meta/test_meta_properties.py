"""Random event sequences against a plain-list model of the object store.

The state machine applies random events (puts, overwrites, conditional puts, deletes with and
without version ids, versioning and quota changes, multipart steps, forced and plain bucket
deletes) to a ``MetaState`` and to a deliberately naive model (lists of versions, linear
scans), and checks after every step that:

- every outcome (accepted or the rejection code) is the model's;
- every key's versions are the model's; usage equals a recount of the versions;
- the referenced payloads are exactly those created and not yet released, and every payload
  is released exactly once;
- a snapshot round trip gives an equal state whose rebuilt indexes equal the live ones;
- listing all pages (random limit, prefix, delimiter) yields the model's keys and common
  prefixes, each once, in order; so does paging through the versions.

At the end the recorded events are replayed into a fresh state: same outcomes, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from service.meta import (
    MetaState,
    ObjectVersion,
    Outcome,
    decode_snapshot,
    encode_snapshot,
    freeze,
)
from tests.meta.factory import Factory

BUCKETS = ("b1", "b2")
# Few keys, so puts overwrite and deletes hit; shaped to exercise prefixes and delimiters.
keys = st.sampled_from(["a", "a/", "a/b", "a/b/c", "a-b", "ab", "b", "b/-a", "/a", "b-/", "\u00e9"])
sizes = st.integers(min_value=0, max_value=40)
quotas = st.one_of(st.none(), st.integers(min_value=0, max_value=200))


@dataclass
class ModelVersion:
    version_id: str | None
    payload_id: str | None  # None: a delete marker
    size: int
    sha256: str


@dataclass
class ModelBucket:
    versioning: bool
    quota: int | None
    keys: dict[str, list[ModelVersion]] = field(default_factory=dict)

    def used(self) -> int:
        return sum(v.size for vs in self.keys.values() for v in vs if v.payload_id)

    def visible(self, key: str) -> bool:
        versions = self.keys.get(key, [])
        return bool(versions) and versions[-1].payload_id is not None


@dataclass
class ModelUpload:
    bucket: str
    key: str
    parts: dict[int, str] = field(default_factory=dict)


def expected_listing(
    bucket: ModelBucket, prefix: str, delimiter: str | None
) -> list[tuple[str, bool]]:
    """``(item, is_prefix)`` in order: what a full listing must yield, computed naively."""
    items: list[tuple[str, bool]] = []
    for key in sorted(k for k in bucket.keys if bucket.visible(k) and k.startswith(prefix)):
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            common = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            if (common, True) not in items:
                items.append((common, True))
        else:
            items.append((key, False))
    return items


class MetaMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.f = Factory()
        self.state = MetaState()
        self.buckets: dict[str, ModelBucket] = {}
        self.uploads: dict[str, ModelUpload] = {}
        self.closed_uploads: list[str] = ["up-never-started"]
        self.released: set[str] = set()
        self.log: list[tuple[dict[str, Any], Outcome]] = []

    # -- plumbing -----------------------------------------------------------------------

    def apply(self, event: dict[str, Any], expected_error: str | None) -> Outcome:
        outcome = self.state.apply(event)
        self.log.append((event, outcome))
        assert outcome.error_code == expected_error, (event, outcome)
        assert outcome.ok == (expected_error is None)
        for payload_id in outcome.released_payloads:
            assert payload_id not in self.released, f"{payload_id} released twice"
            self.released.add(payload_id)
        return outcome

    def model_store(
        self, bucket: ModelBucket, key: str, event: dict[str, Any]
    ) -> tuple[str | None, list[ModelVersion] | None]:
        """The model's verdict on storing ``event``'s payload: (error, new versions)."""
        versions = bucket.keys.get(key, [])
        new = ModelVersion(None, event["payload_id"], event["size"], event["sha256"])
        if bucket.versioning:
            new.version_id = event["version_token"]
            after = [*versions, new]
        else:
            after = [v for v in versions if v.version_id is not None] + [new]
        # Only an unversioned PUT replaces (and so frees) the null version; under
        # versioning the null version is kept and still counts.
        freed = (
            0
            if bucket.versioning
            else sum(v.size for v in versions if v.version_id is None and v.payload_id)
        )
        if bucket.quota is not None and bucket.used() - freed + new.size > bucket.quota:
            return "QuotaExceeded", None
        return None, after

    # -- buckets ------------------------------------------------------------------------

    @initialize(versioning=st.booleans(), quota=quotas)
    def create_buckets(self, versioning: bool, quota: int | None) -> None:
        self.create_bucket("b1", versioning, quota)
        self.create_bucket("b2", not versioning, None)

    def create_bucket(self, name: str, versioning: bool, quota: int | None) -> None:
        error = "BucketAlreadyExists" if name in self.buckets else None
        self.apply(self.f.bucket(name, versioning=versioning, quota=quota), error)
        if error is None:
            self.buckets[name] = ModelBucket(versioning, quota)

    @rule(
        name=st.sampled_from(BUCKETS),
        versioning=st.one_of(st.none(), st.booleans()),
        quota=st.one_of(st.just("keep"), quotas),
    )
    def update_bucket(self, name: str, versioning: bool | None, quota: int | str | None) -> None:
        changes: dict[str, Any] = {}
        if versioning is not None:
            changes["versioning_enabled"] = versioning
        if quota != "keep":
            changes["quota_bytes"] = quota
        self.apply(self.f.update(name, **changes), None)
        model = self.buckets[name]
        model.versioning = model.versioning if versioning is None else versioning
        model.quota = model.quota if quota == "keep" else quota  # type: ignore[assignment]

    @rule(name=st.sampled_from(BUCKETS), force=st.booleans(), versioning=st.booleans())
    def drop_and_recreate_bucket(self, name: str, force: bool, versioning: bool) -> None:
        """Keeps both buckets in play: a successful delete is followed by a fresh create."""
        error = "BucketNotEmpty" if self.buckets[name].keys and not force else None
        self.apply(self.f.drop_bucket(name, force=force), error)
        if error is None:
            del self.buckets[name]
            for upload_id in [u for u, up in self.uploads.items() if up.bucket == name]:
                self.close_upload(upload_id)
        self.create_bucket(name, versioning, None)

    @rule(kind=st.sampled_from(["put", "delete", "delete_version", "update", "drop", "start"]))
    def touch_a_missing_bucket(self, kind: str) -> None:
        f = self.f
        build = {
            "put": lambda: f.put("k", bucket="ghost"),
            "delete": lambda: f.delete("k", bucket="ghost"),
            "delete_version": lambda: f.delete("k", "null", bucket="ghost"),
            "update": lambda: f.update("ghost", quota_bytes=1),
            "drop": lambda: f.drop_bucket("ghost", force=True),
            "start": lambda: f.start("k", bucket="ghost"),
        }
        self.apply(build[kind](), "NoSuchBucket")

    # -- objects ------------------------------------------------------------------------

    @rule(name=st.sampled_from(BUCKETS), key=keys, size=sizes)
    def put(self, name: str, key: str, size: int) -> None:
        self.conditional_put(name, key, size, "none")

    @rule(
        name=st.sampled_from(BUCKETS),
        key=keys,
        size=sizes,
        condition=st.sampled_from(["if_none_match", "if_match_current", "if_match_stale"]),
    )
    def conditional_put(self, name: str, key: str, size: int, condition: str) -> None:
        model = self.buckets[name]
        current = model.keys.get(key, [])
        visible = model.visible(key)
        if_match = None
        if condition == "if_match_current":
            if_match = current[-1].sha256 if visible else "f" * 64
        elif condition == "if_match_stale":
            if_match = "0" * 64
        event = self.f.put(
            key, size, bucket=name, if_none_match=condition == "if_none_match", if_match=if_match
        )
        after = None
        if (condition == "if_none_match" and visible) or (
            if_match is not None and not (visible and current[-1].sha256 == if_match)
        ):
            error: str | None = "PreconditionFailed"
        else:
            error, after = self.model_store(model, key, event)
        self.apply(event, error)
        if after is not None:
            model.keys[key] = after

    @rule(data=st.data(), name=st.sampled_from(BUCKETS), known=st.booleans())
    def delete(self, data: st.DataObject, name: str, known: bool) -> None:
        model = self.buckets[name]
        listed = sorted(k for k in model.keys if model.visible(k))
        key = data.draw(st.sampled_from(listed) if known and listed else keys)
        event = self.f.delete(key, bucket=name)
        if not model.visible(key):
            self.apply(event, "NoSuchKey")
            return
        self.apply(event, None)
        versions = model.keys[key]
        if model.versioning:
            versions.append(ModelVersion(event["version_token"], None, 0, ""))
            return
        kept = [v for v in versions if v.version_id is not None]
        if kept:
            model.keys[key] = [*kept, ModelVersion(None, None, 0, "")]
        else:
            del model.keys[key]

    @rule(data=st.data(), name=st.sampled_from(BUCKETS), known=st.booleans())
    def delete_version(self, data: st.DataObject, name: str, known: bool) -> None:
        model = self.buckets[name]
        if not model.keys or not known:
            event = self.f.delete(data.draw(keys), "v-never-issued", bucket=name)
            self.apply(event, "NoSuchVersion")
            return
        key = data.draw(st.sampled_from(sorted(model.keys)))
        versions = model.keys[key]
        pick = data.draw(st.integers(0, len(versions) - 1))
        version_id = versions[pick].version_id
        event = self.f.delete(key, "null" if version_id is None else version_id, bucket=name)
        self.apply(event, None)
        del versions[pick]
        if not versions:
            del model.keys[key]

    # -- multipart ----------------------------------------------------------------------

    @rule(name=st.sampled_from(BUCKETS), key=keys)
    def start_upload(self, name: str, key: str) -> None:
        event = self.f.start(key, bucket=name)
        self.apply(event, None)
        self.uploads[event["upload_id"]] = ModelUpload(name, key)

    def close_upload(self, upload_id: str) -> None:
        del self.uploads[upload_id]
        self.closed_uploads.append(upload_id)

    @rule(data=st.data(), number=st.integers(1, 4), size=sizes, to_open=st.booleans())
    def store_part(self, data: st.DataObject, number: int, size: int, to_open: bool) -> None:
        candidates = sorted(self.uploads) if to_open and self.uploads else self.closed_uploads
        upload_id = data.draw(st.sampled_from(candidates))
        event = self.f.part(upload_id, number, size)
        self.apply(event, None if upload_id in self.uploads else "NoSuchUpload")
        if upload_id in self.uploads:
            self.uploads[upload_id].parts[number] = event["payload_id"]

    @precondition(lambda self: bool(self.uploads))
    @rule(data=st.data(), size=sizes, stored=st.booleans())
    def complete(self, data: st.DataObject, size: int, stored: bool) -> None:
        upload_id = data.draw(st.sampled_from(sorted(self.uploads)))
        upload = self.uploads[upload_id]
        if stored and upload.parts:
            numbers = data.draw(st.sets(st.sampled_from(sorted(upload.parts)), min_size=1))
        else:
            numbers = data.draw(st.sets(st.integers(1, 4)))
        event = self.f.complete(upload_id, sorted(numbers), size)
        model = self.buckets[upload.bucket]
        after = None
        if not numbers or not numbers <= set(upload.parts):
            error: str | None = "InvalidPart"
        else:
            error, after = self.model_store(model, upload.key, event)
        self.apply(event, error)
        if after is not None:
            model.keys[upload.key] = after
            self.close_upload(upload_id)

    @precondition(lambda self: bool(self.uploads))
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        upload_id = data.draw(st.sampled_from(sorted(self.uploads)))
        self.apply(self.f.abort(upload_id), None)
        self.close_upload(upload_id)

    # -- listings -----------------------------------------------------------------------

    @rule(
        data=st.data(),
        limit=st.integers(1, 5),
        prefix=st.sampled_from(["", "a", "a/", "b-", "/"]),
        delimiter=st.sampled_from([None, "/", "-", "/-"]),
    )
    def list_all_pages(
        self, data: st.DataObject, limit: int, prefix: str, delimiter: str | None
    ) -> None:
        name = data.draw(st.sampled_from(sorted(self.buckets)))
        listed: list[tuple[str, bool]] = []
        marker = None
        for _ in range(1000):
            page = self.state.list_objects(name, prefix, delimiter, limit, marker)
            assert len(page.objects) + len(page.common_prefixes) <= limit
            items = [(v.key, False) for v in page.objects] + [
                (p, True) for p in page.common_prefixes
            ]
            listed.extend(sorted(items))
            if page.truncated:
                assert len(items) == limit and page.last_item == max(i for i, _ in items)
            if not page.truncated:
                break
            marker = page.last_item
        assert listed == expected_listing(self.buckets[name], prefix, delimiter)

    @rule(data=st.data(), limit=st.integers(1, 4))
    def list_all_versions(self, data: st.DataObject, limit: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.buckets)))
        model = self.buckets[name]
        listed: list[tuple[str, str | None, bool]] = []
        marker = None
        while True:
            page = self.state.list_versions(name, "", limit, marker)
            listed += [(e.version.key, e.version.version_id, e.is_latest) for e in page.versions]
            if not page.truncated:
                break
            marker = page.last_item
        expected = [
            (key, v.version_id, i == len(vs) - 1)
            for key, vs in sorted(model.keys.items())
            for i, v in reversed(list(enumerate(vs)))
        ]
        assert listed == expected

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def versions_and_usage_match_the_model(self) -> None:
        assert [b.name for b in self.state.list_buckets()] == sorted(self.buckets)
        for name, model in self.buckets.items():
            every: list[ObjectVersion] = []
            for key, versions in model.keys.items():
                stored = self.state.object_versions(name, key)
                every.extend(stored)
                assert [(v.version_id, v.payload_id, v.size) for v in stored] == [
                    (m.version_id, m.payload_id, m.size) for m in versions
                ]
                assert all(v.is_delete_marker == (v.payload_id is None) for v in stored)
            live = [v for v in every if not v.is_delete_marker]
            usage = self.state.bucket_usage(name)
            assert (usage.object_count, usage.size_bytes) == (
                len(live),
                sum(v.size for v in live),
            )
            assert usage.size_bytes == model.used()
        assert sorted(u.upload_id for u in self.state.uploads()) == sorted(self.uploads)

    @invariant()
    def referenced_payloads_are_those_created_and_not_released(self) -> None:
        created = set(self.f.payloads_created)
        assert self.state.referenced_payloads() == created - self.released

    @invariant()
    def snapshot_round_trip_is_exact(self) -> None:
        data = encode_snapshot(freeze(self.state))
        restored = decode_snapshot(data)
        assert restored == self.state
        assert encode_snapshot(restored) == data
        assert restored.referenced_payloads() == self.state.referenced_payloads()
        assert restored.counts() == self.state.counts()
        for name in self.buckets:
            assert restored.bucket_usage(name) == self.state.bucket_usage(name)
            assert restored.list_objects(name, limit=1000) == self.state.list_objects(
                name, limit=1000
            )

    def teardown(self) -> None:
        replayed = MetaState()
        for event, outcome in self.log:
            assert replayed.apply(event) == outcome
        assert encode_snapshot(replayed) == encode_snapshot(self.state)


MetaMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMetaStateAgainstModel = MetaMachine.TestCase

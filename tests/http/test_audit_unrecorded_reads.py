"""A read whose audit record cannot be made is never answered with the object (strict,
``SERVICE_AUDIT_READS=1``): it gets the audit log's 503, whichever way the server answers
it (a small body in the record's callback, a HEAD, a large body in a task).

The record is made impossible the way a failed write in another serving process makes it:
someone holds ``audit/stopped`` (docs/audit-format.md, "Several processes").
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable

from tests.http.test_buckets import assert_error
from tests.serverproc import ServerProcess


def test_a_read_whose_record_cannot_be_written_gets_503_not_the_object(
    server_factory: Callable[..., ServerProcess], bucket_name: str
) -> None:
    server = server_factory(SERVICE_AUDIT_READS="1", SERVICE_DURABILITY="strict")
    small, large = os.urandom(1000), os.urandom(3 * 1024 * 1024)
    with server.client() as api:
        api.post("/buckets", json={"name": bucket_name}).raise_for_status()
        api.put(f"/buckets/{bucket_name}/objects/small", content=small).raise_for_status()
        api.put(f"/buckets/{bucket_name}/objects/large", content=large).raise_for_status()
        assert api.get(f"/buckets/{bucket_name}/objects/small").content == small
        stop = os.open(server.data_dir / "audit" / "stopped", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(stop, fcntl.LOCK_EX)
            answers = [
                api.get(f"/buckets/{bucket_name}/objects/small"),
                api.get(f"/buckets/{bucket_name}/objects/large"),
                api.get(f"/buckets/{bucket_name}/objects/small", headers={"Range": "bytes=0-9"}),
            ]
            head = api.head(f"/buckets/{bucket_name}/objects/small")
        finally:
            os.close(stop)
        for answer in answers:
            assert_error(answer, 503, "ServiceUnavailable")
            assert answer.headers["Retry-After"]
            assert small[:64] not in answer.content and large[:64] not in answer.content
        assert head.status_code == 503
        assert head.headers["Retry-After"]
        # Fail-stop: no more records, so no more recorded reads, until a restart.
        assert_error(api.get(f"/buckets/{bucket_name}/objects/small"), 503, "ServiceUnavailable")
    server.stop()
    server.start()
    with server.client() as api:
        assert api.get(f"/buckets/{bucket_name}/objects/small").content == small
        assert api.get("/system/audit/verify").json()["ok"] is True

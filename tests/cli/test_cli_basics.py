"""``svc`` against a real server: aliases, buckets, listings, objects, errors, exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess

import httpx
import pytest

from tests.cli.svckit import Svc, error_line
from tests.serverproc import ServerProcess, free_port


def put(api: httpx.Client, bucket: str, key: str, data: bytes) -> None:
    assert api.put(f"/buckets/{bucket}/objects/{key}", content=data).status_code == 200


def test_alias_file_is_private_and_ls_never_shows_the_secret(
    svc: Svc, cli_server: ServerProcess
) -> None:
    config = svc.home / ".config" / "svc" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    listed = svc("alias", "ls", "--json").json()
    assert {"alias": "local", "url": cli_server.url, "access_key": cli_server.access_key} in listed
    assert cli_server.secret_key not in svc("alias", "ls").stdout


def test_alias_set_reads_the_secret_from_stdin_and_rm_removes_it(
    svc: Svc, cli_server: ServerProcess
) -> None:
    svc("alias", "set", "other", cli_server.url, cli_server.access_key, input=cli_server.secret_key)
    assert svc("ls", "other").returncode == 0
    svc("alias", "rm", "other")
    assert "other" not in svc("alias", "ls").stdout
    gone = svc("alias", "rm", "other", ok=False)
    assert gone.returncode == 3 and "NoSuchAlias" in error_line(gone)


def test_svc_url_defines_the_env_alias(svc: Svc, cli_server: ServerProcess, bucket: str) -> None:
    run = svc("ls", "env", env={"SVC_URL": cli_server.connection_string})
    assert f"{bucket}/" in run.stdout
    without = svc("ls", "env/x", ok=False)
    assert without.returncode == 2 and "not a remote path" in error_line(without)


def test_mb_ls_rb_and_their_errors(svc: Svc, api: httpx.Client) -> None:
    made = svc("mb", "--json", "local/cli-made-bucket").json()
    assert made[0]["name"] == "cli-made-bucket"
    assert "cli-made-bucket/" in svc("ls", "local").stdout
    again = svc("mb", "local/cli-made-bucket", ok=False)
    assert again.returncode == 5
    assert error_line(again).startswith("svc: local/cli-made-bucket: BucketAlreadyExists")
    put(api, "cli-made-bucket", "x.txt", b"x")
    busy = svc("rb", "local/cli-made-bucket", ok=False)
    assert busy.returncode == 5 and "BucketNotEmpty" in error_line(busy)
    svc("rb", "--force", "local/cli-made-bucket")
    assert api.get("/buckets/cli-made-bucket").status_code == 404
    missing = svc("rb", "local/cli-made-bucket", ok=False)
    assert missing.returncode == 3 and "NoSuchBucket" in error_line(missing)


def test_ls_lists_one_level_recursively_versions_and_folders(
    svc: Svc, api: httpx.Client, bucket: str
) -> None:
    for key in ("a.txt", "dir/b.txt", "dir/sub/c.txt"):
        put(api, bucket, key, key.encode())
    top = svc("ls", f"local/{bucket}").stdout
    assert "a.txt" in top and "PRE" in top and "dir/" in top and "b.txt" not in top
    folder = svc("ls", f"local/{bucket}/dir").stdout  # no slash: still the folder's content
    assert "b.txt" in folder and "sub/" in folder and "a.txt" not in folder
    keys = [o["key"] for o in svc("ls", "-r", "--json", f"local/{bucket}").json()]
    assert keys == ["a.txt", "dir/b.txt", "dir/sub/c.txt"]
    api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True})
    put(api, bucket, "a.txt", b"second")
    versions = svc("ls", "--versions", "--json", f"local/{bucket}/a.txt").json()
    assert len(versions) == 2 and sum(v["is_latest"] for v in versions) == 1
    nothing = svc("ls", f"local/{bucket}/nope", ok=False)
    assert nothing.returncode == 3 and "NoSuchKey" in error_line(nothing)


def test_cat_pipe_and_stat_round_trip_bytes(svc: Svc, bucket: str) -> None:
    data = os.urandom(300_000) + "ünï".encode()
    svc("pipe", "--content-type", "application/x-test", f"local/{bucket}/blob.bin", input=data)
    assert svc.bytes_of("cat", f"local/{bucket}/blob.bin") == data
    info = svc("stat", "--json", f"local/{bucket}/blob.bin").json()[0]
    assert info["size_bytes"] == len(data)
    assert info["sha256_checksum"] == hashlib.sha256(data).hexdigest()
    assert info["content_type"] == "application/x-test"
    text = svc("stat", f"local/{bucket}/blob.bin").stdout
    assert "sha256_checksum:" in text and hashlib.sha256(data).hexdigest() in text
    assert svc("stat", "--json", f"local/{bucket}").json()[0]["name"] == bucket
    assert "version" in svc("stat", "--json", "local").json()[0]


def test_a_missing_object_is_one_line_naming_path_and_code(svc: Svc, bucket: str) -> None:
    for args in (("cat",), ("stat",), ("rm",)):
        run = svc(*args, f"local/{bucket}/photos/cat.jpg", ok=False)
        assert run.returncode == 3
        assert error_line(run).startswith(f"svc: local/{bucket}/photos/cat.jpg: NoSuchKey")
    as_json = svc("--json", "cat", f"local/{bucket}/nope", ok=False)
    document = as_json.json()[0]
    assert document["error"]["code"] == "NoSuchKey" and document["exit_code"] == 3


def test_find_and_du_filter_and_sum(svc: Svc, api: httpx.Client, bucket: str) -> None:
    put(api, bucket, "p/small.jpg", b"s" * 10)
    put(api, bucket, "p/large.jpg", b"l" * 5000)
    put(api, bucket, "p/notes.txt", b"n" * 6000)
    found = svc("find", f"local/{bucket}", "--name", "*.jpg", "--larger", "1k").stdout.split()
    assert found == [f"local/{bucket}/p/large.jpg"]
    assert svc("find", f"local/{bucket}", "--older-than", "1").stdout == ""
    assert len(svc("find", "--json", f"local/{bucket}/p/", "--newer-than", "1").json()) == 3
    usage = svc("du", "--json", f"local/{bucket}/p").json()[0]
    assert usage == {"path": f"local/{bucket}/p", "size_bytes": 11010, "object_count": 3}
    per_bucket = {d["path"]: d for d in svc("du", "--json", "local").json()}
    assert per_bucket[f"local/{bucket}"]["object_count"] == 3


def test_rm_recursive_versions_and_older_than(svc: Svc, api: httpx.Client, bucket: str) -> None:
    for key in ("keep.txt", "tmp/a", "tmp/b/c"):
        put(api, bucket, key, b"x")
    refused = svc("rm", f"local/{bucket}/tmp/", ok=False)
    assert refused.returncode == 2 and "use -r" in error_line(refused)
    assert svc("rm", "-r", "--older-than", "1", f"local/{bucket}/tmp/").stdout == ""
    removed = svc("rm", "-r", "--json", f"local/{bucket}/tmp/").json()
    assert sorted(d["target"] for d in removed) == [
        f"local/{bucket}/tmp/a",
        f"local/{bucket}/tmp/b/c",
    ]
    left = [o["key"] for o in api.get(f"/buckets/{bucket}/objects").json()["objects"]]
    assert left == ["keep.txt"]
    api.patch(f"/buckets/{bucket}", json={"versioning_enabled": True})
    put(api, bucket, "keep.txt", b"y")
    svc("rm", "--versions", f"local/{bucket}/keep.txt")
    assert api.get(f"/buckets/{bucket}/versions").json()["versions"] == []


def test_usage_errors_exit_2_with_one_line(svc: Svc) -> None:
    for args in (("bogus",), ("cp", "only-one"), ("ls", "--nope", "local")):
        run = svc(*args, ok=False)
        assert run.returncode == 2 and error_line(run)
    size = svc("find", "local/x", "--larger", "lots", ok=False)
    assert size.returncode == 2 and "not a size" in error_line(size)


def test_a_url_with_a_bad_port_is_one_usage_line(svc: Svc) -> None:
    bad_env = svc("ls", "env", env={"SVC_URL": "http://bk_a:sk_b@127.0.0.1:99999"}, ok=False)
    assert bad_env.returncode == 2
    assert error_line(bad_env) == "svc: SVC_URL: InvalidURL: Port out of range 0-65535"
    bad_alias = svc("alias", "set", "p", "http://127.0.0.1:port", "bk_a", "sk_b", ok=False)
    assert bad_alias.returncode == 2 and "InvalidURL" in error_line(bad_alias)
    assert "p" not in [d["alias"] for d in svc("alias", "ls", "--json").json()]


def test_a_path_without_a_key_where_one_is_needed_is_a_usage_error(svc: Svc, bucket: str) -> None:
    for args in (
        ("cat", f"local/{bucket}"),
        ("cat", f"local/{bucket}/dir/"),
        ("pipe", f"local/{bucket}"),
        ("share", "get", f"local/{bucket}/"),
        ("video", "thumbnail", f"local/{bucket}"),
        ("video", "package", f"local/{bucket}/"),
    ):
        run = svc(*args, ok=False)
        assert run.returncode == 2, args
        assert error_line(run).endswith("names no key: expected ALIAS/BUCKET/KEY"), args
        assert "Traceback" not in run.stderr and "ValueError" not in run.stderr


def test_an_argument_the_server_refuses_with_400_exits_2(svc: Svc) -> None:
    run = svc("mb", "local/Not_A_Bucket", ok=False)
    assert run.returncode == 2
    assert error_line(run).startswith("svc: local/Not_A_Bucket: InvalidBucketName: ")
    as_json = svc("--json", "mb", "local/Not_A_Bucket", ok=False).json()[0]
    assert as_json["error"]["code"] == "InvalidBucketName" and as_json["exit_code"] == 2


def test_watch_since_must_be_a_sequence_number(svc: Svc, bucket: str) -> None:
    run = svc("watch", "--since", "yesterday", f"local/{bucket}", ok=False)
    assert run.returncode == 2 and "--since" in error_line(run)


def test_an_unreachable_server_is_exit_6_without_traceback(
    svc: Svc, cli_server: ServerProcess
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    svc("alias", "set", "dead", dead, cli_server.access_key, cli_server.secret_key)
    run = svc("ls", "dead", ok=False)
    assert run.returncode == 6
    assert error_line(run).startswith("svc: dead: ConnectionFailed")


def test_wrong_credentials_exit_4(svc: Svc, cli_server: ServerProcess) -> None:
    svc("alias", "set", "wrong", cli_server.url, cli_server.access_key, "sk_wrong-secret-xx")
    run = svc("ls", "wrong", ok=False)
    assert run.returncode == 4 and "Unauthorized" in error_line(run)


def test_a_closed_pipe_exits_quietly(svc: Svc, bucket: str) -> None:
    svc("pipe", f"local/{bucket}/big", input=os.urandom(4 * 1024 * 1024))
    reader = svc.popen("cat", f"local/{bucket}/big", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    assert len(reader.stdout.read(10)) == 10
    reader.stdout.close()
    assert reader.wait(60) == 141
    assert reader.stderr.read() == b""


def test_help_has_examples_and_completion_is_offered(svc: Svc) -> None:
    assert "Examples:" in svc("--help").stdout
    for command in ("cp", "mirror", "ls", "share", "rm"):
        assert "Usage: svc " + command in svc(command, "--help").stdout
    completion = svc("--help", env={"_SVC_COMPLETE": "bash_source"}).stdout
    assert "complete" in completion and "_SVC_COMPLETE" in completion
    words = svc(env={"_SVC_COMPLETE": "bash_complete", "COMP_WORDS": "svc mi", "COMP_CWORD": "1"})
    assert "mirror" in words.stdout


def test_json_is_one_document_per_line(svc: Svc, api: httpx.Client, bucket: str) -> None:
    for index in range(3):
        put(api, bucket, f"k{index}", b"v")
    lines = svc("ls", "-r", f"local/{bucket}", "--json").stdout.splitlines()
    assert len(lines) == 3 and all(json.loads(line)["bucket"] == bucket for line in lines)


@pytest.mark.parametrize("flag", ["--version"])
def test_version(svc: Svc, flag: str) -> None:
    assert svc(flag).stdout.startswith("svc, version")

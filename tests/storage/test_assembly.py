"""Multipart assembly on a real disk (``service.storage.assembly``): the contiguous prefix
appended part by part, cut back on a replaced part, sealed with the manifest's tail."""

from __future__ import annotations

import hashlib
import os

import pytest

from fsseam.fs import RealFileSystem
from service.storage import PayloadStore


def stored(store: PayloadStore, body: bytes) -> str:
    payload_id = store.next_payload_id()
    store.store_small(body, payload_id)
    return payload_id


def read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


@pytest.fixture
def store(tmp_path: str) -> PayloadStore:
    return PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="strict")


def test_a_prefix_sealed_with_its_tail_is_the_whole_object(store: PayloadStore) -> None:
    bodies = [os.urandom(size) for size in (70_000, 1, 123_456, 5)]
    ids = [stored(store, body) for body in bodies]
    assembly = store.create_assembly("u1")
    assembly.append(1, ids[0])
    assembly.append(2, ids[1])
    assert [part.number for part in assembly.parts] == [1, 2]
    assert assembly.parts[1].end == len(bodies[0]) + 1
    sealed = assembly.seal(2, ids[2:])
    whole = b"".join(bodies)
    assert sealed.size == len(whole)
    assert sealed.sha256 == hashlib.sha256(whole).hexdigest()
    assert read(sealed.path) == whole


def test_a_replaced_part_cuts_the_assembly_back_to_the_boundary_before_it(
    store: PayloadStore,
) -> None:
    first, second, third = os.urandom(1000), os.urandom(2000), os.urandom(3000)
    ids = [stored(store, body) for body in (first, second, third)]
    assembly = store.create_assembly("u2")
    for number, payload_id in enumerate(ids, start=1):
        assembly.append(number, payload_id)
    replacement = os.urandom(500)
    assembly.keep(1)
    assembly.append(2, stored(store, replacement))
    sealed = assembly.seal(2, [ids[2]])
    whole = first + replacement + third
    assert read(sealed.path) == whole
    assert sealed.sha256 == hashlib.sha256(whole).hexdigest()


def test_keeping_nothing_starts_over_and_parts_must_follow_in_order(store: PayloadStore) -> None:
    one, two = stored(store, b"one"), stored(store, b"two")
    assembly = store.create_assembly("u3")
    assembly.append(1, one)
    with pytest.raises(ValueError):
        assembly.append(3, two)
    assembly.keep(0)
    assert assembly.parts == ()
    sealed = assembly.seal(0, [two, one])
    assert read(sealed.path) == b"twoone"
    assert sealed.sha256 == hashlib.sha256(b"twoone").hexdigest()


def test_a_missing_tail_part_removes_the_assembly(store: PayloadStore) -> None:
    assembly = store.create_assembly("u4")
    assembly.append(1, stored(store, b"x"))
    with pytest.raises(FileNotFoundError):
        assembly.seal(1, [store.new_payload_id()])
    assert os.listdir(store.layout.assembly_dir) == []


def test_a_new_store_removes_assemblies_of_runs_that_are_gone(tmp_path: str) -> None:
    first = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    first.create_assembly("u5").append(1, stored(first, b"x"))
    dead = os.path.join(first.layout.assembly_dir, "999999999-abcd.u6.part")
    open(dead, "wb").close()
    assert len(os.listdir(first.layout.assembly_dir)) == 2
    second = PayloadStore(str(tmp_path), fs=RealFileSystem(), durability="balanced")
    assert os.listdir(second.layout.assembly_dir) == []

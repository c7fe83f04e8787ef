"""Key and version listings: order, delimiters, paging, and jumping over common prefixes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from sortedcontainers import SortedList

from service.meta import MetaState, ObjectPage
from service.meta.listing import list_objects, successor
from tests.meta.factory import Factory, applied


def filled(keys: list[str], *, versioning: bool = False) -> tuple[Factory, MetaState]:
    f, state = Factory(), MetaState()
    applied(state, f.bucket(versioning=versioning))
    for key in keys:
        applied(state, f.put(key))
    return f, state


def page_items(page: ObjectPage) -> list[str]:
    return sorted([v.key for v in page.objects] + list(page.common_prefixes))


def all_pages(state: MetaState, limit: int, **query: Any) -> list[ObjectPage]:
    pages = [state.list_objects("b", limit=limit, **query)]
    while pages[-1].truncated:
        pages.append(state.list_objects("b", limit=limit, start_after=pages[-1].last_item, **query))
    return pages


def test_successor_is_the_least_string_past_a_prefix() -> None:
    assert successor("photos/") == "photos0"
    assert successor("a" + chr(sys.maxunicode)) == "b"
    assert successor(chr(sys.maxunicode)) is None
    assert successor("") is None


def test_keys_are_listed_in_code_point_order() -> None:
    keys = ["b", "a/x", "\u00e9", "A", "a", "ab", "\U0001f600"]
    _, state = filled(keys)
    page = state.list_objects("b")
    assert [v.key for v in page.objects] == sorted(keys)
    assert page.common_prefixes == () and not page.truncated and page.last_item == max(keys)


def test_prefix_restricts_the_listing() -> None:
    _, state = filled(["a/1", "a/2", "ab", "b/1"])
    assert [v.key for v in state.list_objects("b", prefix="a/").objects] == ["a/1", "a/2"]
    assert state.list_objects("b", prefix="zz").objects == ()


def test_delimiter_rolls_keys_up_into_common_prefixes() -> None:
    _, state = filled(["a/1", "a/2", "a/b/3", "top", "z/9", "a"])
    page = state.list_objects("b", delimiter="/")
    assert [v.key for v in page.objects] == ["a", "top"]
    assert page.common_prefixes == ("a/", "z/")
    nested = state.list_objects("b", prefix="a/", delimiter="/")
    assert [v.key for v in nested.objects] == ["a/1", "a/2"]
    assert nested.common_prefixes == ("a/b/",)


def test_multi_character_delimiters_are_matched_after_the_prefix() -> None:
    _, state = filled(["x--y--z", "x-y", "x--w"])
    page = state.list_objects("b", prefix="x--", delimiter="--")
    assert [v.key for v in page.objects] == ["x--w"]
    assert page.common_prefixes == ("x--y--",)


def test_objects_and_prefixes_together_fill_the_limit_and_pages_resume_exactly() -> None:
    keys = ["a", "b/1", "b/2", "c", "d/1", "e", "f/x/y", "g"]
    _, state = filled(keys)
    pages = all_pages(state, 2, delimiter="/")
    assert [page_items(p) for p in pages] == [["a", "b/"], ["c", "d/"], ["e", "f/"], ["g"]]
    assert [p.truncated for p in pages] == [True, True, True, False]


def test_a_page_that_ends_exactly_at_the_last_item_is_not_truncated() -> None:
    _, state = filled(["a", "b"])
    page = state.list_objects("b", limit=2)
    assert (page.truncated, page.last_item) == (False, "b")


def test_resuming_after_a_common_prefix_jumps_past_its_keys_with_one_bisect() -> None:
    keys = [f"big/{i:05d}" for i in range(2000)] + ["small"]
    seen: list[str] = []

    class Watched(SortedList):  # type: ignore[misc]
        def irange(self, *args: Any, **kwargs: Any) -> Iterator[str]:
            for key in super().irange(*args, **kwargs):
                seen.append(key)
                yield key

    visible = Watched(keys)
    versions: dict[str, Any] = {key: (f"latest of {key}",) for key in keys}
    first = list_objects(visible, versions, "", "/", 1, None)
    assert first.common_prefixes == ("big/",) and first.truncated
    second = list_objects(visible, versions, "", "/", 1, first.last_item)
    assert second.objects == ("latest of small",)
    assert len(seen) <= 4


def test_keys_whose_latest_version_is_a_delete_marker_are_not_listed() -> None:
    f, state = filled(["a", "b", "c/1", "d/1", "d/2"], versioning=True)
    for key in ("b", "c/1", "d/1"):
        applied(state, f.delete(key))
    assert [v.key for v in state.list_objects("b").objects] == ["a", "d/2"]
    page = state.list_objects("b", delimiter="/")
    assert ([v.key for v in page.objects], page.common_prefixes) == (["a"], ("d/",))


def test_listing_a_missing_bucket_is_empty_and_a_zero_limit_is_refused() -> None:
    _, state = filled(["a"])
    assert state.list_objects("ghost") == ObjectPage((), (), None, False)
    with pytest.raises(ValueError):
        state.list_objects("b", limit=0)


def test_versions_are_listed_newest_first_per_key_with_latest_and_markers() -> None:
    f, state = filled(["a", "a", "b"], versioning=True)
    applied(state, f.delete("b"))
    page = state.list_versions("b")
    listed = [(e.version.key, e.is_latest, e.is_delete_marker) for e in page.versions]
    assert listed == [
        ("a", True, False),
        ("a", False, False),
        ("b", True, True),
        ("b", False, False),
    ]
    a_versions = state.object_versions("b", "a")
    assert [e.version for e in page.versions[:2]] == [a_versions[1], a_versions[0]]


def test_version_pages_resume_exactly_and_ignore_newer_versions_of_the_marker_key() -> None:
    f, state = filled(["a", "a", "a", "b", "c/1"], versioning=True)
    first = state.list_versions("b", limit=2)
    assert first.truncated and first.last_item == ("a", 1)
    applied(state, f.put("a"))
    second = state.list_versions("b", limit=2, start_after=first.last_item)
    assert [(e.version.key, e.is_latest) for e in second.versions] == [("a", False), ("b", True)]
    third = state.list_versions("b", limit=2, start_after=second.last_item)
    assert [e.version.key for e in third.versions] == ["c/1"] and not third.truncated
    assert [e.version.key for e in state.list_versions("b", prefix="c/").versions] == ["c/1"]

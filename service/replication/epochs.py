"""Epochs on the wire and at a standby: whose history a standby may follow.

A primary names its epoch and its history (``service.meta.epoch_state``: which epoch began
at which sequence, on which server) in every records answer (``epoch_headers``), errors
included. Before it appends anything, a standby compares them with its own history and its
last record (``refusal``), as a Postgres standby compares timeline histories:

- a primary of an older epoch than the standby's own is refused: a standby never follows an
  older epoch (a former primary, or a standby of one, left behind by a promotion);
- an epoch both know but that began at another sequence, or on another server, is another
  history (two standbys promoted apart): refused;
- a primary whose history holds an epoch newer than the standby's, which began at sequence
  S, can be followed only by a standby whose last record is before S. A former primary that
  committed records at or past S after the promotion (records the new primary never had)
  has diverged: refused, with one line naming its last record, S and both epochs. It never
  applies anything over them; ``SERVICE_FOLLOW_RESEED`` discards them and copies afresh
  (``service.replication.reseed``).

Also here: the data dir's own identity (``server-id``, made once), which each epoch record
names, and ``begin_epoch``, which commits a primary's epoch record when it starts to serve.

Thread-safety: ``data_dir_id`` is blocking (the executor); ``begin_epoch`` runs on the
event loop; the rest is pure.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping, Sequence

from fsseam.durable import read_file, replace_file
from fsseam.fs import FileSystem
from service.common.api_errors import ServiceError
from service.common.timefmt import now_ms
from service.engine.core import Engine
from service.engine.journaled import JournalCommitter
from service.meta import records
from service.meta.epoch_state import EpochStart
from service.replication.bootstrap import STANDBY_DIR

log = logging.getLogger("service.replication")

HEADER_EPOCH = "X-Primary-Epoch"
HEADER_HISTORY = "X-Epoch-History"
SERVER_ID_FILENAME = "server-id"
_NO_ID = "-"


def data_dir_id(fs: FileSystem, data_dir: str) -> str:
    """This data dir's identity, made (durably) the first time it is asked for. Blocking."""
    path = os.path.join(data_dir, SERVER_ID_FILENAME)
    found = read_file(fs, path)
    if found:
        return found.decode().strip()
    made = "srv_" + secrets.token_hex(8)
    replace_file(fs, path, made.encode())
    return made


def format_history(history: Sequence[EpochStart]) -> str:
    """``epoch:sequence:server`` for each epoch, oldest first.

    >>> format_history([EpochStart(1, 1, None, 0), EpochStart(2, 57, "srv_b", 9)])
    '1:1:-,2:57:srv_b'
    """
    return ",".join(f"{e.epoch}:{e.sequence}:{e.server_id or _NO_ID}" for e in history)


def parse_history(text: str) -> list[EpochStart]:
    """``format_history`` read back (``at`` is not carried); ValueError if malformed.

    >>> [(e.epoch, e.sequence, e.server_id) for e in parse_history("1:1:-,2:57:srv_b")]
    [(1, 1, None), (2, 57, 'srv_b')]
    """
    out = []
    for item in text.split(","):
        epoch, sequence, server = item.split(":")
        out.append(EpochStart(int(epoch), int(sequence), None if server == _NO_ID else server, 0))
    if not out:
        raise ValueError("an empty epoch history")
    return out


def epoch_headers(history: Sequence[EpochStart]) -> dict[str, str]:
    """What a records answer says of the primary's epochs."""
    return {HEADER_EPOCH: str(history[-1].epoch), HEADER_HISTORY: format_history(history)}


def _same(mine: EpochStart, theirs: EpochStart) -> bool:
    known = mine.server_id is not None and theirs.server_id is not None
    return mine.sequence == theirs.sequence and (not known or mine.server_id == theirs.server_id)


def refusal(
    own: Sequence[EpochStart], own_last: int, primary: Sequence[EpochStart], url: str
) -> str | None:
    """Why this standby (history ``own``, last record ``own_last``) must not follow the
    primary at ``url`` whose history is ``primary``; None when it may (module docstring).

    >>> one, two = EpochStart(1, 1, "a", 0), EpochStart(2, 11, "b", 0)
    >>> refusal([one], 10, [one, two], "P") is None
    True
    >>> print(refusal([one], 12, [one, two], "P")[:77])
    diverged from P: this server's last record is 12 (epoch 1), but epoch 2 began
    >>> print(refusal([one, two], 12, [one], "P")[:61])
    P is a primary of epoch 1, older than this server's epoch 2:
    """
    mine, theirs = own[-1].epoch, primary[-1].epoch
    if theirs < mine:
        return (
            f"{url} is a primary of epoch {theirs}, older than this server's epoch {mine}: "
            "a standby never follows an older epoch"
        )
    by_epoch = {entry.epoch: entry for entry in primary}
    for entry in own:
        other = by_epoch.get(entry.epoch)
        if other is None or not _same(entry, other):
            where = "is not in" if other is None else f"began at record {other.sequence} in"
            return (
                f"diverged from {url}: this server's epoch {entry.epoch} (from record "
                f"{entry.sequence}) {where} that primary's history: another history "
                "(start once with SERVICE_FOLLOW_RESEED=1 to copy afresh)"
            )
    newer = [entry for entry in primary if entry.epoch > mine]
    if newer and own_last >= newer[0].sequence:
        begun = newer[0]
        return (
            f"diverged from {url}: this server's last record is {own_last} (epoch {mine}), "
            f"but epoch {begun.epoch} began at record {begun.sequence} there: records "
            f"{begun.sequence}..{own_last} here were never on that primary (start once with "
            "SERVICE_FOLLOW_RESEED=1 to discard them and copy afresh)"
        )
    return None


def answer_refusal(
    own: Sequence[EpochStart], own_last: int, headers: Mapping[str, str], url: str
) -> str | None:
    """``refusal`` for a records answer's headers (a primary that names no history, older
    than epochs, is not checked)."""
    text = headers.get(HEADER_HISTORY)
    if not text:
        return None
    try:
        primary = parse_history(text)
    except ValueError:
        return f"{url} sent a malformed {HEADER_HISTORY}: {text[:80]!r}"
    return refusal(own, own_last, primary, url)


def next_epoch(history: Sequence[EpochStart], recorded: bool, mine: str, was_standby: bool) -> int:
    """The epoch a journal owner starting to serve as a primary on the data dir ``mine``
    must begin (0: none). The current epoch is its own when this data dir began it; any
    other server's epoch (a standby promoted, or restarted without ``SERVICE_FOLLOW``, or a
    restored copy) is followed by a new one. A history that recorded none reads as epoch 1:
    a former primary's (no standby ever) begins it; a former standby's begins epoch 2.

    >>> one = EpochStart(1, 1, "a", 0)
    >>> next_epoch([one], True, "a", False), next_epoch([one], True, "b", True)
    (0, 2)
    >>> next_epoch([EpochStart(1, 1, None, 0)], False, "a", False)
    1
    """
    if not recorded:
        return 2 if was_standby else 1
    last = history[-1]
    return 0 if last.server_id == mine else last.epoch + 1


async def begin_epoch(
    engine: Engine, committer: JournalCommitter, *, promotion: bool = False
) -> int:
    """Commit the epoch record ``next_epoch`` asks for (a ``promotion`` always begins the
    epoch after the current one), at the next sequence; the epoch begun (0: none). Raises
    ``ServiceError`` when it cannot commit."""
    fs, data_dir = engine.fs, engine.config.data_dir
    mine = await engine.run_blocking(data_dir_id, fs, data_dir)
    was_standby = await engine.run_blocking(fs.exists, os.path.join(data_dir, STANDBY_DIR))
    state = engine.state
    history = state.epoch_history()
    epoch = next_epoch(history, state.epochs_recorded(), mine, was_standby)
    if promotion:
        epoch = history[-1].epoch + 1
    if epoch == 0:
        return 0
    sequence = committer.last_sequence() + 1
    event = records.epoch_started(epoch=epoch, sequence=sequence, server_id=mine, at=now_ms())
    # Past a standby's refusal: a promotion's epoch record is the first it writes itself.
    outcome = await committer.append(event)
    if not outcome.ok or committer.last_sequence() != sequence:
        raise ServiceError("InternalError", f"epoch {epoch} did not begin at record {sequence}")
    log.info("epoch %d began at record %d on %s", epoch, sequence, mine)
    return epoch

"""ReadEntriesOfLedgers: many ledgers' ranges from one bookie in one call (bookie/server/multi_range_read.py),
against a real bookie process over gRPC."""
from __future__ import annotations

import concurrent.futures as cf

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import entry_format, status
from bookie.proto.range_columns import RangeColumns


def _range(ledger: LedgerId, first: int, last: int, stride: int = 0, offset: int = 0) -> pb.ReadRangeRequest:
    return pb.ReadRangeRequest(ledgerScopeId=ledger.scope_id, ledgerId=ledger.ledger_id, firstEntryId=first,
                               lastEntryId=last, stride=stride, offset=offset)


FORMS = ["messages", "columns"]  # the request's ranges as ReadRangeRequest messages, or as its packed columns


def _ask(client, ranges: list[pb.ReadRangeRequest], form: str, **kwargs) -> list:
    if form == "columns":
        ranges = RangeColumns.of(*zip(*[(r.ledgerScopeId, r.ledgerId, r.firstEntryId, r.lastEntryId, r.stride, r.offset)
                                        for r in ranges])) if ranges else RangeColumns.of((), (), (), ())
    return list(client.read_entries_of_ledgers(ranges, **kwargs))


def _ids(messages) -> list[tuple[int, int]]:
    return [entry_format.peek_ids(entry, 0)[1:3] for m in messages for entry in entry_format.iter_frames(m.entries)]


@pytest.fixture(scope="module")
def ledgers(shared_cluster):
    """Five closed ledgers of 1..5 entries of 1 KiB on one bookie (E=WQ=AQ=1), and its gRPC client."""
    from bookie.client import BookKeeper
    with BookKeeper(shared_cluster.metadata_service_uri) as bk:
        bookie = sorted(bk.writable_bookies())[0]
        made = []
        for n in range(1, 6):
            handle = bk.create_ledger(1, 1, 1, password=b"", bookies=[bookie])
            handle.append_batch([bytes([n]) * 1024] * n).result(30)
            handle.close()
            made.append(handle.ledger)
        yield bk.bookie_client(bookie), made


@pytest.mark.parametrize("form", FORMS)
def test_every_range_comes_in_request_order(ledgers, form):
    client, made = ledgers
    messages = _ask(client, [_range(lid, 0, 10) for lid in reversed(made)], form)
    assert all(m.status == status.EOK for m in messages)
    assert messages[-1].rangesCovered == len(made)
    assert _ids(messages) == [(lid.ledger_id, e) for lid in reversed(made) for e in range(lid_n(lid, made))]


def lid_n(ledger: LedgerId, made: list[LedgerId]) -> int:
    return made.index(ledger) + 1


@pytest.mark.parametrize("form", FORMS)
def test_small_messages_split_ranges_and_count_what_they_complete(ledgers, form):
    client, made = ledgers
    messages = _ask(client, [_range(lid, 0, 10) for lid in made], form, max_bytes=2000)
    assert len(messages) > len(made)  # ~1 KiB entries, 2,000 bytes a message: a range runs over several
    covered = [m.rangesCovered for m in messages]
    assert covered == sorted(covered) and covered[-1] == len(made)
    assert _ids(messages) == [(lid.ledger_id, e) for lid in made for e in range(lid_n(lid, made))]


@pytest.mark.parametrize("form", FORMS)
def test_a_striped_range_and_a_ledger_the_bookie_lacks_send_only_what_is_there(ledgers, form):
    client, made = ledgers
    unknown = LedgerId(0, 10 ** 9)
    messages = _ask(client, [_range(made[4], 0, 4, stride=2, offset=1), _range(unknown, 0, 3), _range(made[0], 0, 0)],
                    form)
    assert messages[-1].rangesCovered == 3
    assert _ids(messages) == [(made[4].ledger_id, 1), (made[4].ledger_id, 3), (made[0].ledger_id, 0)]


@pytest.mark.parametrize("bad,named", [
    (_range(LedgerId(0, 1), 5, 4), "range 1: bad range 5..4"),
    (_range(LedgerId(0, 1), 0, 4, stride=2, offset=2), "range 1: bad stride 2 / offset 2"),
    (pb.ReadRangeRequest(ledgerScopeId=0, ledgerId=-3, firstEntryId=0, lastEntryId=1), "range 1: ledger id 0/-3"),
])
@pytest.mark.parametrize("form", FORMS)
def test_a_bad_range_is_refused_naming_it(ledgers, bad, named, form):
    client, made = ledgers
    messages = _ask(client, [_range(made[0], 0, 0), bad], form)
    assert len(messages) == 1 and messages[0].status == status.EBADREQ and named in messages[0].message
    assert not messages[0].entries


@pytest.mark.parametrize("form", FORMS)
def test_no_ranges_is_one_empty_answer(ledgers, form):
    client, _ = ledgers
    messages = _ask(client, [], form)
    assert len(messages) == 1 and messages[0].status == status.EOK and messages[0].rangesCovered == 0


@pytest.mark.parametrize("request_fields,named", [
    ({"ledgerIds": [1, 2], "firstEntryIds": [0], "lastEntryIds": [0, 0]}, "column firstEntryIds has 1 values, ledgerIds 2"),
    ({"ledgerIds": [1], "firstEntryIds": [0], "lastEntryIds": [0], "strides": [3, 3]}, "column strides has 2 values"),
    ({"ranges": [pb.ReadRangeRequest(ledgerId=1)], "ledgerIds": [1], "firstEntryIds": [0], "lastEntryIds": [0]},
     "as messages or as columns, not both"),
])
def test_columns_that_do_not_fit_are_refused_saying_how_they_fit(ledgers, request_fields, named):
    client, _ = ledgers
    messages = list(client.stub.ReadEntriesOfLedgers(pb.ReadRangesRequest(**request_fields), metadata=client.metadata))
    assert len(messages) == 1 and messages[0].status == status.EBADREQ and named in messages[0].message


def test_entry_probes_many_to_a_call(shared_cluster, ledgers):
    """bookie/client/entry_probes.py: held entries yes, absent ones no (yes when only an answer is asked),
    an unreachable bookie no; queued probes go out on flush."""
    from bookie.client import BookKeeper
    from bookie.client.entry_probes import EntryProbes
    client, made = ledgers
    with BookKeeper(shared_cluster.metadata_service_uri) as bk:
        probes = EntryProbes(bk)
        bookie = client.bookie_id

        def probe(*args, answered: bool = False) -> cf.Future:
            future: cf.Future = cf.Future()
            probes.probe(*args, future.set_result, answered)
            return future
        asked = {(lid, e): probe(bookie, lid, e) for lid in made for e in range(6)}
        answer_only = probe(bookie, made[0], 3, answered=True)
        nowhere = probe("127.0.0.1:1", made[0], 0)
        assert not any(f.done() for f in asked.values())  # queued, not sent: fewer than PROBE_BATCH
        probes.close()
        assert {key: f.result(30) for key, f in asked.items()} == {(lid, e): e <= made.index(lid)
                                                                  for lid in made for e in range(6)}
        assert answer_only.result(30) is True
        assert nowhere.result(30) is False

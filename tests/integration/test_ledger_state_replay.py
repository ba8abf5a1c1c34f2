"""Per-ledger state (master key, fence, LAC, explicit LAC) survives a SIGKILL, with and without a checkpoint."""
from __future__ import annotations

import pytest

from bookie.exceptions import LedgerFencedException, NoEntryException, UnauthorizedAccessException
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from tests.helpers.engine_ops import PASSWORD, engine_settings, payload, run_then_sigkill

KEY = generate_master_key(PASSWORD)
OTHER_KEY = generate_master_key(b"not the password")
L1, L2 = LedgerId(0, 1), LedgerId(3, 99)


@pytest.mark.parametrize("checkpointed", [False, True], ids=["journal-replay", "after-checkpoint"])
def test_key_fence_and_lacs_survive_sigkill(tmp_path, make_bookie, checkpointed):
    settings = engine_settings(tmp_path)
    ops = [["add", 0, 1, 10], ["lac", 0, 1, 8], ["fence", 0, 1, 0], ["add", 3, 99, 5]]
    if checkpointed:
        ops.append(["checkpoint", 0, 0, 0])
    run_then_sigkill(settings, ops)

    bookie = make_bookie()
    replayed = sum(r.records for r in bookie.replayed)
    assert (replayed == 0) if checkpointed else (replayed > 0)
    assert bookie.is_fenced(L1) and not bookie.is_fenced(L2)
    assert bookie.last_add_confirmed(L1) == 8  # piggybacked on entry 9
    assert DigestManager(L1, PASSWORD).verify_lac(bookie.explicit_lac(L1)) == 8
    with pytest.raises(NoEntryException):
        bookie.explicit_lac(L2)
    d2 = DigestManager(L2, PASSWORD)
    assert d2.verify(bookie.read_entry(L2, -1), 4)[1].tobytes() == payload(4)

    fresh = d2.build_framed(5, 4, 0, [b"x"])[0]
    with pytest.raises(UnauthorizedAccessException) as err:
        bookie.add_entries(L2, OTHER_KEY, fresh)
    assert err.value.status == status.EUA
    with pytest.raises(LedgerFencedException) as err:
        bookie.add_entries(L1, KEY, DigestManager(L1, PASSWORD).build_framed(10, 9, 0, [b"late"])[0])
    assert err.value.status == status.EFENCED
    # A recovery add bypasses the fence (recovery re-replicates the tail of a fenced ledger).
    assert bookie.add_entries(L1, KEY, DigestManager(L1, PASSWORD).build_framed(10, 9, 0, [b"rec"])[0],
                              recovery=True).result(10) == [10]

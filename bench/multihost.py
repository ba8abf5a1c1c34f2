"""Across hosts vs one host, in the same run: append throughput and latency, and a writer's stall when one
of its bookies is cut off (issue 30).

Hosts are network namespaces on a bridge (bookie/testing/netns.py): a ZooKeeper, four bookies (three in
each ledger's ensemble, one to replace a cut one) and a client, each on a host of its own. The baseline is
the same client against a local cluster (LocalBookKeeper: four bookies on loopback). Prints:
- pipelined ``append_async`` of 1 KiB entries, E=3 WQ=3 AQ=2, 2,000 in flight: entries/s, p50 and p99 (ms),
  across hosts and on one host;
- the stall: one append at a time to E=WQ=AQ=3, one ensemble bookie's link cut (silently, in the bridge): the
  time until the writer's ensemble changed and its longest wait for an acknowledgement, against
  ``addEntryTimeout`` (the bound BookKeeper gives it).
Skipped, with the reason, where network namespaces cannot be made (not root, no nft).

    python bench/multihost.py [--seconds 5] [--add-timeout 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bookie.testing import netns
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.multihost_cluster import MultiHostBookKeeper
from results import Figure, record, record_skipped

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multihost_client.py")


def answer(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"bench client exited {proc.returncode}: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def on_one_host(seconds: float) -> dict:
    with LocalBookKeeper(4) as cluster:
        proc = subprocess.Popen([sys.executable, CLIENT, cluster.metadata_service_uri, "throughput", str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return answer(proc)


def across_hosts(seconds: float, add_timeout: float) -> tuple[dict, dict]:
    with netns.Network() as net, tempfile.TemporaryDirectory(prefix="bench-multihost-") as base:
        cluster = MultiHostBookKeeper(net, 4, base).start()
        try:
            client = net.add_host("client")
            run = client.python(CLIENT, cluster.metadata_service_uri, "throughput", str(seconds),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            throughput = answer(run)
            stall = client.python(CLIENT, cluster.metadata_service_uri, "stall", str(add_timeout),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            ready = stall.stdout.readline()
            if not ready.startswith("READY "):
                raise RuntimeError(f"bench client did not start: {ready!r} {stall.stderr.read()[-2000:]}")
            victim = next(b for b in cluster.bookies if b.bookie_id == ready.split()[1].split(",")[0])
            net.cut(client, victim.host)
            stall.stdin.write("cut\n")
            stall.stdin.flush()
            return throughput, answer(stall)
        finally:
            cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--add-timeout", type=float, default=2.0, help="the stall run's addEntryTimeout (s)")
    args = parser.parse_args()
    reason = netns.available()
    if reason is not None:
        print(f"multihost: skipped: {reason}")
        record_skipped("multihost", reason)
        return 0
    local = on_one_host(args.seconds)
    hosts, stall = across_hosts(args.seconds, args.add_timeout)
    print(f"multihost: append_async 1 KiB E3 WQ3 AQ2 across hosts {hosts['rate']:,.0f} entries/s "
          f"(p50 {hosts['p50']:.2f} ms, p99 {hosts['p99']:.2f} ms) vs one host {local['rate']:,.0f} entries/s "
          f"(p50 {local['p50']:.2f} ms, p99 {local['p99']:.2f} ms): {hosts['rate'] / local['rate']:.2f}")
    print(f"multihost: one ensemble bookie cut off: ensemble changed after {stall['change_s']:.2f} s, longest wait "
          f"for an acknowledgement {stall['gap_s']:.2f} s, vs addEntryTimeout {args.add_timeout:.1f} s")
    figures = [Figure(name, hosts[key], unit, baseline="one host (loopback)", baseline_value=local[key])
               for key, name, unit in (("rate", "appends across hosts", "entries/s"),
                                       ("p50", "append p50 across hosts", "ms"),
                                       ("p99", "append p99 across hosts", "ms"))]
    figures += [Figure(name, stall[key], "s", baseline="addEntryTimeout", baseline_value=args.add_timeout)
                for key, name in (("change_s", "ensemble change after a cut"),
                                  ("gap_s", "longest wait for an ack after a cut"))]
    record("multihost", figures, notes=[
        f"append_async 1 KiB, E=3 WQ=3 AQ=2, 2,000 in flight, {args.seconds:g} s; hosts are network namespaces on a "
        "bridge, one host is 4 bookies on loopback",
        "stall: one append at a time, E=WQ=AQ=3, one ensemble bookie's link cut silently in the bridge"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

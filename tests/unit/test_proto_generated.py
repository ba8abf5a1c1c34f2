"""The checked-in protobuf/gRPC code matches bookie/proto/*.proto (run `make proto` after editing them)."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.procs import ROOT


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("proto,grpc", [("bookkeeper", True), ("data_formats", False), ("bookkeeper_protocol", False)])
def test_generated_code_is_fresh(tmp_path, proto, grpc):
    args = [sys.executable, "-m", "grpc_tools.protoc", "-I", ROOT, f"--python_out={tmp_path}"]
    if grpc:
        args.append(f"--grpc_python_out={tmp_path}")
    subprocess.run([*args, os.path.join(ROOT, "bookie", "proto", f"{proto}.proto")], check=True)
    fresh = os.path.join(tmp_path, "bookie", "proto")
    checked_in = os.path.join(ROOT, "bookie", "proto")
    # The descriptor is everything the .proto says; compare it, not version banners.
    current = _load(os.path.join(checked_in, f"{proto}_pb2.py"), f"current_{proto}")
    new_pb = open(os.path.join(fresh, f"{proto}_pb2.py")).read()
    serialized = re.search(r"AddSerializedFile\((b'.*?')\)\n", new_pb, re.S).group(1)
    assert eval(serialized) == current.DESCRIPTOR.serialized_pb, f"bookie/proto/{proto}_pb2.py is stale: run make proto"
    if grpc:
        def strip(text: str) -> str:
            return re.sub(r"GRPC_GENERATED_VERSION = '[^']*'", "", text)
        with open(os.path.join(fresh, f"{proto}_pb2_grpc.py")) as f, open(os.path.join(checked_in, f"{proto}_pb2_grpc.py")) as g:
            assert strip(f.read()) == strip(g.read()), f"bookie/proto/{proto}_pb2_grpc.py is stale: run make proto"

"""Running the notebooks in notebooks/ as a person would (nbclient + ipykernel, the kernel with its own
SparkSession) against a cluster given by its metadata service URI, and reading what they showed."""
from __future__ import annotations

import os
import pathlib

import nbformat
from nbclient import NotebookClient

from spark_bookkeeper.notebook import AUDIT_VARIABLE, URI_VARIABLE

NOTEBOOKS = pathlib.Path(__file__).parents[2] / "notebooks"
CELL_TIMEOUT = 900  # seconds per cell: the kernel starts a JVM and runs audits on two shared cores
KERNEL_STARTUP_TIMEOUT = 600  # nbclient's default (60 s) is too short for a kernel starting on a loaded machine


def execute(name: str, uri: str, cwd: pathlib.Path) -> nbformat.NotebookNode:
    """Run every cell of notebooks/<name> in a fresh kernel pointed at ``uri``, its temporary files under
    ``cwd``/tmp; the executed copy (the file is left as it is). A cell that raises fails the test with
    nbclient's CellExecutionError."""
    path = NOTEBOOKS / name
    before = path.read_bytes()
    notebook = nbformat.read(path, as_version=4)
    env = {k: v for k, v in os.environ.items() if k != AUDIT_VARIABLE}
    env[URI_VARIABLE] = uri
    env["TMPDIR"] = str(kernel_tmp(cwd))
    NotebookClient(notebook, timeout=CELL_TIMEOUT, startup_timeout=KERNEL_STARTUP_TIMEOUT, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute(env=env)
    assert path.read_bytes() == before, f"executing {name} changed the committed file"
    return notebook


def kernel_tmp(cwd: pathlib.Path) -> pathlib.Path:
    """Where ``execute``'s kernel makes its temporary files."""
    tmp = cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    return tmp


def images(notebook: nbformat.NotebookNode) -> int:
    """How many plots the executed ``notebook`` drew."""
    return sum(1 for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
               if out.output_type == "display_data" and "image/png" in out.get("data", {}))


def text(notebook: nbformat.NotebookNode, stream: str = "stdout") -> str:
    """Everything the executed ``notebook``'s cells printed (``stream="stderr"``: what they warned)."""
    return "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
                   if out.output_type == "stream" and out.get("name") == stream)

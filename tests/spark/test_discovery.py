"""``format("bookkeeper")`` is found by Spark however the package is installed, without ``register()``.

A user's script runs from a directory that holds nothing of the project, with no ``PYTHONPATH``, in a
Python of its own (a SparkSession of its own, workers on that Python): once with this virtualenv's
editable install (as ``make`` installs it), once with a plain ``pip install`` of the built wheel into a
fresh virtualenv. Spark finds the source by scanning top-level ``pyspark_*`` modules
(``pkgutil.iter_modules``), which an editable install's import hook would hide.
"""
from __future__ import annotations

import json
import os
import pathlib
import site
import subprocess
import sys
import uuid

from tests.procs import ROOT, kill

SCRIPT = '''
import json, os, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("user-script").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1").getOrCreate())
uri, log = sys.argv[1], sys.argv[2]
spark.createDataFrame([(b"a",), (b"b",), (b"c",)], "payload binary").write.format("bookkeeper") \\
    .mode("append").option("metadataServiceUri", uri).option("log", log).save()
rows = spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", log).load().collect()
import spark_bookkeeper
print(json.dumps({"payloads": sorted(bytes(r.payload).decode() for r in rows),
                  "package": os.path.dirname(spark_bookkeeper.__file__)}))
spark.stop()
'''


def run_user_script(python: str, workdir: pathlib.Path, uri: str) -> dict:
    """Run SCRIPT with ``python`` from ``workdir``, as a user would: no PYTHONPATH, workers on that Python."""
    script = workdir / "user_job.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = python
    proc = subprocess.Popen([python, str(script), uri, f"found-{uuid.uuid4().hex[:6]}"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        kill(proc)
    assert proc.returncode == 0, f"the user's script failed (exit {proc.returncode}):\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def test_an_editable_install_is_found_from_an_unrelated_directory(shared_cluster, tmp_path):
    found = run_user_script(sys.executable, tmp_path, shared_cluster.metadata_service_uri)
    assert found["payloads"] == ["a", "b", "c"]
    assert found["package"] == os.path.join(ROOT, "spark_bookkeeper")  # this checkout, as make installed it


def test_a_plain_pip_install_is_found_without_register(shared_cluster, tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), ROOT], check=True,
                   timeout=600, capture_output=True)
    (wheel,) = wheels.glob("spark_bookkeeper-*.whl")
    # A fresh virtualenv that sees this one's dependencies (pyspark, pyarrow, ...) through a path entry, which
    # Python does not scan for .pth files: the editable install's .pth stays out, the wheel is all it has.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    pathlib.Path(purelib, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300, capture_output=True)
    workdir = tmp_path / "job"
    workdir.mkdir()
    found = run_user_script(python, workdir, shared_cluster.metadata_service_uri)
    assert found["payloads"] == ["a", "b", "c"]
    assert found["package"] == os.path.join(purelib, "spark_bookkeeper")


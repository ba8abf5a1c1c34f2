"""spark-bookkeeper: Apache BookKeeper rebuilt in Python, with a PySpark connector."""
from setuptools import find_packages, setup

# Spark's Arrow path (createDataFrame, toPandas) needs pandas; without it a notebook or test warns that Arrow is off.
PANDAS = "pandas>=2.2,<3"  # PySpark 4.3 needs 2.2 and warns that it does not fully support 3
# What PySpark's Spark Connect client needs beside pyspark (pyspark[connect] without a second pyspark pin).
CONNECT = ["grpcio-status>=1.76,<2", "googleapis-common-protos>=1.71,<2", "zstandard>=0.25,<1", PANDAS]

setup(
    name="spark-bookkeeper",
    version="0.1.0",
    description="Apache BookKeeper in Python (bookies, client, ZooKeeper metadata) with a PySpark data source",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["spark_bookkeeper*", "pyspark_bookkeeper*", "bookie*"]),  # jobs/: scripts, not a package
    install_requires=[
        "pyspark>=4.0,<4.4",  # the Python data source API; newer APIs are used where present (spark_versions.py)
        "pyarrow>=17,<30",
        "numpy>=1.26,<3",
        "kazoo>=2.10,<3",
        "grpcio>=1.85.1,<2",  # generated code (make proto) needs at least the grpcio-tools version
        "protobuf>=7.35.1,<8",  # ... and the protobuf gencode version
        "crc32c>=2.4,<3",  # C CRC32C (SSE4.2 when the CPU has it)
        "tqdm>=4.60,<5",  # progress of long shell commands and benchmarks
        "matplotlib>=3.8,<4",  # the audit jobs' report plots
        "jproperties>=2.1,<3",  # bk_server.conf read exactly as java.util.Properties reads it
        "prometheus-client>=0.20,<1",  # the metrics registry, process metrics (bookie/stats)
        "aiohttp>=3.9,<4",  # the HTTP admin server, on the bookie's event loop (bookie/http)
    ],
    extras_require={
        "test": [
            "pytest>=8,<10",
            "pytest-timeout>=2.2,<3",
            "chispa>=0.10,<1",
            "hypothesis>=6.100,<7",  # property-based tests (partition packing)
            "grpcio-tools>=1.85.1,<2",
            "nbclient>=0.10,<1",  # the notebooks run in the test suite
            "nbformat>=5.10,<6",
            "ipykernel>=6.29,<8",
            *CONNECT,  # the Spark Connect tests; its pandas also runs the notebooks with Arrow, as [notebooks] does
        ],
        "connect": CONNECT,  # a Spark Connect client (SparkSession.builder.remote("sc://..."))
        "notebooks": [  # what `jupyter lab notebooks/` needs (make notebooks)
            "jupyterlab>=4.2,<5",  # with ipykernel, the notebooks' kernel
            PANDAS,
        ],
        "docs": [
            "mkdocs-material>=9.5,<10",  # the documentation site (make docs)
            "mkdocstrings[python]>=0.26,<1",  # the public API's docstrings in the guides
            "pymdown-extensions>=11.0.1,<12",  # 12 and 13 break mkdocstrings' code highlighting
        ],
    },
    entry_points={"console_scripts": ["bk=bookie.cli.main:main"]},
)

"""Spark data source for BookKeeper ledgers."""

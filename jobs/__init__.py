"""Scheduled Spark jobs (audits)."""

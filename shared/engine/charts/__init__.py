"""Helm charts beyond the fleet's files: remote charts pulled into a cache through the worker's
mirrors and credentials, Chart.yaml dependencies, and which values a chart reads."""

"""Tests of the worker process's own modules (worker/)."""

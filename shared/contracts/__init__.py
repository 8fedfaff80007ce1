"""The Temporal contracts: workflow, signal, query and activity names and payload models."""

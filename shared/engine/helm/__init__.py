"""Helm's template engine and what rollwright builds on it: rendering charts and Go templates,
helmfile's Go templates, their errors in plain words, and which values templates read."""

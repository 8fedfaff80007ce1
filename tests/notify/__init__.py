"""Tests of shared/notify: events, sinks, the notifier and reminders."""

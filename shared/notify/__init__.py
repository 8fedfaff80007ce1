"""Notifications: events of deployments, rollouts and reminders (`events`, `reminders`), the
sinks they go to (`sinks`: a Slack-compatible incoming webhook, a signed HTTP webhook) and the
notifier that delivers them from SQL with retries (`notifier`). docs/notifications.md."""

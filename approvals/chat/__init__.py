"""Decisions from chat (DESIGN.md "Decisions from chat"), Slack first: linking a Slack
identity to a user (`views`), the signed interactivity endpoint that acknowledges at once
and queues the work (`views`), the worker's decision through the one decision adapter
(`tasks`), and the messages that show a request (`slack`). See docs/slack.md."""

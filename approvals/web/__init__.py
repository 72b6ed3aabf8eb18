"""The people-facing web pages: the reviewer queue and history, the rule editor, proposals and
metrics, their URLs, template tags and the reviewer socket. Views only translate to services."""

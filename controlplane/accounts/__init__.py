"""Signing in (throttled, never a hard lock) and who changes which group's members (audited):
site-wide concerns every app's pages share."""

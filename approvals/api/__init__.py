"""The approvals app's API: requests as agents and people read them, and people's
decisions (routes in `urls.py`, rendering in `representation.py`)."""

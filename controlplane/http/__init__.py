"""HTTP plumbing shared by every app: the one error shape and its codes, API
authentication helpers, parsers, pagination, schema helpers, the 4xx/5xx handlers,
the body limit, the outbound HTTP module, and `compat`: every library internal the
serving reads (the long-poll's threads, daphne's request bodies), in one place.

Imports no app of this project (an import-linter contract holds it to that): apps
build on it, never the other way round.
"""

"""`python -m audit.verify FILE [options]`: the offline verifier, from the server's tree.

The verifier lives in the client distribution (`hitl_controlplane.verify`, also
installed as `hitl-audit-verify`) so an auditor can run it without this project;
this name stays because docs/audit.md and existing runbooks use it.
"""

from __future__ import annotations

import sys

from hitl_controlplane.verify import main, verify_export

__all__ = ["main", "verify_export"]

if __name__ == "__main__":
    sys.exit(main(prog="python -m audit.verify"))

"""The HITL control plane's Python distribution (`hitl-controlplane-client`), no Django.

- `hitl_controlplane.client`: agents submit actions and plans and wait for people.
- `hitl_controlplane.verify`: the offline audit-export verifier (`hitl-audit-verify`), its
  checks in `export_checks`.
- `decisions` (with `submitted`): the signed decision document that binds a resume to
  the exact call the client made.
- `canonical`, `manifest`, `export_files`, `ed25519`: the canonical form, export
  formats and signatures, shared with the server's `audit` app (one implementation).

The import name is not `agents` (the OpenAI Agents SDK's) nor `audit`, so this
installs beside any agent framework.
"""

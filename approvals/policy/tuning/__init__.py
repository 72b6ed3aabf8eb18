"""Risk-rule tuning for admins: dry-runs of proposed rule sets, policy history and
rollback, four-eyes proposals in words (`proposals`), and decision metrics.
Read-only except `editing` and `history.rollback`, which change the policy only
through `approvals.policy` (applied at once when stricter, else a proposal).
"""

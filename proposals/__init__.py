"""Proposals: the format, the store, the audit log and the approval rules (docs/architecture.md §5).

Shared by the recommender (which proposes) and the scheduler hooks (which apply); it imports neither. The
canonical JSON, every target's value format, the lifecycle and who may approve: docs/proposals.md.
"""

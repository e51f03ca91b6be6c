"""Benchmarks (not tests): memplane against the floor — the same work done directly, the
adapter call plus the one SQL statement it needs — and, where one exists, a peer.

Run ``python -m bench [--quick]``. Figures are printed, not asserted.
"""

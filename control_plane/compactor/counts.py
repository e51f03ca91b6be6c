"""What a compaction run counts: its result and its job's progress hold these, counts only,
never content (I7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass
class Counts:
    """A run's result: counts only, never content."""

    buckets: int = 0
    compacted_buckets: int = 0
    events_compressed: int = 0
    entries_written: int = 0
    failed_buckets: int = 0
    skipped_buckets: int = 0  # another run got there first, or too few events left
    budget_spent: bool = False
    dry_run: bool = False
    failures: dict[str, int] = field(default_factory=dict)  # problem code -> buckets

    @classmethod
    def of(cls, saved: dict[str, Any]) -> Counts:
        known = {k: v for k, v in saved.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plus(self, delta: Counts) -> Counts:
        """These counts with ``delta``'s added (``buckets`` and ``dry_run`` kept)."""
        failures = dict(self.failures)
        for code, n in delta.failures.items():
            failures[code] = failures.get(code, 0) + n
        return replace(
            self, compacted_buckets=self.compacted_buckets + delta.compacted_buckets,
            events_compressed=self.events_compressed + delta.events_compressed,
            entries_written=self.entries_written + delta.entries_written,
            failed_buckets=self.failed_buckets + delta.failed_buckets,
            skipped_buckets=self.skipped_buckets + delta.skipped_buckets,
            budget_spent=self.budget_spent or delta.budget_spent, failures=failures)

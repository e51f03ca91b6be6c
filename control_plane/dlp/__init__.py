"""The DLP guard: detection of sensitive values (detect), the tenant's policy and the one
screen every write path calls before it stores a value (guard)."""

"""Retention policies, the TTL purge and cleanup: what is past its time is deleted for good."""

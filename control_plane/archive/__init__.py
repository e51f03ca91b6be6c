"""The archive tier: memories' and events' objects moved to the bucket's colder storage
class (retention policies' ``archive_after_days``), recorded on their rows."""

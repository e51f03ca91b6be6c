"""What stops a write or a delete: legal holds (a subject, a (scope, scope ref) or the whole
tenant kept from deletion) and the write block while a subject's erasure is in progress."""

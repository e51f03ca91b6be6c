"""Legal holds: a subject, a (scope, scope ref) or the whole tenant kept from deletion."""

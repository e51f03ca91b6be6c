"""Remember: durable facts extracted from a conversation's messages and reconciled with what
is stored about the data subject (ADD / UPDATE / DELETE / NONE), each write an ordinary
audited memory write. ``rules.py`` is the built-in offline extractor, ``model.py`` the
tenant's model endpoint, ``service.py`` the reconciliation and the writes."""

"""Adapters that put memplane behind other frameworks' interfaces; each imports its framework
only when used (``memplane.integrations.langgraph`` needs ``pip install 'memplane[langgraph]'``)."""

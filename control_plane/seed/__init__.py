"""The seed's own routes (``/memory``): thin aliases over the v1 events and entries routes,
so skills written for Jet's memory layer work unchanged. See docs/seed-routes.md."""

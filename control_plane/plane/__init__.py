"""The data plane: how the service reaches each tenant's bucket and the keys that seal it.

``data_plane`` (which adapter and prefix hold a tenant's content), ``credentials`` (bucket
credentials sealed with the server key), ``bulkhead``, ``budget`` and ``shared_pool`` (what
one tenant's slow bucket may hold), ``keyring`` and ``kek_providers`` (the KEK providers and
the cache of unwrapped subject keys). Below every domain: it imports only the kernel, the
database and the storage adapters.
"""

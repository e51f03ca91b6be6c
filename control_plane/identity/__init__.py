"""Who is calling: the caller an API key names, what its key may see, and the actor an
audit row records — the value types and the key lookup every layer needs.

It sits below every domain and the request dependencies (control_plane.deps) and uses only
the kernel and the database: recording a refusal in the audit log is the audit and tenants
domains' work (``tenants.service.require_role``, ``tenants.access.ensure_visible``).
"""

from .access import ANY_REF, EVERYTHING, TENANT_REF, Access, Grant, canonical_scope
from .authentication import CALLERS, CallerCache, authenticate, cached_caller
from .caller import Actor, Caller

__all__ = ["ANY_REF", "CALLERS", "EVERYTHING", "TENANT_REF", "Access", "Actor", "Caller",
           "CallerCache", "Grant", "authenticate", "cached_caller", "canonical_scope"]

"""Where the server's own identity may be used on a tenant's behalf: never at an endpoint the
tenant chose.

Two settings make the server act with its own cloud identity for a tenant's bucket: a GCS
``impersonate_service_account`` (the server's Google identity mints a token for that account)
and an S3 ``role_arn`` (the server's AWS identity assumes the role). The token or the role's
session credentials then go with every bucket request, so they may only go to the cloud's own
endpoint: with a custom ``endpoint`` / ``endpoint_url`` they would be handed to whoever
listens there. Azure configurations always carry the tenant's own key or SAS (there is no
managed-identity path), and a GCS key's tokens always come from Google's own token URI, so
neither can meet a custom endpoint with the server's identity.

The rule is checked by the configuration schema (a 422 for the caller) and again here, when a
tenant's adapter is built (:func:`check_identity_endpoint`, called by the registry), since
stored configurations may predate it.

**Impersonation is bound to the tenant** (:class:`ImpersonationRules`). It needs the server's
Google identity to hold ``Service Account Token Creator`` on the tenant's account; any account
that granted it could then be named by *any* tenant, and its bucket read and written with its
token: the confused deputy that S3 avoids with ExternalId = the tenant id. Google has no
ExternalId, and a service account's name (6-30 characters, in a project id of 6-30) cannot
hold a tenant id, so the operator binds accounts to tenants:
``MEMPLANE_GCS_IMPERSONATION_ALLOWED`` lists entries ``<tenant id>=<account>``, the account
with ``*`` wildcards if wanted (``3f2c…=*@acme-prod.iam.gserviceaccount.com`` gives that
tenant every account of the project). Without an entry, a tenant may not impersonate at all.
The control plane checks it when a configuration is saved (a 422 naming the rule) and
whenever a tenant's adapter is built.
"""

from __future__ import annotations

import fnmatch
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

GCS_IMPERSONATION_ENDPOINT = (
    "impersonate_service_account works only with Google's own endpoint: leave out endpoint "
    "(a token this server mints for the account would otherwise be sent to that endpoint), "
    "or use credentials_info, a key of your own")
S3_ROLE_ENDPOINT = (
    "role_arn works only with AWS's own endpoint: leave out endpoint_url (the session "
    "credentials of the role this server assumes would otherwise be sent to that endpoint), "
    "or use access_key_id and secret_access_key, keys of your own")


class IdentityRefused(ValueError):
    """A configuration would lend the server's identity where the tenant chose."""


class ImpersonationNotAllowed(IdentityRefused):
    """The tenant named an account the operator has not bound to it."""


def check_identity_endpoint(storage_type: str, config: Mapping[str, Any]) -> None:
    """Refuse a tenant's configuration that would send the server's identity (or what it
    minted) to an endpoint other than the cloud's own."""
    if storage_type == "gcs" and config.get("impersonate_service_account") \
            and config.get("endpoint"):
        raise IdentityRefused(GCS_IMPERSONATION_ENDPOINT)
    if storage_type == "s3" and config.get("role_arn") and config.get("endpoint_url"):
        raise IdentityRefused(S3_ROLE_ENDPOINT)


SETTING = "MEMPLANE_GCS_IMPERSONATION_ALLOWED"
_ACCOUNT = re.compile(r"[A-Za-z0-9._%+*-]+@[A-Za-z0-9.*-]+\.gserviceaccount\.com")


def not_allowed(account: str) -> str:
    return (f"this server may not impersonate {account!r} for your tenant: the operator lists "
            f"the service accounts each tenant may impersonate in {SETTING}; ask the operator "
            "to add this one for your tenant id, or use credentials_info, a key of your own")


@dataclass(frozen=True)
class ImpersonationRules:
    """Per tenant, the account patterns it may impersonate (lowercase)."""

    by_tenant: Mapping[uuid.UUID, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> ImpersonationRules:
        """Parse ``<tenant id>=<account pattern>`` entries; a bad one is a ValueError naming
        it."""
        rules: dict[uuid.UUID, list[str]] = {}
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            tenant, _, pattern = entry.partition("=")
            pattern = pattern.strip().lower()
            try:
                tenant_id = uuid.UUID(tenant.strip())
                if not _ACCOUNT.fullmatch(pattern):
                    raise ValueError(pattern)
            except ValueError:
                raise ValueError(
                    f"{SETTING} entry {raw!r} is not '<tenant id>=<service account>' (like "
                    "'3f2c…-…=memplane@acme.iam.gserviceaccount.com'; '*' wildcards allowed "
                    "in the account)") from None
            rules.setdefault(tenant_id, []).append(pattern)
        return cls({t: tuple(p) for t, p in rules.items()})

    def allows(self, tenant_id: uuid.UUID, account: str) -> bool:
        account = account.strip().lower()
        return any(fnmatch.fnmatchcase(account, p) for p in self.by_tenant.get(tenant_id, ()))

    def check(self, tenant_id: uuid.UUID, storage_type: str,
              config: Mapping[str, object]) -> None:
        """Refuse a configuration that impersonates an account not bound to this tenant."""
        account = config.get("impersonate_service_account")
        if storage_type == "gcs" and account and not self.allows(tenant_id, str(account)):
            raise ImpersonationNotAllowed(not_allowed(str(account)))

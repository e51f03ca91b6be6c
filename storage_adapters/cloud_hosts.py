"""The clouds' own storage endpoints, per backend: the hosts a tenant may name without the
operator listing them in ``MEMPLANE_ALLOWED_ENDPOINTS``.

A provider-wide wildcard (``*.amazonaws.com``, ``*.googleapis.com``) admits hosts anyone can
own and run their own HTTP server on: EC2 instances (``ec2-…compute-1.amazonaws.com``), load
balancers (``*.elb.amazonaws.com``), API Gateway (``*.execute-api…``), S3 static websites
(``*.s3-website…``), Cloud Run and friends. So each backend admits only the exact shapes of its
own storage endpoint, and only its own: an S3 configuration cannot name an Azure host, nor the
reverse. Anything else (VPC or private-link endpoints, MinIO, R2, an emulator) only through
the operator's allow-list.

- **S3**: ``s3.amazonaws.com``, ``s3.<region>.amazonaws.com``, the legacy
  ``s3-<region>.amazonaws.com`` and ``s3-external-1.amazonaws.com``, dual-stack
  (``s3.dualstack.<region>``), FIPS (``s3-fips.<region>``, ``s3-fips.dualstack.<region>``),
  each also in its virtual-host form ``<bucket>.`` in front. A region is one label shaped like
  an AWS region (``us-east-1``, ``us-gov-west-1``, ``ap-southeast-7``). The China partition
  (``amazonaws.com.cn``) is admitted in the same exact forms with a ``cn-`` region: it is S3
  operated by AWS's China partners, and the exact patterns admit nothing but S3 there either.
- **GCS**: ``storage.googleapis.com``, its mTLS twin ``storage.mtls.googleapis.com`` and the
  regional endpoints ``storage.<region>.rep.googleapis.com``. Token requests of a service
  account key go to ``oauth2.googleapis.com``: a host the adapter connects to for itself
  (``SERVICE_HOSTS``), never one a tenant may name as its endpoint.
- **Azure**: ``<account>.blob.core.windows.net`` (an account name is 3-24 lowercase letters
  and digits; ``<account>-secondary`` is the read-only replica), and the same blob host of
  Microsoft's sovereign clouds: ``blob.core.usgovcloudapi.net`` (Azure Government) and
  ``blob.core.chinacloudapi.cn`` (Azure China). Every name under ``blob.core.<cloud>`` is a
  storage account's blob service, whoever created the account, so these admit only blob
  storage. Not admitted: ``*.privatelink.blob.core.windows.net`` (private addresses) and
  ``*.web.core.windows.net`` / ``*.dfs.core.windows.net`` (other services).
"""

from __future__ import annotations

import re

_BUCKET = r"(?:[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]\.)?"  # a virtual-host bucket, optional
_REGION = r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}"
_CN_REGION = r"cn(?:-[a-z]+)+-[0-9]{1,2}"
_S3_SERVICE = (r"(?:s3|s3-external-1|s3-{r}|s3\.{r}|s3\.dualstack\.{r}|s3-fips\.{r}"
               r"|s3-fips\.dualstack\.{r})")
_AZURE_ACCOUNT = r"[a-z0-9]{3,24}(?:-secondary)?"

STORAGE_ENDPOINTS: dict[str, tuple[re.Pattern[str], ...]] = {
    "s3": (
        re.compile(_BUCKET + _S3_SERVICE.format(r=_REGION) + r"\.amazonaws\.com"),
        re.compile(_BUCKET + rf"(?:s3\.{_CN_REGION}|s3\.dualstack\.{_CN_REGION})"
                   + r"\.amazonaws\.com\.cn"),
    ),
    "gcs": (
        re.compile(r"storage(?:\.mtls)?\.googleapis\.com"),
        re.compile(r"storage\.[a-z]+(?:-[a-z]+)*[0-9]+\.rep\.googleapis\.com"),
    ),
    "azure": (
        re.compile(_AZURE_ACCOUNT
                   + r"\.blob\.core\.(?:windows\.net|usgovcloudapi\.net|chinacloudapi\.cn)"),
    ),
}

# Hosts an adapter connects to for its own sake (tokens), never a tenant's endpoint.
SERVICE_HOSTS: dict[str, tuple[str, ...]] = {
    "gcs": ("oauth2.googleapis.com",),
}


def is_storage_endpoint(backend: str, host: str) -> bool:
    """Whether ``host`` is one of ``backend``'s own storage endpoints (exact shapes)."""
    host = host.lower().rstrip(".")
    return any(p.fullmatch(host) for p in STORAGE_ENDPOINTS.get(backend, ()))

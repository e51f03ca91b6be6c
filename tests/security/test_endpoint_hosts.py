"""Which hosts a tenant may name as its storage endpoint without the operator listing them,
and which addresses the guard connects to.

Each backend admits only the exact shapes of its own storage endpoint
(storage_adapters/cloud_hosts.py), never a provider-wide wildcard whose names anyone can own
(EC2, load balancers, API Gateway, S3 websites), and never another backend's hosts. An IPv6
address that carries an IPv4 one is judged by that IPv4.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from tests.support.service import Tenant

S3_ACCEPTED = [
    "s3.amazonaws.com", "s3.us-east-1.amazonaws.com", "bucket.s3.us-east-1.amazonaws.com",
    "bucket.s3.amazonaws.com", "s3.dualstack.us-east-1.amazonaws.com",
    "bucket.s3.dualstack.eu-west-1.amazonaws.com", "s3-fips.us-east-1.amazonaws.com",
    "s3-fips.dualstack.us-gov-west-1.amazonaws.com", "s3-eu-west-1.amazonaws.com",
    "my.dotted.bucket.s3.ap-southeast-2.amazonaws.com", "s3-external-1.amazonaws.com",
    "S3.EU-WEST-1.AMAZONAWS.COM.", "s3.cn-north-1.amazonaws.com.cn",
    "bucket.s3.cn-northwest-1.amazonaws.com.cn",
]
S3_REFUSED = [
    "ec2-3-80-1-1.compute-1.amazonaws.com", "my-lb-123.us-east-1.elb.amazonaws.com",
    "abc123defg.execute-api.us-east-1.amazonaws.com", "bucket.s3-website-us-east-1.amazonaws.com",
    "bucket.s3-website.us-east-1.amazonaws.com", "s3.amazonaws.com.evil.com",
    "evilamazonaws.com", "s3.evilamazonaws.com", "amazonaws.com",
    "abc.lambda-url.us-east-1.on.aws", "ec2-1-2-3-4.compute.amazonaws.com.cn",
    "s3.us-east-1.amazonaws.com.cn", "bucket.vpce-0a1b.s3.us-east-1.vpce.amazonaws.com",
    "x.s3.abc123defg.execute-api.us-east-1.amazonaws.com", "s3.x.y.amazonaws.com",
    "storage.googleapis.com", "acct.blob.core.windows.net",
]
GCS_ACCEPTED = ["storage.googleapis.com", "storage.mtls.googleapis.com",
                "storage.me-central2.rep.googleapis.com", "STORAGE.googleapis.com."]
GCS_REFUSED = [
    "oauth2.googleapis.com", "www.googleapis.com", "bucket.storage.googleapis.com",
    "evil.storage.googleapis.com", "storage.googleapis.com.evil.com", "evilgoogleapis.com",
    "attacker-abc.a.run.app", "iamcredentials.googleapis.com", "metadata.google.internal",
    "s3.us-east-1.amazonaws.com", "acct.blob.core.windows.net",
]
AZURE_ACCEPTED = [
    "acct.blob.core.windows.net", "acme0123456789acme012345.blob.core.windows.net",
    "acct-secondary.blob.core.windows.net", "acct.blob.core.usgovcloudapi.net",
    "acct.blob.core.chinacloudapi.cn",
]
AZURE_REFUSED = [
    "acct.web.core.windows.net", "acct.dfs.core.windows.net",
    "acct.privatelink.blob.core.windows.net", "a.b.blob.core.windows.net",
    "ab.blob.core.windows.net", "acme0123456789acme0123456.blob.core.windows.net",
    "acct.blob.core.windows.net.evil.com", "evil-app.azurewebsites.net",
    "acct.blob.core.cloudapi.de", "blob.core.windows.net", "acct.blob.core.windows.net.cn",
    "s3.us-east-1.amazonaws.com", "storage.googleapis.com",
]
CASES = ([("s3", h, True) for h in S3_ACCEPTED] + [("s3", h, False) for h in S3_REFUSED]
         + [("gcs", h, True) for h in GCS_ACCEPTED] + [("gcs", h, False) for h in GCS_REFUSED]
         + [("azure", h, True) for h in AZURE_ACCEPTED]
         + [("azure", h, False) for h in AZURE_REFUSED])


@pytest.mark.parametrize(("backend", "host", "accepted"), CASES,
                         ids=[f"{b}-{h}" for b, h, _ in CASES])
def test_only_the_backends_own_storage_endpoints_are_accepted(backend: str, host: str,
                                                              accepted: bool) -> None:
    from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy

    policy = EndpointPolicy.from_entries([]).for_backend(backend)
    url = f"https://{host}"
    if accepted:
        assert policy.check_endpoint(url) == host.lower()
    else:
        with pytest.raises(EndpointNotAllowed) as refused:
            policy.check_endpoint(url)
        assert str(refused.value) == (
            f"the endpoint host {host.lower()!r} is not allowed on this server; "
            "use the cloud's own endpoint, or ask the operator to add it to "
            "MEMPLANE_ALLOWED_ENDPOINTS")


def test_the_operators_allow_list_still_admits_other_hosts() -> None:
    from storage_adapters.netguard import EndpointPolicy

    policy = EndpointPolicy.from_entries(["*.vpce.amazonaws.com"]).for_backend("s3")
    assert policy.host_allowed("bucket.vpce-0a1b.s3.us-east-1.vpce.amazonaws.com")
    assert policy.host_allowed("s3.us-east-1.amazonaws.com")
    assert not policy.host_allowed("ec2-3-80-1-1.compute-1.amazonaws.com")
    # without a backend, no cloud host at all: the policy fails closed
    assert not EndpointPolicy.from_entries([]).host_allowed("s3.us-east-1.amazonaws.com")


def test_a_token_host_is_connected_to_but_never_an_endpoint() -> None:
    from storage_adapters.netguard import EndpointPolicy

    gcs = EndpointPolicy.from_entries([]).for_backend("gcs")
    assert gcs.host_allowed("oauth2.googleapis.com", connecting=True)
    assert not gcs.host_allowed("oauth2.googleapis.com")
    s3 = EndpointPolicy.from_entries([]).for_backend("s3")
    assert not s3.host_allowed("oauth2.googleapis.com", connecting=True)


def _put(tenant: Tenant, body: dict[str, Any]) -> Any:
    with tenant.stack.http(tenant.admin_key) as http:
        return http.put("/v1/storage/config", json=body)


@pytest.mark.parametrize("body", [
    {"storage_type": "s3", "connection_config": {
        "bucket": "bkt", "region": "us-east-1", "access_key_id": "AKIATENANT",
        "secret_access_key": "tenant-secret",
        "endpoint_url": "https://ec2-3-80-1-1.compute-1.amazonaws.com"}},
    {"storage_type": "s3", "connection_config": {
        "bucket": "bkt", "region": "us-east-1", "access_key_id": "AKIATENANT",
        "secret_access_key": "tenant-secret",
        "endpoint_url": "https://abc123defg.execute-api.us-east-1.amazonaws.com"}},
    {"storage_type": "s3", "connection_config": {
        "bucket": "bkt", "region": "us-east-1", "access_key_id": "AKIATENANT",
        "secret_access_key": "tenant-secret",
        "endpoint_url": "https://acct.blob.core.windows.net"}},
    {"storage_type": "gcs", "connection_config": {
        "bucket": "bkt", "anonymous": True, "endpoint": "https://attacker.appspot.googleapis.com"}},
    {"storage_type": "azure", "connection_config": {
        "container": "ctr", "account_url": "https://storage.googleapis.com",
        "account_key": "bm90LWEtcmVhbC1rZXk="}},
], ids=["s3-ec2", "s3-execute-api", "s3-names-azure", "gcs-wildcard", "azure-names-gcs"])
def test_a_tenant_cannot_name_a_host_anyone_can_own(tenant: Tenant,
                                                     body: dict[str, Any]) -> None:
    answer = _put(tenant, body)
    assert answer.status_code == 422
    assert answer.json()["problem"] == "endpoint_not_allowed"


# -- addresses that carry an IPv4 address -----------------------------------------------------

@pytest.mark.parametrize(("address", "special"), [
    ("2002:7f00:1::", True),              # 6to4 of 127.0.0.1
    ("2002:a9fe:a9fe::1", True),          # 6to4 of 169.254.169.254 (metadata)
    ("2002:a00:1::", True),               # 6to4 of 10.0.0.1
    ("2002:c0a8:101::", True),            # 6to4 of 192.168.1.1
    ("2002:ac10:1::", True),              # 6to4 of 172.16.0.1
    ("2002:6440:1::", True),              # 6to4 of 100.64.0.1 (CGNAT)
    ("2002::", True),                     # 6to4 of 0.0.0.0
    ("2002:808:808::1", False),           # 6to4 of 8.8.8.8
    ("64:ff9b::7f00:1", True),            # NAT64 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", True),         # NAT64 of the metadata address
    ("64:ff9b::a00:1", True),             # NAT64 of 10.0.0.1
    ("64:ff9b::808:808", False),          # NAT64 of 8.8.8.8
    ("64:ff9b:1::808:808", True),         # local-use NAT64: site-defined, refused
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", True),  # Teredo: refused whatever it carries
    ("2001::808:808", True),              # Teredo
    ("::7f00:1", True),                   # IPv4-compatible 127.0.0.1
    ("::808:808", True),                  # IPv4-compatible, deprecated: refused
    ("::ffff:a9fe:a9fe", True),           # IPv4-mapped metadata
    ("::ffff:808:808", False),            # IPv4-mapped 8.8.8.8
    ("::ffff:0:808:808", True),           # IPv4-translated, deprecated: refused
    ("2a00:1450:4001:80b::200e", False),  # a plain public IPv6 address
])
def test_ipv6_that_carries_ipv4_is_judged_by_it(address: str, special: bool) -> None:
    from storage_adapters.netguard import EndpointPolicy, is_special

    assert is_special(ipaddress.ip_address(address)) is special
    assert EndpointPolicy.from_entries([]).address_allowed(
        ipaddress.ip_address(address)) is not special

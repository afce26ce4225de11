"""A federation's PKI for mutual TLS: its CA, party certificates and their rotation.

certs        the CA, party certificates and their checks (`CertError`)
federation   identities and their files: issue, bundle, a local federation, load
requests     a signing request out, a certificate back (separate organisations)
rotation     a daemon's TLS identity, re-read when its files change
"""

from vfl.secure.pki.certs import (
    RENEW_HINT,
    CertError,
    PartyFiles,
    check_party_id,
    init_ca,
    issue,
    party_id_from_cert,
    verify_party_cert,
)
from vfl.secure.pki.federation import (
    ADMIN_ID,
    export_bundle,
    issue_identity,
    load_identity,
    local_federation,
)
from vfl.secure.pki.requests import request, sign
from vfl.secure.pki.rotation import IdentityPem, IdentityWatch, ServerContexts

__all__ = [
    "ADMIN_ID",
    "RENEW_HINT",
    "CertError",
    "IdentityPem",
    "IdentityWatch",
    "PartyFiles",
    "ServerContexts",
    "check_party_id",
    "export_bundle",
    "init_ca",
    "issue",
    "issue_identity",
    "load_identity",
    "local_federation",
    "party_id_from_cert",
    "request",
    "sign",
    "verify_party_cert",
]

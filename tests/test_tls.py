import ssl

import httpx

from frobozz._tls import system_tls_context, tls_context


def test_every_client_shares_one_context_that_checks_certificates_as_httpx_s_own_does():
    context = tls_context()
    assert context is tls_context() and context is not tls_context(trust_env=False)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    own = httpx.create_ssl_context()
    assert context.cert_store_stats() == own.cert_store_stats() and context.minimum_version == own.minimum_version


def test_the_imap_producer_s_context_is_made_once_on_the_system_s_trust_store():
    context = system_tls_context()
    assert context is system_tls_context() and context is not tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats() == ssl.create_default_context().cert_store_stats()

// SPDX-License-Identifier: BSD-3-Clause
// A self-signed EC certificate and key made in memory, and PEM files of them, for the unit
// tests of the TLS server side (no openssl CLI, no files shipped with the tests).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <string>

namespace nscache::server::testing {

struct TestCertificate {
    EVP_PKEY* key = nullptr;
    X509* cert = nullptr;

    explicit TestCertificate(const char* common_name = "nscache.test") {
        key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
        cert = X509_new();
        ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
        X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
        X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
        X509_set_pubkey(cert, key);
        X509_NAME* name = X509_get_subject_name(cert);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
        X509_set_issuer_name(cert, name);
        X509_sign(cert, key, EVP_sha256());
    }
    ~TestCertificate() {
        X509_free(cert);
        EVP_PKEY_free(key);
    }
    TestCertificate(const TestCertificate&) = delete;
    TestCertificate& operator=(const TestCertificate&) = delete;

    // A server context with this certificate, TLS 1.2 and up.
    SSL_CTX* server_context() const {
        SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_use_certificate(ctx, cert);
        SSL_CTX_use_PrivateKey(ctx, key);
        return ctx;
    }

    bool write_pem(const std::string& cert_path, const std::string& key_path) const {
        FILE* c = std::fopen(cert_path.c_str(), "w");
        FILE* k = std::fopen(key_path.c_str(), "w");
        bool ok = c != nullptr && k != nullptr && PEM_write_X509(c, cert) == 1 &&
                  PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
        if (c != nullptr) std::fclose(c);
        if (k != nullptr) std::fclose(k);
        return ok;
    }
};

}  // namespace nscache::server::testing

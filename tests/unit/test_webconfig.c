/*
 * Unit tests for --web-config (tui/serve/webconfig.c): node_exporter's
 * web configuration file read and checked, each mistake refused in one
 * line that names the file and the line; bcrypt basic auth with its cache
 * and its CPU budget; the warning for a non-loopback address.
 * Certificates are made here with GnuTLS into a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "serve/serve.h"
#include "util/addr.h"
#include "serve/webconfig.h"

static char dir[] = "/tmp/ymtop-webconfig-XXXXXX";
static char hash_b[64], hash_y[64];

static void put(const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A self-signed P-256 certificate for 127.0.0.1 and its key, as PEM files
 * NAME.crt and NAME.key. */
static void make_cert(const char *name)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	assert_int_equal(gnutls_x509_privkey_init(&key), 0);
	assert_int_equal(gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
		GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0), 0);
	assert_int_equal(gnutls_x509_crt_init(&crt), 0);
	assert_int_equal(gnutls_x509_crt_set_version(crt, 3), 0);
	assert_int_equal(gnutls_x509_crt_set_key(crt, key), 0);
	assert_int_equal(gnutls_x509_crt_set_dn(crt, "CN=127.0.0.1", NULL), 0);
	assert_int_equal(gnutls_x509_crt_set_serial(crt, "\x01", 1), 0);
	assert_int_equal(gnutls_x509_crt_set_activation_time(crt, time(NULL) - 3600), 0);
	assert_int_equal(gnutls_x509_crt_set_expiration_time(crt, time(NULL) + 86400), 0);
	assert_int_equal(gnutls_x509_crt_set_basic_constraints(crt, 1, -1), 0);
	assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);
	char pem[8192];
	size_t n = sizeof pem;
	char file[64];
	assert_int_equal(gnutls_x509_crt_export(crt, GNUTLS_X509_FMT_PEM, pem, &n), 0);
	pem[n] = 0;
	snprintf(file, sizeof file, "%s.crt", name);
	put(file, pem);
	n = sizeof pem;
	assert_int_equal(gnutls_x509_privkey_export(key, GNUTLS_X509_FMT_PEM, pem, &n), 0);
	pem[n] = 0;
	snprintf(file, sizeof file, "%s.key", name);
	put(file, pem);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	make_cert("server");
	make_cert("other");
	/* bcrypt at cost 4 (fast), as $2b$ and as $2y$ (htpasswd's). */
	struct crypt_data cd;
	char salt[64];
	memset(&cd, 0, sizeof cd);
	if (!crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof salt) ||
	    !crypt_rn("secret", salt, &cd, sizeof cd))
		return -1;
	snprintf(hash_b, sizeof hash_b, "%.60s", cd.output);
	memset(&cd, 0, sizeof cd);
	if (!crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof salt))
		return -1;
	salt[2] = 'y';
	if (!crypt_rn("hunter2", salt, &cd, sizeof cd))
		return -1;
	snprintf(hash_y, sizeof hash_y, "%.60s", cd.output);
	return strncmp(hash_y, "$2y$04$", 7) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct webconfig *load_text(const char *text, char *err, size_t len)
{
	put("web.yml", text);
	char path[256];
	snprintf(path, sizeof path, "%s/web.yml", dir);
	err[0] = 0;
	return webconfig_load(path, err, len);
}

static void a_good_file_is_read_whole(void **state)
{
	(void)state;
	char text[1024], err[512];
	snprintf(text, sizeof text,
		 "# node_exporter's web config\n"
		 "tls_server_config:\n"
		 "  cert_file: server.crt\n"
		 "  key_file: server.key\n"
		 "  client_auth_type: RequireAndVerifyClientCert\n"
		 "  client_ca_file: server.crt\n"
		 "  client_allowed_sans: [scraper.example.org, 10.0.0.7]\n"
		 "  min_version: TLS12\n"
		 "  cipher_suites:\n"
		 "    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"
		 "    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n"
		 "  curve_preferences: [X25519, CurveP256]\n"
		 "  prefer_server_cipher_suites: false\n"
		 "http_server_config:\n"
		 "  http2: true\n"
		 "  headers:\n"
		 "    x-frame-options: deny\n"
		 "    Strict-Transport-Security: max-age=31536000\n"
		 "basic_auth_users:\n"
		 "  alice: %s\n"
		 "  bob: '%s'\n", hash_b, hash_y);
	struct webconfig *wc = load_text(text, err, sizeof err);
	assert_non_null(wc);
	assert_string_equal(err, "");
	assert_true(wc->tls);
	assert_int_equal(wc->client_auth, WC_REQUIRE_AND_VERIFY_CLIENT_CERT);
	assert_non_null(strstr(wc->cert, "BEGIN CERTIFICATE"));
	assert_non_null(strstr(wc->key, "PRIVATE KEY"));
	assert_non_null(wc->client_ca);
	assert_int_equal(wc->nsans, 2);
	assert_string_equal(wc->headers[0], "max-age=31536000");
	assert_string_equal(wc->headers[2], "deny");
	assert_null(wc->headers[1]);
	assert_string_equal(wc->sans[1], "10.0.0.7");
	assert_string_equal(wc->priorities,
			    "NORMAL:-VERS-ALL:+VERS-TLS1.2:+VERS-TLS1.3"
			    ":-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-CIPHER-ALL:+AES-128-GCM"
			    ":-MAC-ALL:+AEAD:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1");
	assert_int_equal(wc->nusers, 2);
	assert_string_equal(wc->users[1].name, "bob");

	unsigned flags = 0;
	struct MHD_OptionItem items[WC_MHD_ITEMS];
	webconfig_mhd(wc, &flags, items);
	assert_true(flags & MHD_USE_TLS);
	assert_int_equal(items[3].option, MHD_OPTION_HTTPS_MEM_TRUST);
	assert_int_equal(items[4].option, MHD_OPTION_END);
	webconfig_free(wc);
}

static void an_empty_file_is_plain_http_without_auth(void **state)
{
	(void)state;
	char err[512];
	struct webconfig *wc = load_text("", err, sizeof err);
	assert_non_null(wc);
	assert_false(wc->tls);
	assert_int_equal(wc->nusers, 0);
	assert_int_equal(webconfig_check(wc, "anyone", "anything"), WC_ALLOW);
	unsigned flags = 0;
	struct MHD_OptionItem items[WC_MHD_ITEMS];
	webconfig_mhd(wc, &flags, items);
	assert_int_equal(flags, 0);
	assert_int_equal(items[0].option, MHD_OPTION_END);
	webconfig_free(wc);
	/* TLS 1.2 only, server precedence by default; no cipher named. */
	wc = load_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		       "  max_version: TLS12\n", err, sizeof err);
	assert_non_null(wc);
	assert_string_equal(wc->priorities, "NORMAL:-VERS-ALL:+VERS-TLS1.2:%SERVER_PRECEDENCE");
	webconfig_free(wc);
	/* Only CBC suites: no TLS 1.3, which would have no cipher. */
	wc = load_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		       "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA]\n",
		       err, sizeof err);
	assert_non_null(wc);
	assert_null(strstr(wc->priorities, "TLS1.3"));
	webconfig_free(wc);
}

/* Each mistake: refused, in one line, naming the file's line. */
static void each_mistake_is_one_line(void **state)
{
	(void)state;
	static const struct {
		const char *yaml, *line, *says;
	} bad[] = {
		{ "nope: 1\n", ":1: ", "unknown key 'nope'" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  cipher_suite: [x]\n", ":4: ", "unknown key 'cipher_suite' in tls_server_config" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_BOGUS]\n",
		  ":4: ", "unknown cipher suite 'TLS_BOGUS'" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  cipher_suites:\n  - TLS_RSA_WITH_RC4_128_SHA\n", ":5: ",
		  "cipher suite 'TLS_RSA_WITH_RC4_128_SHA' is insecure" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  curve_preferences: [P256]\n", ":4: ", "unknown curve 'P256'" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  min_version: TLS1.2\n", ":4: ", "min_version must be TLS10" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  min_version: TLS13\n  max_version: TLS12\n", ":2: ",
		  "min_version TLS13 is above max_version TLS12" },
		{ "tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
		  ":2: ", "missing.crt: No such file or directory" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: other.key\n",
		  ":2: ", "the certificate and key do not load" },
		{ "tls_server_config:\n  cert_file: server.crt\n", ":2: ",
		  "tls_server_config needs key_file" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_ca_file: server.crt\n", ":4: ",
		  "client_ca_file is given without a client_auth_type" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_auth_type: RequireAndVerifyClientCert\n", ":2: ",
		  "needs client_ca_file" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_auth_type: Always\n", ":4: ", "client_auth_type must be" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_auth_type: RequireAndVerifyClientCert\n"
		  "  client_ca_file: server.key\n", ":5: ", "no PEM certificate in it" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_allowed_sans: [a]\n", ":4: ",
		  "client_allowed_sans needs client_auth_type RequireAndVerifyClientCert" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.crt\n"
		  "  client_allowed_sans: [a, '']\n", ":6: ", "client_allowed_sans: an empty name" },
		{ "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
		  "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.crt\n"
		  "  client_allowed_sans: a\n", ":6: ", "client_allowed_sans must be a list" },
		{ "http_server_config:\n  headers:\n    X-A: b\n", ":3: ",
		  "headers: 'X-A' cannot be set" },
		{ "http_server_config:\n  headers:\n    X-Frame-Options: \"a\\nb\"\n", ":3: ",
		  "header X-Frame-Options: a control character" },
		{ "http_server_config:\n  http2: maybe\n", ":2: ", "http2 must be true or false" },
		{ "basic_auth_users:\n  alice: secret\n", ":2: ", "user 'alice': not a bcrypt hash" },
		{ "basic_auth_users:\n  alice: $1$abc$0123456789012345678901\n", ":2: ",
		  "not a bcrypt hash" },
		{ "basic_auth_users:\n  alice: $2y$10$tooshort\n", ":2: ", "not a bcrypt hash" },
		{ "basic_auth_users:\n  alice: [a]\n", ":2: ", "must be a string" },
		{ "basic_auth_users:\n  a:b: x\n", ":2: ", "has a ':'" },
		{ "basic_auth_users: alice\n", ":1: ", "must be a mapping" },
		{ "tls_server_config:\n  key_file: a\n  key_file: b\n", ":3: ",
		  "'key_file' is given twice" },
		{ "tls_server_config: [\n", ":2: ", "not YAML" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char err[512];
		struct webconfig *wc = load_text(bad[i].yaml, err, sizeof err);
		if (wc || !strstr(err, bad[i].says) || !strstr(err, bad[i].line) ||
		    strchr(err, '\n') || strncmp(err, "--web-config /tmp/", 18))
			fail_msg("case %zu: %s -> '%s'", i, bad[i].yaml, err);
		webconfig_free(wc);
	}
	char err[512];
	/* Bounded: no quadratic walk of a huge mapping. */
	size_t cap = 32 + (WC_MAP_MAX + 1) * 16;
	char *big = malloc(cap);
	assert_non_null(big);
	size_t n = (size_t)snprintf(big, cap, "basic_auth_users:\n");
	for (int i = 0; i <= WC_MAP_MAX; i++)
		n += (size_t)snprintf(big + n, cap - n, "  u%d: x\n", i);
	assert_null(load_text(big, err, sizeof err));
	free(big);
	assert_non_null(strstr(err, ":2: basic_auth_users has more than 4096 entries"));
	assert_null(webconfig_load("/nonexistent/web.yml", err, sizeof err));
	assert_string_equal(err, "--web-config /nonexistent/web.yml: No such file or directory");
}

static struct webconfig *users(void)
{
	char text[512], err[512];
	snprintf(text, sizeof text, "basic_auth_users:\n  alice: %s\n  bob: %s\n",
		 hash_b, hash_y);
	struct webconfig *wc = load_text(text, err, sizeof err);
	assert_non_null(wc);
	return wc;
}

static void right_passwords_pass_once_checked(void **state)
{
	(void)state;
	struct webconfig *wc = users();
	assert_int_equal(webconfig_check(wc, "alice", "secret"), WC_ALLOW);
	assert_int_equal(wc->bcrypt_runs, 1);
	/* From the cache: no second bcrypt. */
	assert_int_equal(webconfig_check(wc, "alice", "secret"), WC_ALLOW);
	assert_int_equal(wc->bcrypt_runs, 1);
	assert_int_equal(wc->cache_hits, 1);
	assert_int_equal(webconfig_check(wc, "bob", "hunter2"), WC_ALLOW);
	/* Wrong passwords are never cached: each costs a check. */
	assert_int_equal(webconfig_check(wc, "alice", "secreT"), WC_DENY);
	assert_int_equal(webconfig_check(wc, "alice", "secreT"), WC_DENY);
	assert_int_equal(webconfig_check(wc, "alice", "hunter2"), WC_DENY);
	assert_int_equal(webconfig_check(wc, "alice", ""), WC_DENY);
	assert_int_equal(wc->bcrypt_runs, 6);
	/* An unknown user costs a check too, and never passes, even with a
	 * password that is right for someone. */
	assert_int_equal(webconfig_check(wc, "carol", "secret"), WC_DENY);
	assert_int_equal(webconfig_check(wc, "", "secret"), WC_DENY);
	assert_int_equal(wc->bcrypt_runs, 8);
	assert_int_equal(wc->ncache, 2);
	webconfig_free(wc);
}

static void the_cache_is_bounded(void **state)
{
	(void)state;
	/* More users than entries, each checked right once: the cache keeps
	 * WC_CACHE, the oldest replaced. */
	size_t cap = 64 + (size_t)(WC_CACHE + 8) * 80;
	char *text = malloc(cap), err[512];
	assert_non_null(text);
	size_t n = (size_t)snprintf(text, cap, "basic_auth_users:\n");
	for (int i = 0; i < WC_CACHE + 8; i++)
		n += (size_t)snprintf(text + n, cap - n, "  user%d: %s\n", i, hash_b);
	struct webconfig *wc = load_text(text, err, sizeof err);
	free(text);
	assert_non_null(wc);
	char user[32];
	for (int i = 0; i < WC_CACHE + 8; i++) {
		snprintf(user, sizeof user, "user%d", i);
		assert_int_equal(webconfig_check(wc, user, "secret"), WC_ALLOW);
	}
	assert_int_equal(wc->ncache, WC_CACHE);
	assert_int_equal(wc->bcrypt_runs, WC_CACHE + 8);
	/* The newest is cached; the first was replaced: checked again. */
	snprintf(user, sizeof user, "user%d", WC_CACHE + 7);
	assert_int_equal(webconfig_check(wc, user, "secret"), WC_ALLOW);
	assert_int_equal(wc->bcrypt_runs, WC_CACHE + 8);
	assert_int_equal(webconfig_check(wc, "user0", "secret"), WC_ALLOW);
	assert_int_equal(wc->bcrypt_runs, WC_CACHE + 9);
	webconfig_free(wc);
}

static void a_spent_budget_answers_busy_but_cached_pass(void **state)
{
	(void)state;
	struct webconfig *wc = users();
	assert_int_equal(webconfig_check(wc, "alice", "secret"), WC_ALLOW);
	unsigned long runs = wc->bcrypt_runs;
	wc->budget.tokens = -1000;     /* 4000 s of refill away */
	assert_int_equal(webconfig_check(wc, "alice", "wrong"), WC_BUSY);
	assert_int_equal(webconfig_check(wc, "bob", "hunter2"), WC_BUSY);
	assert_int_equal(wc->bcrypt_runs, runs);
	assert_int_equal(webconfig_check(wc, "alice", "secret"), WC_ALLOW);
	webconfig_free(wc);

	/* The bucket: WC_BCRYPT_SHARE of a second per second, at most
	 * WC_BCRYPT_BURST. */
	struct wc_budget b = { WC_BCRYPT_BURST, 100.0 };
	assert_true(wc_budget_allows(&b, 100.0));
	wc_budget_spend(&b, WC_BCRYPT_BURST + 0.5);
	assert_false(wc_budget_allows(&b, 100.0));
	assert_false(wc_budget_allows(&b, 101.9));     /* -0.5 + 0.475 */
	assert_true(wc_budget_allows(&b, 102.1));      /* -0.5 + 0.525 */
	assert_true(wc_budget_allows(&b, 1e6));
	assert_true(b.tokens <= WC_BCRYPT_BURST);
	assert_false(wc_budget_allows(&b, 50.0) && b.tokens > WC_BCRYPT_BURST);
}

static void non_loopback_without_protection_warns(void **state)
{
	(void)state;
	struct sockaddr_storage ss;
	char err[512], line[512];
	assert_int_equal(addr_parse("127.0.0.1:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(NULL, &ss, "127.0.0.1:9464", line, sizeof line), 0);
	assert_int_equal(addr_parse("127.9.9.9:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(NULL, &ss, "x", line, sizeof line), 0);
	assert_int_equal(addr_parse("[::1]:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(NULL, &ss, "x", line, sizeof line), 0);
	assert_int_equal(addr_parse("[::ffff:127.0.0.1]:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(NULL, &ss, "x", line, sizeof line), 0);

	assert_int_equal(addr_parse("0.0.0.0:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(NULL, &ss, "0.0.0.0:9464", line, sizeof line), 1);
	assert_non_null(strstr(line, "--serve 0.0.0.0:9464: plain HTTP and no authentication"));
	assert_null(strchr(line, '\n'));
	struct webconfig *wc = users();
	assert_int_equal(webconfig_warning(wc, &ss, "0.0.0.0:9464", line, sizeof line), 1);
	assert_non_null(strstr(line, "basic auth over plain HTTP"));
	webconfig_free(wc);
	char text[512];
	snprintf(text, sizeof text, "tls_server_config:\n  cert_file: server.crt\n"
		 "  key_file: server.key\n");
	wc = load_text(text, err, sizeof err);
	assert_non_null(wc);
	assert_int_equal(addr_parse("[::]:9464", &ss, err, sizeof err), 0);
	assert_int_equal(webconfig_warning(wc, &ss, "[::]:9464", line, sizeof line), 1);
	assert_non_null(strstr(line, "TLS without basic_auth_users"));
	webconfig_free(wc);
	snprintf(text, sizeof text, "tls_server_config:\n  cert_file: server.crt\n"
		 "  key_file: server.key\nbasic_auth_users:\n  alice: %s\n", hash_b);
	wc = load_text(text, err, sizeof err);
	assert_non_null(wc);
	assert_int_equal(webconfig_warning(wc, &ss, "[::]:9464", line, sizeof line), 0);
	webconfig_free(wc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_good_file_is_read_whole),
		cmocka_unit_test(an_empty_file_is_plain_http_without_auth),
		cmocka_unit_test(each_mistake_is_one_line),
		cmocka_unit_test(right_passwords_pass_once_checked),
		cmocka_unit_test(the_cache_is_bounded),
		cmocka_unit_test(a_spent_budget_answers_busy_but_cached_pass),
		cmocka_unit_test(non_loopback_without_protection_warns),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

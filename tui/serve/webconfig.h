/*
 * webconfig: `ymtop --serve ADDR:PORT --web-config FILE`, the exporter's
 * TLS and basic authentication, configured by node_exporter's web
 * configuration file (Prometheus exporter-toolkit's format), so that one
 * file serves both:
 *
 *   tls_server_config:
 *     cert_file: server.crt        # or cert: inline PEM
 *     key_file: server.key         # or key: inline PEM
 *     client_auth_type: RequireAndVerifyClientCert
 *     client_ca_file: ca.crt
 *     client_allowed_sans: [scraper.example.org]
 *     min_version: TLS12           # TLS10 TLS11 TLS12 (default) TLS13
 *     max_version: TLS13
 *     cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
 *     curve_preferences: [X25519, CurveP256]
 *     prefer_server_cipher_suites: true
 *   http_server_config:
 *     http2: true                  # accepted; ymtop serves HTTP/1.1
 *     headers:                     # security headers on every answer
 *       Strict-Transport-Security: max-age=31536000
 *   basic_auth_users:
 *     alice: $2y$10$...            # bcrypt hashes
 *
 * Relative file names are relative to the file's directory, as in
 * exporter-toolkit.  The file is read again at the first request after it
 * changed (serve.c: its inode, size or times; exporter-toolkit reads it at
 * every request): users, headers and client_allowed_sans apply at once;
 * what libmicrohttpd took at the start (certificate, key, client CA,
 * client_auth_type, versions and suites) needs a restart, and a file that
 * changes it is not applied.  Everything else is refused in one
 * line that names the file, its line and the key: unknown keys, duplicate
 * keys, unknown cipher-suite, curve, version or header names, missing or unreadable files, certificates
 * and keys GnuTLS does not load or that do not match, hashes that are not
 * bcrypt.
 *
 * TLS is libmicrohttpd's (GnuTLS); libmicrohttpd asks for a client
 * certificate whenever it has a client CA but verifies nothing, so
 * webconfig_gate() verifies it with GnuTLS (gnutls_certificate_verify_peers)
 * at each request as client_auth_type says (with client_allowed_sans, a
 * verified certificate must also name one of them, exactly, among its DNS
 * names, e-mail addresses, IP addresses or URIs), and a refused client gets a
 * TLS alert and a closed connection, no HTTP answer.  GnuTLS takes
 * cipher suites apart into key exchanges, ciphers and MACs: with
 * cipher_suites, the suites offered are the combinations of those of the
 * suites named, and TLS 1.3 gets only the ciphers named too (stricter than
 * Go, which ignores cipher_suites for TLS 1.3; with no AEAD suite named,
 * TLS 1.3 is not offered: it would have no cipher).
 *
 * Basic auth: a request without the right user and password is answered
 * 401 with WWW-Authenticate.  A bcrypt check costs ~60 ms of CPU at cost
 * 10, so:
 *   - successful checks are cached (WC_CACHE entries, the oldest
 *     replaced), keyed by SHA-256 of user, hash and password: a scraper
 *     pays one bcrypt, then a hash and a constant-time compare per scrape;
 *     the password itself is never kept;
 *   - at most one bcrypt check runs at a time (a mutex), and bcrypt checks
 *     may use at most WC_BCRYPT_SHARE of one core over time (a bucket of
 *     CPU seconds, WC_BCRYPT_BURST deep): beyond, uncached credentials are
 *     answered 429 with Retry-After without a check, so a client sending
 *     wrong passwords cannot pin a core, while cached ones still pass;
 *   - an unknown user costs a bcrypt check like a known one (against the
 *     first user's hash), so that timing does not tell users apart;
 *   - hashes are compared in constant time.
 */
#ifndef YMTOP_WEBCONFIG_H
#define YMTOP_WEBCONFIG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#define WC_CACHE         64
#define WC_BCRYPT_SHARE  0.25  /* of one core, over time */
#define WC_BCRYPT_BURST  1.0   /* CPU seconds of bcrypt at once */
#define WC_FILE_MAX      (1024 * 1024)  /* bytes of any file read */
#define WC_MAP_MAX       4096  /* entries of a mapping (users) */
#define WC_MHD_ITEMS     6     /* webconfig_mhd's items, END included */
#define WC_HEADERS       5     /* headers a file may set */

enum wc_client_auth {
	WC_NO_CLIENT_CERT,
	WC_REQUEST_CLIENT_CERT,
	WC_REQUIRE_ANY_CLIENT_CERT,
	WC_VERIFY_CLIENT_CERT_IF_GIVEN,
	WC_REQUIRE_AND_VERIFY_CLIENT_CERT,
};

enum wc_verdict { WC_ALLOW, WC_DENY, WC_BUSY };

struct wc_user {
	char *name;
	char *hash;              /* bcrypt, validated */
};

/* CPU seconds of bcrypt that may still be spent: refilled at
 * WC_BCRYPT_SHARE per second up to WC_BCRYPT_BURST. */
struct wc_budget {
	double tokens;
	double last;             /* monotonic seconds of the last refill */
};

struct webconfig {
	int tls;                 /* a certificate and key: serve HTTPS */
	char *cert, *key;        /* PEM, NUL-terminated */
	char *client_ca;         /* PEM, or NULL */
	enum wc_client_auth client_auth;
	char *priorities;        /* GnuTLS priority string, checked */
	char **sans;             /* client_allowed_sans */
	size_t nsans;
	char *headers[WC_HEADERS];  /* http_server_config.headers, or NULL */
	struct wc_user *users;
	size_t nusers;
	int http2_set;

	/* Basic auth's state, under lock. */
	pthread_mutex_t lock;
	uint8_t cache[WC_CACHE][32];
	size_t ncache, next;     /* entries used; the next one replaced */
	struct wc_budget budget;
	void *crypt_data;        /* struct crypt_data (large: kept) */
	unsigned long bcrypt_runs, cache_hits;   /* for tests and curiosity */
};

/* Read and check FILE; NULL with one line in err ("FILE:LINE: ..."). */
struct webconfig *webconfig_load(const char *path, char *err, size_t len);
void webconfig_free(struct webconfig *wc);
/* a and b give libmicrohttpd the same TLS settings (webconfig_mhd) and
 * ask the same of clients' certificates but for client_allowed_sans. */
int webconfig_same_tls(const struct webconfig *a, const struct webconfig *b);

/* Basic auth: is this user with this password allowed?  WC_BUSY: not
 * checked, the bcrypt budget is spent (answer 429).  Thread-safe. */
enum wc_verdict webconfig_check(struct webconfig *wc, const char *user,
				const char *password);

/* The budget alone, for tests: may a check start at now (seconds)? */
int wc_budget_allows(struct wc_budget *b, double now);
void wc_budget_spend(struct wc_budget *b, double secs);

/* libmicrohttpd's flags and options for wc (MHD_USE_TLS and the PEMs),
 * items ending with MHD_OPTION_END; they point into wc, which must outlive
 * the daemon. */
void webconfig_mhd(const struct webconfig *wc, unsigned *flags,
		   struct MHD_OptionItem items[WC_MHD_ITEMS]);

/* The file's headers (http_server_config.headers) added to r; wc may be
 * NULL. */
void webconfig_add_headers(const struct webconfig *wc, struct MHD_Response *r);

/* At each request, before anything is answered: the client certificate
 * and basic auth.  1 when the request was answered or refused (return
 * *ret from the handler), 0 when it may be served. */
int webconfig_gate(struct webconfig *wc, struct MHD_Connection *c,
		   enum MHD_Result *ret);

/* One line of warning for serving at ss (shown as addr) as wc (NULL: no
 * --web-config) says, or 0 with nothing in buf: loopback, or TLS with
 * basic auth or verified client certificates. */
int webconfig_warning(const struct webconfig *wc, const struct sockaddr_storage *ss,
		      const char *addr, char *buf, size_t len);

#endif

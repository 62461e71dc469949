/*
 * webconfig: the exporter's TLS and basic authentication from
 * node_exporter's web configuration file (see webconfig.h).
 */
#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <yaml.h>

#include "util/clock.h"
#include "webconfig.h"

/* ---- reading ---- */

/* The whole of a file of at most WC_FILE_MAX bytes, NUL-terminated;
 * NULL with errno (EFBIG: too large). */
static char *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = malloc(WC_FILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, WC_FILE_MAX + 1, f) : 0;
	int bad = !buf || ferror(f);
	int e = errno;
	fclose(f);
	if (bad || n > WC_FILE_MAX) {
		free(buf);
		errno = bad ? (e ? e : EIO) : EFBIG;
		return NULL;
	}
	buf[n] = 0;
	if (size)
		*size = n;
	return buf;
}

/* What the parse of one file carries: its name, directory, document and
 * the first error. */
struct parse {
	const char *path;
	char dir[PATH_MAX];
	yaml_document_t doc;
	char *err;
	size_t len;
	/* tls_server_config as written, before it is checked as a whole */
	const char *cert_file, *key_file, *ca_file, *cert, *key;
	yaml_node_t *cert_file_n, *key_file_n, *ca_file_n, *tls_n;
	int any_tls, auth_set;
	int min_v, max_v;        /* 0 to 3: TLS 1.0 to 1.3 */
	char kx[256], ciphers[256], macs[128], groups[256];
	int prefer_server;
	int aead;                /* an AEAD suite named: usable by TLS 1.3 */
	struct webconfig *wc;    /* for one_san */
	yaml_node_t *sans_n;
};

__attribute__((format(printf, 3, 4)))
static int fail(struct parse *p, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n)
		snprintf(p->err, p->len, "--web-config %s:%lu: %s", p->path,
			 (unsigned long)n->start_mark.line + 1, msg);
	else
		snprintf(p->err, p->len, "--web-config %s: %s", p->path, msg);
	return -1;
}

static yaml_node_t *node(struct parse *p, int id)
{
	return yaml_document_get_node(&p->doc, id);
}

static int is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *v = (const char *)n->data.scalar.value;
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
	       !strcmp(v, "NULL");
}

/* A scalar's text (no NUL inside), or -1 with the error. */
static int scalar(struct parse *p, const yaml_node_t *n, const char *key,
		  const char **out)
{
	if (n->type != YAML_SCALAR_NODE)
		return fail(p, n, "%s must be a string", key);
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return fail(p, n, "%s holds a NUL character", key);
	*out = (const char *)n->data.scalar.value;
	return 0;
}

static int boolean(struct parse *p, const yaml_node_t *n, const char *key, int *out)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "on", "On" };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "off", "Off" };
	const char *v;
	if (scalar(p, n, key, &v) != 0)
		return -1;
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (!strcmp(v, yes[i]))
			return *out = 1, 0;
		if (!strcmp(v, no[i]))
			return *out = 0, 0;
	}
	return fail(p, n, "%s must be true or false, not '%s'", key, v);
}

/* The mapping's pairs, each key a scalar given once (a quadratic check:
 * hence WC_MAP_MAX); -1 otherwise.  An
 * empty value ("key:") is an empty mapping. */
static int mapping(struct parse *p, const yaml_node_t *n, const char *what)
{
	if (is_null(n))
		return 0;
	if (n->type != YAML_MAPPING_NODE)
		return fail(p, n, "%s must be a mapping of keys to values", what);
	if (n->data.mapping.pairs.top - n->data.mapping.pairs.start > WC_MAP_MAX)
		return fail(p, n, "%s has more than %d entries", what, WC_MAP_MAX);
	for (yaml_node_pair_t *a = n->data.mapping.pairs.start;
	     a < n->data.mapping.pairs.top; a++) {
		const yaml_node_t *k = node(p, a->key);
		const char *ks;
		if (scalar(p, k, "a key", &ks) != 0)
			return -1;
		for (yaml_node_pair_t *b = n->data.mapping.pairs.start; b < a; b++)
			if (!strcmp((const char *)node(p, b->key)->data.scalar.value, ks))
				return fail(p, k, "%s: '%s' is given twice", what, ks);
	}
	return 0;
}

#define EACH_PAIR(p, n, k, v, ks)                                                    \
	for (yaml_node_pair_t *pair_ = is_null(n) ? NULL : (n)->data.mapping.pairs.start; \
	     pair_ && pair_ < (n)->data.mapping.pairs.top; pair_++)                   \
		for (yaml_node_t *k = node(p, pair_->key), *v = node(p, pair_->value); k; \
		     k = NULL)                                                          \
			for (const char *ks = (const char *)k->data.scalar.value; ks; ks = NULL)

/* "a:b" appended to a GnuTLS priority part, once. */
static void add_part(char *buf, size_t len, const char *part)
{
	char tok[64];
	snprintf(tok, sizeof tok, ":+%s:", part);
	char have[512];
	snprintf(have, sizeof have, "%s:", buf);
	if (strstr(have, tok))
		return;
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, ":+%s", part);
}

/* Go's TLS 1.2 cipher-suite names (crypto/tls) as GnuTLS's key exchange,
 * cipher and MAC; TLS 1.3's names are accepted and, as in Go, change
 * nothing. */
static const struct suite {
	const char *go, *kx, *cipher, *mac;
} suites[] = {
	{ "TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1" },
	{ "TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1" },
	{ "TLS_RSA_WITH_AES_128_CBC_SHA256", "RSA", "AES-128-CBC", "SHA256" },
	{ "TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD" },
	{ "TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA", "AES-128-CBC", "SHA256" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA", "AES-128-CBC", "SHA256" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_AES_128_GCM_SHA256", NULL, NULL, NULL },
	{ "TLS_AES_256_GCM_SHA384", NULL, NULL, NULL },
	{ "TLS_CHACHA20_POLY1305_SHA256", NULL, NULL, NULL },
};

/* Names Go knows but only as insecure: refused. */
static const char *const insecure[] = {
	"TLS_RSA_WITH_RC4_128_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
	"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
	"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
};

static const struct { const char *go, *gnutls; } curves[] = {
	{ "CurveP256", "GROUP-SECP256R1" }, { "CurveP384", "GROUP-SECP384R1" },
	{ "CurveP521", "GROUP-SECP521R1" }, { "X25519", "GROUP-X25519" },
};

static const char *const versions[] = { "TLS10", "TLS11", "TLS12", "TLS13" };

static const char *const auth_types[] = {
	"NoClientCert", "RequestClientCert", "RequireAnyClientCert",
	"VerifyClientCertIfGiven", "RequireAndVerifyClientCert",
};

static int version(struct parse *p, const yaml_node_t *n, const char *key, int *out)
{
	const char *v;
	if (scalar(p, n, key, &v) != 0)
		return -1;
	for (int i = 0; i < 4; i++)
		if (!strcmp(v, versions[i]))
			return *out = i, 0;
	return fail(p, n, "%s must be TLS10, TLS11, TLS12 or TLS13, not '%s'", key, v);
}

static int seq_each(struct parse *p, const yaml_node_t *n, const char *key,
		    int (*each)(struct parse *, const yaml_node_t *, const char *))
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(p, n, "%s must be a list", key);
	for (yaml_node_item_t *i = n->data.sequence.items.start;
	     i < n->data.sequence.items.top; i++) {
		const yaml_node_t *e = node(p, *i);
		const char *v;
		if (scalar(p, e, key, &v) != 0 || each(p, e, v) != 0)
			return -1;
	}
	return 0;
}

static int one_suite(struct parse *p, const yaml_node_t *n, const char *v)
{
	for (size_t i = 0; i < sizeof suites / sizeof *suites; i++) {
		if (strcmp(v, suites[i].go))
			continue;
		if (suites[i].kx) {
			add_part(p->kx, sizeof p->kx, suites[i].kx);
			add_part(p->ciphers, sizeof p->ciphers, suites[i].cipher);
			add_part(p->macs, sizeof p->macs, suites[i].mac);
			p->aead |= !strcmp(suites[i].mac, "AEAD");
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof insecure / sizeof *insecure; i++)
		if (!strcmp(v, insecure[i]))
			return fail(p, n, "cipher suite '%s' is insecure: ymtop does not offer it", v);
	return fail(p, n, "unknown cipher suite '%s' (Go's names, such as "
		    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", v);
}

static int one_san(struct parse *p, const yaml_node_t *n, const char *v)
{
	if (!*v)
		return fail(p, n, "client_allowed_sans: an empty name");
	if (!(p->wc->sans[p->wc->nsans] = strdup(v)))
		return fail(p, NULL, "out of memory");
	p->wc->nsans++;
	return 0;
}

static int one_curve(struct parse *p, const yaml_node_t *n, const char *v)
{
	for (size_t i = 0; i < sizeof curves / sizeof *curves; i++)
		if (!strcmp(v, curves[i].go)) {
			add_part(p->groups, sizeof p->groups, curves[i].gnutls);
			return 0;
		}
	return fail(p, n, "unknown curve '%s' (CurveP256, CurveP384, CurveP521 or X25519)", v);
}

/* A file name relative to the web config's directory. */
static char *read_named(struct parse *p, const yaml_node_t *n, const char *key,
			const char *name)
{
	char full[PATH_MAX];
	if (!*name) {
		fail(p, n, "%s is empty", key);
		return NULL;
	}
	int w = name[0] == '/' ? snprintf(full, sizeof full, "%s", name)
			       : snprintf(full, sizeof full, "%s/%.*s", p->dir,
					  (int)(sizeof full - 1), name);
	if (w < 0 || (size_t)w >= sizeof full) {
		fail(p, n, "%s: the file name is too long", key);
		return NULL;
	}
	char *s = slurp(full, NULL);
	if (!s)
		fail(p, n, "%s %s: %s", key, full,
		     errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
	return s;
}

static int tls_config(struct parse *p, struct webconfig *wc, yaml_node_t *t)
{
	if (mapping(p, t, "tls_server_config") != 0)
		return -1;
	p->tls_n = t;
	EACH_PAIR(p, t, k, v, ks) {
		p->any_tls = 1;
		if (!strcmp(ks, "cert_file")) {
			if (scalar(p, v, ks, &p->cert_file) != 0)
				return -1;
			p->cert_file_n = v;
		} else if (!strcmp(ks, "key_file")) {
			if (scalar(p, v, ks, &p->key_file) != 0)
				return -1;
			p->key_file_n = v;
		} else if (!strcmp(ks, "client_ca_file")) {
			if (scalar(p, v, ks, &p->ca_file) != 0)
				return -1;
			p->ca_file_n = v;
		} else if (!strcmp(ks, "cert")) {
			if (scalar(p, v, ks, &p->cert) != 0)
				return -1;
		} else if (!strcmp(ks, "key")) {
			if (scalar(p, v, ks, &p->key) != 0)
				return -1;
		} else if (!strcmp(ks, "client_auth_type")) {
			const char *a;
			if (scalar(p, v, ks, &a) != 0)
				return -1;
			size_t i = 0;
			while (i < 5 && strcmp(a, auth_types[i]))
				i++;
			if (i == 5)
				return fail(p, v, "client_auth_type must be NoClientCert, "
					    "RequestClientCert, RequireAnyClientCert, "
					    "VerifyClientCertIfGiven or RequireAndVerifyClientCert, "
					    "not '%s'", a);
			wc->client_auth = (enum wc_client_auth)i;
			p->auth_set = 1;
		} else if (!strcmp(ks, "min_version")) {
			if (version(p, v, ks, &p->min_v) != 0)
				return -1;
		} else if (!strcmp(ks, "max_version")) {
			if (version(p, v, ks, &p->max_v) != 0)
				return -1;
		} else if (!strcmp(ks, "cipher_suites")) {
			if (seq_each(p, v, ks, one_suite) != 0)
				return -1;
		} else if (!strcmp(ks, "curve_preferences")) {
			if (seq_each(p, v, ks, one_curve) != 0)
				return -1;
		} else if (!strcmp(ks, "prefer_server_cipher_suites")) {
			if (boolean(p, v, ks, &p->prefer_server) != 0)
				return -1;
		} else if (!strcmp(ks, "client_allowed_sans")) {
			if (v->type == YAML_SEQUENCE_NODE) {
				size_t n = (size_t)(v->data.sequence.items.top -
						    v->data.sequence.items.start);
				if (!(wc->sans = calloc(n + 1, sizeof *wc->sans)))
					return fail(p, NULL, "out of memory");
			}
			p->wc = wc;
			if (seq_each(p, v, ks, one_san) != 0)
				return -1;
			p->sans_n = v;
		} else {
			return fail(p, k, "unknown key '%s' in tls_server_config", ks);
		}
	}
	return 0;
}

/* tls_server_config as a whole, as exporter-toolkit checks it, then the
 * PEMs through GnuTLS and the priority string. */
static int tls_check(struct parse *p, struct webconfig *wc)
{
	if (!p->any_tls)
		return 0;
	if (p->cert_file && p->cert)
		return fail(p, p->tls_n, "tls_server_config: cert_file and cert are both given");
	if (p->key_file && p->key)
		return fail(p, p->tls_n, "tls_server_config: key_file and key are both given");
	if (!p->cert_file && !p->cert)
		return fail(p, p->tls_n, "tls_server_config needs cert_file (or cert)");
	if (!p->key_file && !p->key)
		return fail(p, p->tls_n, "tls_server_config needs key_file (or key)");
	if (p->ca_file && wc->client_auth == WC_NO_CLIENT_CERT)
		return fail(p, p->ca_file_n, "client_ca_file is given without a "
			    "client_auth_type (such as RequireAndVerifyClientCert)");
	if (wc->client_auth != WC_NO_CLIENT_CERT && !p->ca_file)
		return fail(p, p->tls_n, "client_auth_type %s needs client_ca_file "
			    "(ymtop asks for client certificates signed by those CAs)",
			    auth_types[wc->client_auth]);
	if (p->sans_n && wc->client_auth != WC_REQUIRE_AND_VERIFY_CLIENT_CERT &&
	    wc->client_auth != WC_VERIFY_CLIENT_CERT_IF_GIVEN)
		return fail(p, p->sans_n, "client_allowed_sans needs client_auth_type "
			    "RequireAndVerifyClientCert or VerifyClientCertIfGiven");
	if (p->min_v > p->max_v)
		return fail(p, p->tls_n, "min_version %s is above max_version %s",
			    versions[p->min_v], versions[p->max_v]);
	wc->tls = 1;
	wc->cert = p->cert ? strdup(p->cert) : read_named(p, p->cert_file_n, "cert_file", p->cert_file);
	if (!wc->cert)
		return p->cert ? fail(p, NULL, "out of memory") : -1;
	wc->key = p->key ? strdup(p->key) : read_named(p, p->key_file_n, "key_file", p->key_file);
	if (!wc->key)
		return p->key ? fail(p, NULL, "out of memory") : -1;
	if (p->ca_file && !(wc->client_ca = read_named(p, p->ca_file_n, "client_ca_file",
						       p->ca_file)))
		return -1;

	gnutls_certificate_credentials_t cred;
	if (gnutls_certificate_allocate_credentials(&cred) < 0)
		return fail(p, NULL, "GnuTLS cannot allocate credentials");
	gnutls_datum_t c = { (unsigned char *)wc->cert, (unsigned)strlen(wc->cert) };
	gnutls_datum_t k = { (unsigned char *)wc->key, (unsigned)strlen(wc->key) };
	int r = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
	int ok = r >= 0;
	if (!ok)
		fail(p, p->cert_file_n ? p->cert_file_n : p->tls_n,
		     "the certificate and key do not load: %s", gnutls_strerror(r));
	if (ok && wc->client_ca) {
		gnutls_datum_t a = { (unsigned char *)wc->client_ca,
				     (unsigned)strlen(wc->client_ca) };
		r = gnutls_certificate_set_x509_trust_mem(cred, &a, GNUTLS_X509_FMT_PEM);
		if (r <= 0) {
			ok = 0;
			fail(p, p->ca_file_n, "client_ca_file %s: %s", p->ca_file,
			     r < 0 ? gnutls_strerror(r) : "no PEM certificate in it");
		}
	}
	gnutls_certificate_free_credentials(cred);
	if (!ok)
		return -1;

	/* The priority string: GnuTLS's NORMAL narrowed as the file says.
	 * GnuTLS agrees on TLS 1.3 before it looks for a cipher: without an
	 * AEAD suite named, TLS 1.3 is left out (it would fail handshakes). */
	int max_v = p->kx[0] && !p->aead && p->max_v > 2 ? 2 : p->max_v;
	if (p->min_v > max_v)
		return fail(p, p->tls_n, "min_version TLS13 needs an AEAD suite in cipher_suites");
	char prio[1024];
	int n = snprintf(prio, sizeof prio, "NORMAL:-VERS-ALL");
	for (int v = p->min_v; v <= max_v; v++)
		n += snprintf(prio + n, sizeof prio - (size_t)n, ":+VERS-TLS1.%d", v);
	if (p->kx[0])
		n += snprintf(prio + n, sizeof prio - (size_t)n, ":-KX-ALL%s:-CIPHER-ALL%s:-MAC-ALL%s",
			      p->kx, p->ciphers, p->macs);
	if (p->groups[0])
		n += snprintf(prio + n, sizeof prio - (size_t)n, ":-GROUP-ALL%s", p->groups);
	if (p->prefer_server)
		snprintf(prio + n, sizeof prio - (size_t)n, ":%%SERVER_PRECEDENCE");
	gnutls_priority_t pc;
	const char *where = NULL;
	r = gnutls_priority_init(&pc, prio, &where);
	if (r < 0)
		return fail(p, p->tls_n, "GnuTLS refuses the TLS settings (%s at '%s')",
			    gnutls_strerror(r), where ? where : "?");
	gnutls_priority_deinit(pc);
	wc->priorities = strdup(prio);
	return wc->priorities ? 0 : fail(p, NULL, "out of memory");
}

/* The response headers exporter-toolkit lets a file set: security
 * headers only. */
static const char *const header_names[WC_HEADERS] = {
	"Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options",
	"X-XSS-Protection", "Content-Security-Policy",
};

static int headers_config(struct parse *p, struct webconfig *wc, yaml_node_t *h)
{
	if (mapping(p, h, "http_server_config.headers") != 0)
		return -1;
	EACH_PAIR(p, h, k, v, ks) {
		size_t i = 0;
		while (i < WC_HEADERS && strcasecmp(ks, header_names[i]))
			i++;
		if (i == WC_HEADERS)
			return fail(p, k, "http_server_config.headers: '%s' cannot be set "
				    "(Strict-Transport-Security, X-Content-Type-Options, "
				    "X-Frame-Options, X-XSS-Protection or "
				    "Content-Security-Policy)", ks);
		const char *val;
		if (scalar(p, v, ks, &val) != 0)
			return -1;
		for (const char *c = val; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				return fail(p, v, "header %s: a control character in its value", ks);
		free(wc->headers[i]);
		if (!(wc->headers[i] = strdup(val)))
			return fail(p, NULL, "out of memory");
	}
	return 0;
}

void webconfig_add_headers(const struct webconfig *wc, struct MHD_Response *r)
{
	for (size_t i = 0; wc && i < WC_HEADERS; i++)
		if (wc->headers[i])
			MHD_add_response_header(r, header_names[i], wc->headers[i]);
}

static int http_config(struct parse *p, struct webconfig *wc, yaml_node_t *h)
{
	if (mapping(p, h, "http_server_config") != 0)
		return -1;
	EACH_PAIR(p, h, k, v, ks) {
		int b;
		if (!strcmp(ks, "http2")) {
			if (boolean(p, v, ks, &b) != 0)
				return -1;
			wc->http2_set = 1;
		} else if (!strcmp(ks, "headers")) {
			if (headers_config(p, wc, v) != 0)
				return -1;
		} else {
			return fail(p, k, "unknown key '%s' in http_server_config", ks);
		}
	}
	return 0;
}

/* "$2a$", "$2b$" or "$2y$", a cost of 04 to 31, 53 characters of bcrypt's
 * base64, and libxcrypt agrees. */
static int bcrypt_hash(const char *h)
{
	static const char b64[] =
		"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	if (strlen(h) != 60 || h[0] != '$' || h[1] != '2' ||
	    (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' ||
	    h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9' || h[6] != '$')
		return 0;
	int cost = (h[4] - '0') * 10 + (h[5] - '0');
	if (cost < 4 || cost > 31)
		return 0;
	for (int i = 7; i < 60; i++)
		if (!strchr(b64, h[i]))
			return 0;
	int c = crypt_checksalt(h);
	return c == CRYPT_SALT_OK || c == CRYPT_SALT_METHOD_LEGACY;
}

static int users_config(struct parse *p, struct webconfig *wc, yaml_node_t *u)
{
	if (mapping(p, u, "basic_auth_users") != 0)
		return -1;
	size_t n = is_null(u) ? 0 : (size_t)(u->data.mapping.pairs.top - u->data.mapping.pairs.start);
	if (!n)
		return 0;
	wc->users = calloc(n, sizeof *wc->users);
	if (!wc->users)
		return fail(p, NULL, "out of memory");
	EACH_PAIR(p, u, k, v, ks) {
		const char *h;
		if (!*ks)
			return fail(p, k, "basic_auth_users: an empty user name");
		if (strchr(ks, ':'))
			return fail(p, k, "basic_auth_users: user '%s' has a ':' (basic auth "
				    "cannot send it)", ks);
		if (scalar(p, v, "a password hash", &h) != 0)
			return -1;
		if (!bcrypt_hash(h))
			return fail(p, v, "basic_auth_users: user '%s': not a bcrypt hash "
				    "($2y$, $2b$ or $2a$, cost, 53 characters; "
				    "htpasswd -nBC 10 USER makes one)", ks);
		struct wc_user *w = &wc->users[wc->nusers++];
		w->name = strdup(ks);
		w->hash = strdup(h);
		if (!w->name || !w->hash)
			return fail(p, NULL, "out of memory");
	}
	return 0;
}

static int document(struct parse *p, struct webconfig *wc)
{
	yaml_node_t *root = yaml_document_get_root_node(&p->doc);
	if (!root)
		return 0;              /* an empty file: plain HTTP, no auth */
	if (mapping(p, root, "the file") != 0)
		return -1;
	yaml_node_t *tls = NULL;
	EACH_PAIR(p, root, k, v, ks) {
		if (!strcmp(ks, "tls_server_config")) {
			if (tls_config(p, wc, v) != 0)
				return -1;
			tls = v;
		} else if (!strcmp(ks, "http_server_config")) {
			if (http_config(p, wc, v) != 0)
				return -1;
		} else if (!strcmp(ks, "basic_auth_users")) {
			if (users_config(p, wc, v) != 0)
				return -1;
		} else {
			return fail(p, k, "unknown key '%s' (tls_server_config, "
				    "http_server_config or basic_auth_users)", ks);
		}
	}
	return tls ? tls_check(p, wc) : 0;
}

struct webconfig *webconfig_load(const char *path, char *err, size_t len)
{
	struct parse p;
	memset(&p, 0, sizeof p);
	p.path = path;
	p.err = err;
	p.len = len;
	p.min_v = 2;
	p.max_v = 3;
	p.prefer_server = 1;
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(p.dir, sizeof p.dir, ".");
	else if (slash == path)
		snprintf(p.dir, sizeof p.dir, "/");
	else
		snprintf(p.dir, sizeof p.dir, "%.*s", (int)(slash - path), path);

	size_t size;
	char *text = slurp(path, &size);
	if (!text) {
		fail(&p, NULL, "%s", errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
		return NULL;
	}
	struct webconfig *wc = calloc(1, sizeof *wc);
	yaml_parser_t yp;
	if (!wc || !yaml_parser_initialize(&yp)) {
		free(text);
		free(wc);
		fail(&p, NULL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&wc->lock, NULL);
	yaml_parser_set_input_string(&yp, (const unsigned char *)text, size);
	int rc;
	if (!yaml_parser_load(&yp, &p.doc)) {
		snprintf(err, len, "--web-config %s:%lu: not YAML: %s", path,
			 (unsigned long)yp.problem_mark.line + 1,
			 yp.problem ? yp.problem : "parse error");
		rc = -1;
	} else {
		rc = document(&p, wc);
		yaml_document_delete(&p.doc);
	}
	yaml_parser_delete(&yp);
	free(text);
	if (rc == 0 && wc->nusers && !(wc->crypt_data = calloc(1, sizeof(struct crypt_data))))
		rc = fail(&p, NULL, "out of memory");
	if (rc != 0) {
		webconfig_free(wc);
		return NULL;
	}
	wc->budget.tokens = WC_BCRYPT_BURST;
	wc->budget.last = clock_mono_s();
	return wc;
}

void webconfig_free(struct webconfig *wc)
{
	if (!wc)
		return;
	for (size_t i = 0; i < wc->nusers; i++) {
		free(wc->users[i].name);
		free(wc->users[i].hash);
	}
	free(wc->users);
	for (size_t i = 0; i < wc->nsans; i++)
		free(wc->sans[i]);
	for (size_t i = 0; i < WC_HEADERS; i++)
		free(wc->headers[i]);
	free(wc->sans);
	if (wc->key)
		explicit_bzero(wc->key, strlen(wc->key));
	free(wc->key);
	free(wc->cert);
	free(wc->client_ca);
	free(wc->priorities);
	free(wc->crypt_data);
	pthread_mutex_destroy(&wc->lock);
	free(wc);
}

/* ---- basic auth ---- */

/* This thread's CPU time, in seconds: what bcrypt costs. */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int wc_budget_allows(struct wc_budget *b, double now)
{
	if (now > b->last) {
		b->tokens += (now - b->last) * WC_BCRYPT_SHARE;
		if (b->tokens > WC_BCRYPT_BURST)
			b->tokens = WC_BCRYPT_BURST;
		b->last = now;
	}
	return b->tokens > 0;
}

void wc_budget_spend(struct wc_budget *b, double secs)
{
	b->tokens -= secs;
}

/* Equal strings, in a time that depends on their lengths only. */
static int ct_equal(const char *a, const char *b)
{
	size_t n = strlen(a);
	if (n != strlen(b))
		return 0;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* HMAC-SHA-256 of user, hash and password under a key drawn once per
 * process: the cache holds no password, nor anything to test guesses
 * against outside this process. */
static uint8_t hmac_secret[32];
static int hmac_have;

static void hmac_init(void)
{
	hmac_have = gnutls_rnd(GNUTLS_RND_KEY, hmac_secret, sizeof hmac_secret) == 0;
}

static int cache_key(const char *user, const char *hash, const char *pw, uint8_t out[32])
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	gnutls_hmac_hd_t h;
	pthread_once(&once, hmac_init);
	if (!hmac_have ||
	    gnutls_hmac_init(&h, GNUTLS_MAC_SHA256, hmac_secret, sizeof hmac_secret) < 0)
		return -1;
	gnutls_hmac(h, user, strlen(user) + 1);
	gnutls_hmac(h, hash, strlen(hash) + 1);
	gnutls_hmac(h, pw, strlen(pw));
	gnutls_hmac_deinit(h, out);
	return 0;
}

static int cache_has(const struct webconfig *wc, const uint8_t key[32])
{
	int found = 0;
	for (size_t i = 0; i < wc->ncache; i++) {
		unsigned char d = 0;
		for (int j = 0; j < 32; j++)
			d |= wc->cache[i][j] ^ key[j];
		found |= d == 0;
	}
	return found;
}

static void cache_put(struct webconfig *wc, const uint8_t key[32])
{
	memcpy(wc->cache[wc->next], key, 32);
	wc->next = (wc->next + 1) % WC_CACHE;
	if (wc->ncache < WC_CACHE)
		wc->ncache++;
}

enum wc_verdict webconfig_check(struct webconfig *wc, const char *user,
				const char *password)
{
	if (!wc->nusers)
		return WC_ALLOW;
	const struct wc_user *u = NULL;
	for (size_t i = 0; i < wc->nusers; i++)
		if (!strcmp(wc->users[i].name, user))
			u = &wc->users[i];
	/* An unknown user costs a check too (against the first hash). */
	const char *hash = u ? u->hash : wc->users[0].hash;
	uint8_t key[32];
	int keyed = cache_key(user, hash, password, key) == 0;
	enum wc_verdict v = WC_DENY;
	pthread_mutex_lock(&wc->lock);
	if (u && keyed && cache_has(wc, key)) {
		wc->cache_hits++;
		v = WC_ALLOW;
	} else if (!wc_budget_allows(&wc->budget, clock_mono_s())) {
		v = WC_BUSY;
	} else {
		double t0 = thread_cpu_s();
		const char *out = crypt_rn(password, hash, wc->crypt_data,
					   (int)sizeof(struct crypt_data));
		wc_budget_spend(&wc->budget, thread_cpu_s() - t0);
		wc->bcrypt_runs++;
		if (out && ct_equal(out, hash) && u) {
			v = WC_ALLOW;
			if (keyed)
				cache_put(wc, key);
		}
		explicit_bzero(wc->crypt_data, sizeof(struct crypt_data));
	}
	pthread_mutex_unlock(&wc->lock);
	explicit_bzero(key, sizeof key);
	return v;
}

/* ---- libmicrohttpd ---- */

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

int webconfig_same_tls(const struct webconfig *a, const struct webconfig *b)
{
	return a->tls == b->tls && same_str(a->cert, b->cert) &&
	       same_str(a->key, b->key) && same_str(a->client_ca, b->client_ca) &&
	       a->client_auth == b->client_auth &&
	       same_str(a->priorities, b->priorities);
}

void webconfig_mhd(const struct webconfig *wc, unsigned *flags,
		   struct MHD_OptionItem items[WC_MHD_ITEMS])
{
	size_t n = 0;
	if (wc && wc->tls) {
		*flags |= MHD_USE_TLS;
		items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, wc->cert };
		items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, wc->key };
		items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
						      wc->priorities };
		/* With a trust list libmicrohttpd asks for a client certificate. */
		if (wc->client_ca && wc->client_auth != WC_NO_CLIENT_CERT)
			items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0,
							      wc->client_ca };
	}
	items[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
}

/* Does the (verified) client certificate name one of client_allowed_sans
 * among its DNS names, e-mail addresses, IP addresses or URIs, exactly as
 * written (exporter-toolkit's rule)? */
static int san_allowed(const struct webconfig *wc, const gnutls_datum_t *der)
{
	gnutls_x509_crt_t crt;
	int found = 0;
	if (gnutls_x509_crt_init(&crt) < 0)
		return 0;
	if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) < 0) {
		gnutls_x509_crt_deinit(crt);
		return 0;
	}
	for (unsigned i = 0; !found && i < 1024; i++) {
		char name[1024], text[INET6_ADDRSTRLEN];
		size_t len = sizeof name - 1;
		int type = gnutls_x509_crt_get_subject_alt_name(crt, i, name, &len, NULL);
		if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (type < 0)
			continue;      /* too long, or unreadable: not a match */
		const char *v = name;
		if (type == GNUTLS_SAN_IPADDRESS) {
			if (len != 4 && len != 16)
				continue;
			if (!inet_ntop(len == 4 ? AF_INET : AF_INET6, name, text, sizeof text))
				continue;
			v = text;
		} else if (type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_RFC822NAME ||
			   type == GNUTLS_SAN_URI) {
			name[len] = 0;
			if (strlen(name) != len)
				continue;      /* a NUL inside: never equal */
		} else {
			continue;
		}
		for (size_t j = 0; j < wc->nsans; j++)
			found |= !strcmp(v, wc->sans[j]);
	}
	gnutls_x509_crt_deinit(crt);
	return found;
}

/* The client certificate as client_auth_type says; 0: refuse. */
static int client_cert_ok(const struct webconfig *wc, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
	if (!s)
		return 0;
	unsigned n = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
	int ok;
	if (!certs || !n) {
		ok = wc->client_auth == WC_REQUEST_CLIENT_CERT ||
		     wc->client_auth == WC_VERIFY_CLIENT_CERT_IF_GIVEN;
	} else if (wc->client_auth == WC_REQUEST_CLIENT_CERT ||
		   wc->client_auth == WC_REQUIRE_ANY_CLIENT_CERT) {
		ok = 1;
	} else {
		/* Signed by client_ca_file, in its validity, for TLS clients. */
		unsigned status = 0;
		gnutls_typed_vdata_st purpose = { GNUTLS_DT_KEY_PURPOSE_OID,
						  (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0 };
		ok = gnutls_certificate_verify_peers(s, &purpose, 1, &status) >= 0 &&
		     status == 0 && (!wc->nsans || san_allowed(wc, &certs[0]));
	}
	if (!ok)
		gnutls_alert_send(s, GNUTLS_AL_FATAL, certs && n ? GNUTLS_A_BAD_CERTIFICATE
								  : GNUTLS_A_CERTIFICATE_REQUIRED);
	return ok;
}

static enum MHD_Result refuse(const struct webconfig *wc, struct MHD_Connection *c,
			      enum wc_verdict v)
{
	static const char unauthorized[] = "Unauthorized\n";
	static const char busy[] = "too many password checks: retry later\n";
	const char *body = v == WC_BUSY ? busy : unauthorized;
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	webconfig_add_headers(wc, r);
	enum MHD_Result ret;
	if (v == WC_BUSY) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
		ret = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, r);
	} else {
		ret = MHD_queue_basic_auth_fail_response(c, "ymtop", r);
	}
	MHD_destroy_response(r);
	return ret;
}

int webconfig_gate(struct webconfig *wc, struct MHD_Connection *c, enum MHD_Result *ret)
{
	if (wc->tls && wc->client_auth != WC_NO_CLIENT_CERT && !client_cert_ok(wc, c)) {
		*ret = MHD_NO;         /* closed, after the alert */
		return 1;
	}
	if (!wc->nusers)
		return 0;
	char *pw = NULL;
	char *user = MHD_basic_auth_get_username_password(c, &pw);
	enum wc_verdict v = user && pw ? webconfig_check(wc, user, pw) : WC_DENY;
	if (pw) {
		explicit_bzero(pw, strlen(pw));
		MHD_free(pw);
	}
	if (user)
		MHD_free(user);
	if (v == WC_ALLOW)
		return 0;
	*ret = refuse(wc, c, v);
	return 1;
}

/* ---- the warning ---- */

static int loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
	if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
		return 1;
	return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
}

int webconfig_warning(const struct webconfig *wc, const struct sockaddr_storage *ss,
		      const char *addr, char *buf, size_t len)
{
	buf[0] = 0;
	if (loopback(ss))
		return 0;
	int tls = wc && wc->tls;
	int auth = wc && (wc->nusers || wc->client_auth == WC_REQUIRE_AND_VERIFY_CLIENT_CERT);
	if (tls && auth)
		return 0;
	if (!tls && !auth)
		snprintf(buf, len, "warning: --serve %s: plain HTTP and no authentication: "
			 "anyone who can reach it reads the function names and heap "
			 "figures of every process served (see --web-config)", addr);
	else if (!tls)
		snprintf(buf, len, "warning: --serve %s: basic auth over plain HTTP: "
			 "passwords and figures cross the network in the clear "
			 "(add tls_server_config to --web-config)", addr);
	else
		snprintf(buf, len, "warning: --serve %s: TLS without basic_auth_users or "
			 "RequireAndVerifyClientCert: anyone who can reach it reads the "
			 "function names and heap figures of every process served", addr);
	return 1;
}

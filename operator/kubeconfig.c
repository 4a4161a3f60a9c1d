/*
 * kubeconfig.c - where the API server is and who we are: a kubeconfig file
 * (clusters, users, contexts as kubectl writes them) or a pod's in-cluster
 * service account. Parsing is pure and unit-tested; only _load and
 * _in_cluster touch the filesystem and environment.
 *
 * Supported user credentials: client certificate and key (file or
 * embedded data), a static token, a token file. Not supported (refused
 * with a message rather than silently ignored): auth-provider, exec
 * plugins, username/password.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "operator/kube.h"
#include "common/base64.h"

#define KUBECONFIG_MAX (4u << 20)

void gaz_kube_config_release(struct gaz_kube_config *c)
{
	free(c->server);
	free(c->ca_file);
	free(c->ca_data);
	free(c->cert_file);
	free(c->cert_data);
	free(c->key_file);
	free(c->key_data);
	free(c->token);
	free(c->token_file);
	free(c->namespace);
	memset(c, 0, sizeof(*c));
}

int gaz_base64_decode(const char *in, size_t len, char **out, size_t *out_len,
		      struct gaz_status *st)
{
	size_t n, bad = 0;
	uint8_t *b;
	int rc = gaz_b64_decode(in, len, GAZ_B64_STD | GAZ_B64_PAD | GAZ_B64_SPACE, &b, &n, &bad);

	if (rc == GAZ_ENOMEM)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if (rc)
		return gaz_status_set(st, GAZ_EINVAL, "invalid base64 at byte %zu (white space dropped)", bad);
	*out = (char *)b;
	if (out_len)
		*out_len = n;
	return 0;
}

/* ---- a libyaml document as a tree -------------------------------------- */

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *k = scalar(yaml_document_get_node(d, p->key));
		if (k && !strcmp(k, key))
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

static const char *map_str(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	return scalar(map_get(d, m, key));
}

/* The `sub` mapping of the entry named `name` in list `list` of the root
 * (clusters/users/contexts entries are {name: x, <sub>: {...}}). */
static yaml_node_t *named(yaml_document_t *d, const char *list, const char *sub, const char *name)
{
	yaml_node_t *seq = map_get(d, yaml_document_get_root_node(d), list);

	if (!seq || seq->type != YAML_SEQUENCE_NODE || !name)
		return NULL;
	for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
	     i++) {
		yaml_node_t *e = yaml_document_get_node(d, *i);
		const char *n = map_str(d, e, "name");
		if (n && !strcmp(n, name))
			return map_get(d, e, sub);
	}
	return NULL;
}

/* ---- fields ------------------------------------------------------------ */

static int set_path(char **dst, const char *dir, const char *p)
{
	if (!p || !*p)
		return 0;
	if (p[0] == '/' || !dir || !*dir)
		*dst = strdup(p);
	else if (asprintf(dst, "%s/%s", dir, p) < 0)
		*dst = NULL;
	return *dst ? 0 : GAZ_ENOMEM;
}

static int set_data(char **dst, size_t *len, const char *b64, const char *what,
		    struct gaz_status *st)
{
	int rc;

	if (!b64 || !*b64)
		return 0;
	if ((rc = gaz_base64_decode(b64, strlen(b64), dst, len, st)))
		gaz_status_prefix(st, "%s: ", what);
	return rc;
}

static int read_cluster(yaml_document_t *d, yaml_node_t *c, const char *dir,
			struct gaz_kube_config *out, struct gaz_status *st)
{
	const char *server = map_str(d, c, "server"), *insecure;
	int rc;

	if (!server || !*server)
		return gaz_status_set(st, GAZ_EINVAL, "kubeconfig cluster has no server");
	if (!(out->server = strdup(server)))
		return GAZ_ENOMEM;
	while (out->server[0] && out->server[strlen(out->server) - 1] == '/')
		out->server[strlen(out->server) - 1] = '\0';
	insecure = map_str(d, c, "insecure-skip-tls-verify");
	out->insecure = insecure && !strcmp(insecure, "true");
	if ((rc = set_data(&out->ca_data, &out->ca_len, map_str(d, c, "certificate-authority-data"),
			   "certificate-authority-data", st)))
		return rc;
	return set_path(&out->ca_file, dir, map_str(d, c, "certificate-authority"));
}

static int read_user(yaml_document_t *d, yaml_node_t *u, const char *dir,
		     struct gaz_kube_config *out, struct gaz_status *st)
{
	static const char *const refused[] = {"auth-provider", "exec", "username", "password"};
	const char *tok = map_str(d, u, "token");
	int rc;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (map_get(d, u, refused[i]))
			return gaz_status_set(st, GAZ_EINVAL,
					      "kubeconfig user uses %s, which is not supported", refused[i]);
	if ((rc = set_data(&out->cert_data, &out->cert_len,
			   map_str(d, u, "client-certificate-data"), "client-certificate-data", st)) ||
	    (rc = set_data(&out->key_data, &out->key_len, map_str(d, u, "client-key-data"),
			   "client-key-data", st)) ||
	    (rc = set_path(&out->cert_file, dir, map_str(d, u, "client-certificate"))) ||
	    (rc = set_path(&out->key_file, dir, map_str(d, u, "client-key"))) ||
	    (rc = set_path(&out->token_file, dir, map_str(d, u, "tokenFile"))))
		return rc;
	if (tok && *tok && !(out->token = strdup(tok)))
		return GAZ_ENOMEM;
	return 0;
}

static int read_context(yaml_document_t *d, const char *dir, const char *context,
			struct gaz_kube_config *out, struct gaz_status *st)
{
	yaml_node_t *ctx, *cluster, *user = NULL;
	const char *ns, *cname, *uname;
	int rc;

	if (!context || !*context)
		context = map_str(d, yaml_document_get_root_node(d), "current-context");
	if (!context || !*context)
		return gaz_status_set(st, GAZ_EINVAL, "kubeconfig has no current-context");
	if (!(ctx = named(d, "contexts", "context", context)))
		return gaz_status_set(st, GAZ_EINVAL, "kubeconfig has no context \"%s\"", context);
	cname = map_str(d, ctx, "cluster");
	uname = map_str(d, ctx, "user");
	if (!(cluster = named(d, "clusters", "cluster", cname)))
		return gaz_status_set(st, GAZ_EINVAL, "kubeconfig has no cluster \"%s\"",
				      cname ? cname : "");
	if (uname && *uname && !(user = named(d, "users", "user", uname)))
		return gaz_status_set(st, GAZ_EINVAL, "kubeconfig has no user \"%s\"", uname);
	if ((rc = read_cluster(d, cluster, dir, out, st)) ||
	    (user && (rc = read_user(d, user, dir, out, st))))
		return rc;
	ns = map_str(d, ctx, "namespace");
	if (ns && *ns && !(out->namespace = strdup(ns)))
		return GAZ_ENOMEM;
	return 0;
}

int gaz_kube_config_parse(const char *yaml, size_t len, const char *dir, const char *context,
			  struct gaz_kube_config *out, struct gaz_status *st)
{
	yaml_parser_t p;
	yaml_document_t d;
	int rc;

	if (!yaml_parser_initialize(&p))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&p, (const unsigned char *)yaml, len);
	if (!yaml_parser_load(&p, &d)) {
		rc = gaz_status_set(st, GAZ_EINVAL, "kubeconfig: line %zu: %s",
				    p.problem_mark.line + 1, p.problem ? p.problem : "malformed YAML");
		yaml_parser_delete(&p);
		return rc;
	}
	if (!yaml_document_get_root_node(&d))
		rc = gaz_status_set(st, GAZ_EINVAL, "kubeconfig is empty");
	else
		rc = read_context(&d, dir, context, out, st);
	if (rc == GAZ_ENOMEM)
		gaz_status_set(st, rc, "out of memory");
	if (rc)
		gaz_kube_config_release(out);
	yaml_document_delete(&d);
	yaml_parser_delete(&p);
	return rc;
}

/* Reads a whole small file into a NUL-terminated heap buffer. */
static int slurp(const char *path, char **out, size_t *len, struct gaz_status *st)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;

	if (!f)
		return gaz_status_set(st, errno == ENOENT ? GAZ_ENOTFOUND : GAZ_EIO, "reading %s: %s",
				      path, strerror(errno));
	if (!(buf = malloc(KUBECONFIG_MAX + 1))) {
		fclose(f);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	n = fread(buf, 1, KUBECONFIG_MAX + 1, f);
	if (ferror(f) || n > KUBECONFIG_MAX) {
		fclose(f);
		free(buf);
		return gaz_status_set(st, GAZ_EIO, "reading %s: %s", path,
				      n > KUBECONFIG_MAX ? "file too large" : "read error");
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int gaz_kube_config_load(const char *path, const char *context, struct gaz_kube_config *out,
			 struct gaz_status *st)
{
	char *text = NULL, *dir = NULL, *def = NULL, *slash;
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	size_t len = 0;
	int rc;

	if ((!path || !*path) && env && *env) {
		def = strndup(env, strcspn(env, ":"));
		path = def;
	} else if ((!path || !*path) && home && asprintf(&def, "%s/.kube/config", home) >= 0) {
		path = def;
	}
	if (!path || !*path) {
		free(def);
		return gaz_status_set(st, GAZ_ENOTFOUND, "no kubeconfig: set --kubeconfig or KUBECONFIG");
	}
	if ((rc = slurp(path, &text, &len, st)) == 0 && (dir = strdup(path))) {
		slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		rc = gaz_kube_config_parse(text, len, slash ? dir : ".", context, out, st);
		if (rc)
			gaz_status_prefix(st, "%s: ", path);
	} else if (!rc) {
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	free(text);
	free(dir);
	free(def);
	return rc;
}

int gaz_kube_config_in_cluster(const char *sa_dir, struct gaz_kube_config *out,
			       struct gaz_status *st)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	struct stat sb;
	char *ns = NULL;
	size_t len = 0;

	if (!sa_dir || !*sa_dir)
		sa_dir = GAZ_KUBE_SA_DIR;
	if (!host || !*host || !port || !*port)
		return gaz_status_set(st, GAZ_ENOTFOUND,
				      "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are unset");
	if (asprintf(&out->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
		     port) < 0 ||
	    asprintf(&out->token_file, "%s/token", sa_dir) < 0 ||
	    asprintf(&out->ca_file, "%s/ca.crt", sa_dir) < 0) {
		gaz_kube_config_release(out);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	}
	if (stat(out->token_file, &sb)) {
		gaz_status_set(st, GAZ_ENOTFOUND, "service account token %s: %s", out->token_file,
			       strerror(errno));
		gaz_kube_config_release(out);
		return GAZ_ENOTFOUND;
	}
	if (stat(out->ca_file, &sb)) {
		free(out->ca_file);
		out->ca_file = NULL;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	if (slurp(path, &ns, &len, NULL) == 0) {
		ns[strcspn(ns, "\r\n")] = '\0';
		out->namespace = ns;
	}
	return 0;
}

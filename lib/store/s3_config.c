/*
 * s3_config.c - resolves an s3:// store's configuration: bucket and
 * prefix from the URL, Gazette's query parameters (profile, endpoint,
 * region, acl, storageclass, sse, ssekmskeyid) and our one (stalltimeout,
 * docs/decisions.md), credentials and region
 * from the environment and the AWS shared files, and the addressing style.
 *
 * Addressing, as Gazette's s3 store configures aws-sdk-go: with an
 * `endpoint` every request is path-style (<endpoint>/<bucket>/<key>),
 * because bucket-named virtual hosts do not work with explicit endpoints;
 * without one, AWS's regional virtual host <bucket>.s3.<region>.amazonaws.com
 * (s3.amazonaws.com for us-east-1), falling back to path-style for bucket
 * names that cannot be a TLS host name (dots, upper case).
 *
 * Only static credentials are resolved (environment, shared files). The
 * instance-metadata and web-identity providers of the AWS SDKs are not.
 *
 * Reads files and the environment; no network. Runs at store open only.
 */
#include "store/s3_int.h"

#include "common/clock.h"
#include "common/duration.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_empty(const char *v)
{
	return strdup(v ? v : "");
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* Trims ASCII space from both ends of s in place; returns s. */
static char *trim(char *s)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	while (isspace((unsigned char)*s))
		s++;
	return s;
}

int gaz__s3_ini_lookup(const char *path, const char *section, const char *key, char *out,
		       size_t cap)
{
	FILE *f = fopen(path, "r");
	char line[8192];
	bool in = false;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *l = trim(line), *eq;
		if (*l == '#' || *l == ';' || !*l)
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (end) {
				*end = 0;
				in = !strcmp(trim(l + 1), section);
			}
			continue;
		}
		if (!in || !(eq = strchr(l, '=')))
			continue;
		*eq = 0;
		if (strcmp(trim(l), key))
			continue;
		found = snprintf(out, cap, "%s", trim(eq + 1)) < (int)cap ? 1 : -1;
	}
	fclose(f);
	return found;
}

/* The shared credentials and config files' paths. */
static void shared_paths(char *cred, char *conf, size_t cap)
{
	const char *home = env("HOME");

	snprintf(cred, cap, "%s", env("AWS_SHARED_CREDENTIALS_FILE") ? env("AWS_SHARED_CREDENTIALS_FILE") : "");
	snprintf(conf, cap, "%s", env("AWS_CONFIG_FILE") ? env("AWS_CONFIG_FILE") : "");
	if (!*cred && home)
		snprintf(cred, cap, "%s/.aws/credentials", home);
	if (!*conf && home)
		snprintf(conf, cap, "%s/.aws/config", home);
}

/* Looks `key` up for `profile` in the credentials file ("[p]"), then the
 * config file ("[profile p]", or "[default]"). */
static int profile_lookup(const char *profile, const char *key, char *out, size_t cap)
{
	char cred[1024], conf[1024], sect[300];
	int rc;

	shared_paths(cred, conf, sizeof(cred));
	if (*cred && (rc = gaz__s3_ini_lookup(cred, profile, key, out, cap)) != 0)
		return rc;
	if (strcmp(profile, "default"))
		snprintf(sect, sizeof(sect), "profile %s", profile);
	else
		snprintf(sect, sizeof(sect), "default");
	return *conf ? gaz__s3_ini_lookup(conf, sect, key, out, cap) : 0;
}

static const char *default_profile(void)
{
	return env("AWS_PROFILE") ? env("AWS_PROFILE")
				  : env("AWS_DEFAULT_PROFILE") ? env("AWS_DEFAULT_PROFILE") : "default";
}

static bool creds_from_env(struct gaz_s3_config *c)
{
	const char *ak = env("AWS_ACCESS_KEY_ID") ? env("AWS_ACCESS_KEY_ID") : env("AWS_ACCESS_KEY");
	const char *sk = env("AWS_SECRET_ACCESS_KEY") ? env("AWS_SECRET_ACCESS_KEY") : env("AWS_SECRET_KEY");
	struct gaz_sigv4_creds *k = &c->creds;

	if (!ak || !sk || strlen(ak) >= sizeof(k->access_key) || strlen(sk) >= sizeof(k->secret_key))
		return false;
	snprintf(k->access_key, sizeof(k->access_key), "%s", ak);
	snprintf(k->secret_key, sizeof(k->secret_key), "%s", sk);
	snprintf(k->session_token, sizeof(k->session_token), "%s",
		 env("AWS_SESSION_TOKEN") ? env("AWS_SESSION_TOKEN") : "");
	snprintf(c->creds_source, sizeof(c->creds_source), "environment");
	return true;
}

static bool creds_from_profile(struct gaz_s3_config *c, const char *profile)
{
	struct gaz_sigv4_creds *k = &c->creds;

	if (profile_lookup(profile, "aws_access_key_id", k->access_key, sizeof(k->access_key)) != 1 ||
	    profile_lookup(profile, "aws_secret_access_key", k->secret_key, sizeof(k->secret_key)) != 1)
		return false;
	if (profile_lookup(profile, "aws_session_token", k->session_token, sizeof(k->session_token)) != 1)
		k->session_token[0] = 0;
	snprintf(c->creds_source, sizeof(c->creds_source), "shared files, profile %.40s", profile);
	return true;
}

static int resolve_creds(struct gaz_s3_config *c, struct gaz_status *st)
{
	const char *profile = *c->profile ? c->profile : default_profile();
	bool ok;

	if (*c->profile)
		ok = creds_from_profile(c, c->profile); /* named: no fallback */
	else
		ok = creds_from_env(c) || creds_from_profile(c, profile);
	if (!ok)
		return gaz_status_set(st, GAZ_EPERM,
				      "fetching AWS credentials for profile \"%s\": none found (set "
				      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add the profile to "
				      "the shared credentials file)", profile);
	return 0;
}

static int resolve_region(struct gaz_s3_config *c, const char *param, struct gaz_status *st)
{
	const char *profile = *c->profile ? c->profile : default_profile();
	char buf[128];
	const char *r = param && *param ? param : env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");

	if (!r && profile_lookup(profile, "region", buf, sizeof(buf)) == 1 && *buf)
		r = buf;
	if (!r)
		return gaz_status_set(st, GAZ_EINVAL,
				      "missing AWS region configuration for profile \"%s\" (add "
				      "&region=... to the store URL, or set AWS_REGION)", profile);
	for (const char *p = r; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-')
			return gaz_status_set(st, GAZ_EINVAL, "invalid AWS region \"%.64s\"", r);
	return (c->region = strdup(r)) ? 0 : GAZ_ENOMEM;
}

/* A bucket usable as a TLS virtual host: lowercase, digits, '-', 3..63. */
static bool dns_bucket(const char *b)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return false;
	for (; *b; b++)
		if (!islower((unsigned char)*b) && !isdigit((unsigned char)*b) && *b != '-')
			return false;
	return true;
}

/* Splits the `endpoint` parameter ("http://h:p", or "h:p", which means
 * https as in the AWS SDK) into base_url and host. */
static int resolve_endpoint(struct gaz_s3_config *c, struct gaz_status *st)
{
	const char *e = c->endpoint, *auth, *slash;

	char *base;
	size_t n;

	if (strstr(e, "://") && strncmp(e, "http://", 7) && strncmp(e, "https://", 8))
		return gaz_status_set(st, GAZ_EINVAL, "s3 endpoint \"%s\" must be http(s)://host[:port]", e);
	if (asprintf(&base, "%s%s", strstr(e, "://") ? "" : "https://", e) < 0)
		return GAZ_ENOMEM;
	n = strlen(base);
	while (n && base[n - 1] == '/' && n > (size_t)(strstr(base, "://") - base) + 3)
		base[--n] = 0;
	auth = strstr(base, "://") + 3;
	slash = strchr(auth, '/');
	if (!*auth || strchr(auth, '?') || strchr(auth, '#') || slash) {
		free(base);
		return gaz_status_set(st, GAZ_EINVAL,
				      "s3 endpoint \"%s\" must be http(s)://host[:port] (no path)", e);
	}
	c->base_url = base;
	c->host = strdup(auth);
	c->path_style = true;
	return c->host ? 0 : GAZ_ENOMEM;
}

static int resolve_addressing(struct gaz_s3_config *c, struct gaz_status *st)
{
	bool us_east_1 = !strcmp(c->region, "us-east-1");
	int rc;

	if (*c->endpoint)
		rc = resolve_endpoint(c, st);
	else if (dns_bucket(c->bucket)) {
		rc = asprintf(&c->host, us_east_1 ? "%s.s3.amazonaws.com" : "%s.s3.%s.amazonaws.com",
			      c->bucket, c->region) < 0 ? GAZ_ENOMEM : 0;
	} else {
		c->path_style = true;
		rc = asprintf(&c->host, us_east_1 ? "s3.amazonaws.com" : "s3.%s.amazonaws.com",
			      c->region) < 0 ? GAZ_ENOMEM : 0;
	}
	if (rc)
		return rc;
	if (!c->base_url && asprintf(&c->base_url, "https://%s", c->host) < 0)
		return GAZ_ENOMEM;
	if (c->path_style)
		return asprintf(&c->path_prefix, "/%s", c->bucket) < 0 ? GAZ_ENOMEM : 0;
	return (c->path_prefix = strdup("")) ? 0 : GAZ_ENOMEM;
}

/* The `stalltimeout` parameter: a Go duration of whole seconds within
 * [1s, GAZ_S3_STALL_MAX_S] (curl counts a stall in seconds), default
 * GAZ_S3_STALL_S. Not Gazette's: its SDK has no such setting. */
static int resolve_stall(struct gaz_s3_config *c, const char *v, struct gaz_status *st)
{
	int64_t ns;

	c->stall_s = GAZ_S3_STALL_S;
	if (!v)
		return 0;
	if (gaz_duration_parse(v, &ns, NULL) || ns % GAZ_NS_PER_S || ns < GAZ_NS_PER_S ||
	    ns > (int64_t)GAZ_S3_STALL_MAX_S * GAZ_NS_PER_S)
		return gaz_status_set(st, GAZ_EINVAL,
				      "s3 store parameter stalltimeout \"%.64s\": want whole seconds from "
				      "1s to 1h, as \"30s\"", v);
	c->stall_s = (long)(ns / GAZ_NS_PER_S);
	return 0;
}

int gaz__s3_config_resolve(const struct gaz_store *s, struct gaz_s3_config *c,
			   struct gaz_status *st)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->bucket = strdup(s->url.host);
	c->prefix = strdup(s->url.path + 1);
	c->profile = dup_or_empty(gaz_store_param(s, "profile"));
	c->endpoint = dup_or_empty(gaz_store_param(s, "endpoint"));
	c->acl = dup_or_empty(gaz_store_param(s, "acl"));
	c->storage_class = dup_or_empty(gaz_store_param(s, "storageclass"));
	c->sse = dup_or_empty(gaz_store_param(s, "sse"));
	c->sse_kms_key_id = dup_or_empty(gaz_store_param(s, "ssekmskeyid"));
	if (!c->bucket || !c->prefix || !c->profile || !c->endpoint || !c->acl ||
	    !c->storage_class || !c->sse || !c->sse_kms_key_id)
		rc = GAZ_ENOMEM;
	else if (!(rc = resolve_stall(c, gaz_store_param(s, "stalltimeout"), st)) &&
		 !(rc = resolve_creds(c, st)) && !(rc = resolve_region(c, gaz_store_param(s, "region"), st)))
		rc = resolve_addressing(c, st);
	if (rc == GAZ_ENOMEM)
		gaz_status_set(st, rc, "configuring s3 store: out of memory");
	if (rc)
		gaz__s3_config_release(c);
	return rc;
}

void gaz__s3_config_release(struct gaz_s3_config *c)
{
	char **strs[] = {&c->bucket, &c->prefix, &c->profile, &c->endpoint, &c->region, &c->acl,
			 &c->storage_class, &c->sse, &c->sse_kms_key_id, &c->base_url, &c->host,
			 &c->path_prefix};

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	memset(&c->creds, 0, sizeof(c->creds));
}

/*
 * kube.h - a small Kubernetes API client: configuration (kubeconfig or
 * in-cluster), JSON requests (GET, LIST, POST, PUT, PATCH, DELETE) and
 * watches, over libcurl (TLS with client certificates or bearer tokens)
 * and jansson. Only what gazette-operator needs; no typed models.
 *
 * Behaviour that client-go has and a C client must copy (k8s.md §5):
 *   - a service-account token file is re-read when its mtime or size
 *     changes, checked before every request (kubelet rotates bound tokens);
 *   - watches are newline-delimited JSON events read as they arrive; the
 *     caller (informer.c) relists on 410 Gone.
 *
 * Threads: a struct gaz_kube may be used by any number of threads at once;
 * each request uses its own curl easy handle on a shared connection and
 * TLS session cache. Every call blocks its thread.
 *
 * Errors: 0 for a 2xx answer; otherwise a negative GAZ_E* code with
 * "<METHOD> <path>: <http status> <reason>: <Status.message>" in st->msg
 * and the HTTP status in *http_status (0 when no answer arrived):
 *   404 -> GAZ_ENOTFOUND, 409 -> GAZ_EEXIST, 410 -> GAZ_ERANGE (expired),
 *   401/403 -> GAZ_EPERM, 422/400 -> GAZ_EINVAL, transport -> GAZ_EUNAVAIL,
 *   anything else -> GAZ_EPROTO.
 */
#ifndef GAZ_OPERATOR_KUBE_H
#define GAZ_OPERATOR_KUBE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"

/* Largest response body or single watch event accepted (bytes). */
#define GAZ_KUBE_BODY_MAX (64u << 20)

/* Where a pod's service-account credentials are mounted. */
#define GAZ_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* How to reach and authenticate to an API server. Every pointer is owned
 * (heap; NULL = unset) and freed by gaz_kube_config_release. A PEM "file"
 * and "data" form are exclusive; data wins when both are set. */
struct gaz_kube_config {
	char *server;         /* "https://127.0.0.1:6443", no trailing '/' */
	char *ca_file;        /* PEM CA bundle verifying the server */
	char *ca_data;        /* PEM text (decoded *-data fields) */
	size_t ca_len;
	char *cert_file, *cert_data; /* client certificate, PEM */
	size_t cert_len;
	char *key_file, *key_data;   /* client key, PEM */
	size_t key_len;
	char *token;          /* static bearer token */
	char *token_file;     /* bearer token re-read when the file changes */
	char *namespace;      /* context (or pod) namespace; NULL = none */
	bool insecure;        /* insecure-skip-tls-verify */
};

void gaz_kube_config_release(struct gaz_kube_config *c);

/* gaz_kube_config_parse reads kubeconfig text `yaml` (`len` bytes,
 * borrowed) with libyaml: the context named `context` (NULL or "" = the
 * current-context), its cluster (server, certificate-authority[-data],
 * insecure-skip-tls-verify) and user (client-certificate[-data],
 * client-key[-data], token, tokenFile) and namespace. Relative file paths
 * are taken relative to `dir` (the kubeconfig's directory; NULL = as
 * given); *-data fields are base64 and decoded. Auth providers and exec
 * plugins are refused (GAZ_EINVAL naming them). On success `*out` (zeroed
 * by the caller) owns everything. Errors: GAZ_EINVAL (malformed YAML, no
 * such context/cluster/user, no server, bad base64), GAZ_ENOMEM. Pure. */
int gaz_kube_config_parse(const char *yaml, size_t len, const char *dir, const char *context,
			  struct gaz_kube_config *out, struct gaz_status *st);

/* gaz_kube_config_load reads the kubeconfig file at `path` (NULL or "" =
 * $KUBECONFIG's first entry, else ~/.kube/config) and parses it as above.
 * GAZ_EIO if the file cannot be read. */
int gaz_kube_config_load(const char *path, const char *context, struct gaz_kube_config *out,
			 struct gaz_status *st);

/* gaz_kube_config_in_cluster builds a pod's configuration: server from
 * $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT (IPv6 hosts
 * bracketed), token file `<sa_dir>/token` (re-read on change), CA
 * `<sa_dir>/ca.crt`, namespace from `<sa_dir>/namespace` when readable.
 * `sa_dir` NULL = GAZ_KUBE_SA_DIR. GAZ_ENOTFOUND when the environment
 * variables are unset or the token file is missing. */
int gaz_kube_config_in_cluster(const char *sa_dir, struct gaz_kube_config *out,
			       struct gaz_status *st);

/* gaz_base64_decode decodes standard base64 (padding required, ASCII
 * whitespace ignored) into a new NUL-terminated heap buffer (*out, free
 * with free(); *out_len excludes the NUL). GAZ_EINVAL, GAZ_ENOMEM. */
int gaz_base64_decode(const char *in, size_t len, char **out, size_t *out_len,
		      struct gaz_status *st);

/* ---- the client ---------------------------------------------------------- */

struct gaz_kube;

/* gaz_kube_new makes a client that takes ownership of `cfg` (its contents
 * are moved; `cfg` is zeroed). `user_agent` is borrowed and copied.
 * `timeout_ms` bounds each non-watch request (0 = 30 s). Returns NULL with
 * st set (GAZ_EINVAL without a server, GAZ_ENOMEM). curl_global_init must
 * have been called. */
struct gaz_kube *gaz_kube_new(struct gaz_kube_config *cfg, const char *user_agent,
			      int64_t timeout_ms, struct gaz_status *st);
void gaz_kube_free(struct gaz_kube *k);

/* The namespace of the configuration (borrowed), or NULL. */
const char *gaz_kube_namespace(const struct gaz_kube *k);

/* gaz_kube_request sends `method` to `path` ("/apis/...?..."; borrowed)
 * with `body` (JSON text or NULL; borrowed) of `content_type` (NULL =
 * application/json). On a 2xx answer *out (may be NULL to discard)
 * receives the parsed JSON body (a new reference; json_null() for an
 * empty body). Errors as described at the top; *out is NULL on any error
 * (the Status message the server sent is in st). *http_status (may be
 * NULL) receives the status. */
int gaz_kube_request(struct gaz_kube *k, const char *method, const char *path,
		     const char *content_type, const char *body, json_t **out, long *http_status,
		     struct gaz_status *st);

/* gaz_kube_requestj is gaz_kube_request with a JSON body (borrowed),
 * serialised compactly. */
int gaz_kube_requestj(struct gaz_kube *k, const char *method, const char *path,
		      const char *content_type, const json_t *body, json_t **out,
		      long *http_status, struct gaz_status *st);

/* ---- watches ------------------------------------------------------------- */

enum gaz_kube_event_type {
	GAZ_KUBE_ADDED = 1,
	GAZ_KUBE_MODIFIED,
	GAZ_KUBE_DELETED,
	GAZ_KUBE_BOOKMARK,
	GAZ_KUBE_ERROR,
};

/* One decoded watch event. */
struct gaz_kube_event {
	enum gaz_kube_event_type type;
	json_t *object;                /* owned reference: the object, or the
	                                * Status of an ERROR event */
	const char *resource_version;  /* borrowed from object: its
	                                * metadata.resourceVersion, or NULL */
	long code;                     /* ERROR: Status.code (410 = expired) */
};

/* gaz_kube_event_parse decodes one watch line (`len` bytes, borrowed, no
 * newline) `{"type": ..., "object": {...}}`. On success `ev` holds a new
 * reference to the object (release with gaz_kube_event_release). Errors:
 * GAZ_EPROTO (not JSON, not an object, unknown type, missing object).
 * Pure. */
int gaz_kube_event_parse(const char *line, size_t len, struct gaz_kube_event *ev,
			 struct gaz_status *st);
void gaz_kube_event_release(struct gaz_kube_event *ev);

/* A framer splits a chunked watch body into lines, bounded: a line longer
 * than `max` bytes is an error. Blank lines are skipped. */
struct gaz_kube_lines {
	char *buf;
	size_t len, cap, max;
};

/* Called for each complete line (borrowed for the call; no newline).
 * A non-zero return stops the framer and is returned from feed. */
typedef int (*gaz_kube_line_fn)(void *arg, const char *line, size_t len);

/* gaz_kube_lines_feed appends `n` bytes and calls fn for each completed
 * line. Returns 0, fn's non-zero return, GAZ_ERANGE (a line over max),
 * GAZ_ENOMEM. Pure. Release with gaz_kube_lines_release. */
int gaz_kube_lines_feed(struct gaz_kube_lines *l, const char *data, size_t n, gaz_kube_line_fn fn,
			void *arg);
void gaz_kube_lines_release(struct gaz_kube_lines *l);

/* Called on the watching thread for each event, in order. `ev` is
 * borrowed for the call (take a json_incref to keep the object). A
 * non-zero return ends the watch; gaz_kube_watch returns it. */
typedef int (*gaz_kube_event_fn)(void *arg, const struct gaz_kube_event *ev);

/* gaz_kube_watch GETs `path` (which must carry watch=1 and the caller's
 * resourceVersion, timeoutSeconds and allowWatchBookmarks) and streams its
 * events to fn until the server ends the response (0), fn returns
 * non-zero (that value), `*stop` becomes true (GAZ_ECANCELLED, checked at
 * least every second), the connection fails or no byte arrives for
 * `idle_ms` (GAZ_EUNAVAIL), or the server answers non-2xx (errors as
 * gaz_kube_request; a 410 is GAZ_ERANGE). A malformed event line is
 * GAZ_EPROTO. */
int gaz_kube_watch(struct gaz_kube *k, const char *path, int64_t idle_ms, gaz_kube_event_fn fn,
		   void *arg, atomic_bool *stop, struct gaz_status *st);

/* ---- helpers -------------------------------------------------------------- */

/* gaz_kube_escape percent-encodes `s` for a query value or path segment
 * into a new heap string (free()), or NULL on OOM. */
char *gaz_kube_escape(const char *s);

/* gaz_kube_now_rfc3339 writes the current UTC time as "2006-01-02T15:04:05Z"
 * (buf >= 32 bytes). With `micro`, as MicroTime ("...05.000000Z"). */
char *gaz_kube_now_rfc3339(char *buf, size_t cap, bool micro);

/* gaz_kube_event_post records a core/v1 Event about `obj` (borrowed; its
 * apiVersion, kind, metadata.namespace/name/uid are referenced) with
 * `type` "Normal" or "Warning", a CamelCase `reason` and a message.
 * Best effort: failures are logged at debug level and not returned. */
void gaz_kube_event_post(struct gaz_kube *k, const json_t *obj, const char *type,
			 const char *reason, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

#endif

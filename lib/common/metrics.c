/*
 * metrics.c - Prometheus registry and text exposition (format 0.0.4).
 *
 * Invariants:
 *  - A family's children live in a fixed hash table of singly linked
 *    chains. Children are only ever prepended, under the family mutex, and
 *    published with a release store; readers walk chains lock-free with
 *    acquire loads. Nothing is unlinked until gaz_metrics_free.
 *  - A child's value is one 64-bit atomic word: an int64 or the bits of a
 *    double, by the family's kind. Histogram bucket counts are kept
 *    per bucket (not cumulative) plus a +Inf slot; render accumulates, and
 *    derives _count from the same reads so _count equals the +Inf bucket.
 *  - The registry's family array is kept sorted by name.
 *
 * Lock order: registry mutex, then a family mutex. Render hooks run with
 * no lock held.
 */
#include "common/metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"

#define CHILD_SLOTS 256
#define MAX_LABELS 16
#define MAX_HOOKS 16
#define MAX_BUCKETS 64

const double gaz_metrics_def_buckets[GAZ_METRICS_DEF_BUCKETS_N] = {
	.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
};

struct gaz_metric_child {
	_Atomic(struct gaz_metric_child *) next; /* hash chain */
	struct gaz_metric *fam;
	uint64_t hash;
	_Atomic uint64_t v;       /* int64, or double bits */
	_Atomic uint64_t sum;     /* histogram: double bits */
	_Atomic uint64_t *counts; /* histogram: nbuckets + 1 slots */
	char **values;            /* fam->nlabels strings */
};

struct gaz_metric {
	enum gaz_metric_type type;
	bool is_double;
	char *name, *help;
	size_t nlabels;
	char **labels;
	double *buckets;
	size_t nbuckets;
	pthread_mutex_t mu; /* creation of children; nchildren */
	size_t nchildren;
	_Atomic(struct gaz_metric_child *) slots[CHILD_SLOTS];
};

struct proc_children;

struct gaz_metrics {
	pthread_mutex_t mu; /* fams, hooks, proc */
	struct gaz_metric **fams;
	size_t nfams, capfams;
	struct {
		void (*fn)(void *);
		void *arg;
	} hooks[MAX_HOOKS];
	size_t nhooks;
	struct proc_children *proc; /* owned; children for the process collector */
	bool proc_claimed;          /* gaz_metrics_process ran or is running */
};

/* ---- values ------------------------------------------------------------- */

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

static double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

static void atomic_addf(_Atomic uint64_t *p, double d)
{
	uint64_t old = atomic_load_explicit(p, memory_order_relaxed);

	while (!atomic_compare_exchange_weak_explicit(p, &old, dbits(bitsd(old) + d),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void gaz_metric_add(struct gaz_metric_child *c, int64_t v)
{
	if (!c)
		return;
	if (c->fam->is_double)
		atomic_addf(&c->v, (double)v);
	else
		atomic_fetch_add_explicit(&c->v, (uint64_t)v, memory_order_relaxed);
}

void gaz_metric_inc(struct gaz_metric_child *c)
{
	gaz_metric_add(c, 1);
}

void gaz_metric_addf(struct gaz_metric_child *c, double v)
{
	if (!c)
		return;
	if (c->fam->is_double)
		atomic_addf(&c->v, v);
	else
		atomic_fetch_add_explicit(&c->v, (uint64_t)llround(v), memory_order_relaxed);
}

void gaz_metric_set(struct gaz_metric_child *c, int64_t v)
{
	if (!c)
		return;
	atomic_store_explicit(&c->v, c->fam->is_double ? dbits((double)v) : (uint64_t)v,
			      memory_order_relaxed);
}

void gaz_metric_setf(struct gaz_metric_child *c, double v)
{
	if (!c)
		return;
	atomic_store_explicit(&c->v, c->fam->is_double ? dbits(v) : (uint64_t)llround(v),
			      memory_order_relaxed);
}

void gaz_metric_observe(struct gaz_metric_child *c, double v)
{
	size_t i = 0;

	if (!c || !c->counts)
		return;
	while (i < c->fam->nbuckets && !(v <= c->fam->buckets[i]))
		i++;
	atomic_fetch_add_explicit(&c->counts[i], 1, memory_order_relaxed);
	atomic_addf(&c->sum, v);
}

double gaz_metric_value(const struct gaz_metric_child *c)
{
	uint64_t n = 0;

	if (!c)
		return 0;
	if (c->counts) {
		for (size_t i = 0; i <= c->fam->nbuckets; i++)
			n += atomic_load_explicit(&c->counts[i], memory_order_relaxed);
		return (double)n;
	}
	n = atomic_load_explicit(&c->v, memory_order_relaxed);
	return c->fam->is_double ? bitsd(n) : (double)(int64_t)n;
}

/* ---- children -------------------------------------------------------------- */

static uint64_t hash_values(const char *const *values, size_t n)
{
	uint64_t h = UINT64_C(1469598103934665603);

	for (size_t i = 0; i < n; i++) {
		for (const unsigned char *p = (const unsigned char *)values[i]; p && *p; p++)
			h = (h ^ *p) * UINT64_C(1099511628211);
		h = (h ^ 0xff) * UINT64_C(1099511628211);
	}
	return h;
}

static struct gaz_metric_child *chain_find(struct gaz_metric_child *c, uint64_t h,
					   const char *const *values, size_t n)
{
	for (; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
		size_t i = 0;
		if (c->hash != h)
			continue;
		while (i < n && !strcmp(c->values[i], values[i] ? values[i] : ""))
			i++;
		if (i == n)
			return c;
	}
	return NULL;
}

static void child_free(struct gaz_metric_child *c, size_t nlabels)
{
	if (!c)
		return;
	for (size_t i = 0; c->values && i < nlabels; i++)
		free(c->values[i]);
	free(c->values);
	free((void *)c->counts);
	free(c);
}

static struct gaz_metric_child *child_new(struct gaz_metric *m, uint64_t h,
					  const char *const *values)
{
	struct gaz_metric_child *c = calloc(1, sizeof(*c));

	if (!c || !(c->values = calloc(m->nlabels + 1, sizeof(char *))))
		goto fail;
	c->fam = m;
	c->hash = h;
	for (size_t i = 0; i < m->nlabels; i++)
		if (!(c->values[i] = strdup(values[i] ? values[i] : "")))
			goto fail;
	if (m->type == GAZ_METRIC_HISTOGRAM &&
	    !(c->counts = calloc(m->nbuckets + 1, sizeof(*c->counts))))
		goto fail;
	return c;
fail:
	child_free(c, m->nlabels);
	return NULL;
}

struct gaz_metric_child *gaz_metric_withv(struct gaz_metric *m, const char *const *values)
{
	_Atomic(struct gaz_metric_child *) *slot;
	struct gaz_metric_child *c;
	uint64_t h;

	if (!m)
		return NULL;
	h = hash_values(values, m->nlabels);
	slot = &m->slots[h % CHILD_SLOTS];
	c = chain_find(atomic_load_explicit(slot, memory_order_acquire), h, values, m->nlabels);
	if (c)
		return c;
	pthread_mutex_lock(&m->mu);
	c = chain_find(atomic_load_explicit(slot, memory_order_acquire), h, values, m->nlabels);
	if (!c && (c = child_new(m, h, values))) {
		atomic_store_explicit(&c->next, atomic_load_explicit(slot, memory_order_relaxed),
				      memory_order_relaxed);
		atomic_store_explicit(slot, c, memory_order_release);
		m->nchildren++;
	}
	pthread_mutex_unlock(&m->mu);
	return c;
}

struct gaz_metric_child *gaz_metric_with(struct gaz_metric *m, ...)
{
	const char *values[MAX_LABELS + 1] = {0};
	va_list ap;

	if (!m)
		return NULL;
	va_start(ap, m);
	for (size_t i = 0; i < m->nlabels; i++)
		values[i] = va_arg(ap, const char *);
	va_end(ap);
	return gaz_metric_withv(m, values);
}

/* ---- registry -------------------------------------------------------------- */

int gaz_metrics_new(struct gaz_metrics **out)
{
	struct gaz_metrics *r = calloc(1, sizeof(*r));

	if (!r)
		return GAZ_ENOMEM;
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

static struct gaz_metrics *default_reg;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	if (gaz_metrics_new(&default_reg))
		default_reg = NULL;
}

struct gaz_metrics *gaz_metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_reg;
}

static void family_free(struct gaz_metric *m)
{
	if (!m)
		return;
	for (size_t s = 0; s < CHILD_SLOTS; s++) {
		struct gaz_metric_child *c = atomic_load(&m->slots[s]), *next;
		for (; c; c = next) {
			next = atomic_load(&c->next);
			child_free(c, m->nlabels);
		}
	}
	for (size_t i = 0; m->labels && i < m->nlabels; i++)
		free(m->labels[i]);
	free(m->labels);
	free(m->buckets);
	free(m->name);
	free(m->help);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void gaz_metrics_free(struct gaz_metrics *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nfams; i++)
		family_free(r->fams[i]);
	free(r->fams);
	free(r->proc);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static bool valid_name(const char *s, bool colon)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++) {
		char c = *s;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (colon && c == ':')))
			return false;
	}
	return true;
}

/* Splits "a,b" into m->labels, validating each name. */
static int parse_labels(struct gaz_metric *m, const char *csv, struct gaz_status *st)
{
	const char *p = csv;

	if (!(m->labels = calloc(MAX_LABELS + 1, sizeof(char *))))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"", m->name);
	while (p && *p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char *l;
		if (m->nlabels == MAX_LABELS)
			return gaz_status_set(st, GAZ_EINVAL, "metric \"%s\" has too many labels",
					      m->name);
		if (!(l = strndup(p, len)))
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"",
					      m->name);
		m->labels[m->nlabels++] = l;
		if (!valid_name(l, false) || !strncmp(l, "__", 2) ||
		    (m->type == GAZ_METRIC_HISTOGRAM && !strcmp(l, "le")))
			return gaz_status_set(st, GAZ_EINVAL, "metric \"%s\": invalid label name \"%s\"",
					      m->name, l);
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

static int copy_buckets(struct gaz_metric *m, const struct gaz_metric_opts *o,
			struct gaz_status *st)
{
	const double *b = o->buckets ? o->buckets : gaz_metrics_def_buckets;
	size_t n = o->buckets ? o->nbuckets : GAZ_METRICS_DEF_BUCKETS_N;

	if (n && isinf(b[n - 1]) && b[n - 1] > 0)
		n--; /* +Inf is implicit */
	if (n > MAX_BUCKETS)
		return gaz_status_set(st, GAZ_EINVAL, "histogram \"%s\": too many buckets", m->name);
	for (size_t i = 0; i < n; i++)
		if (isnan(b[i]) || (i && !(b[i] > b[i - 1])))
			return gaz_status_set(st, GAZ_EINVAL,
					      "histogram \"%s\": buckets not strictly increasing",
					      m->name);
	if (!(m->buckets = calloc(n + 1, sizeof(double))))
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"", m->name);
	memcpy(m->buckets, b, n * sizeof(double));
	m->nbuckets = n;
	return 0;
}

static int family_new(const struct gaz_metric_opts *o, struct gaz_metric **out,
		      struct gaz_status *st)
{
	struct gaz_metric *m = calloc(1, sizeof(*m));
	int rc;

	if (!m || !(m->name = strdup(o->name)) || !(m->help = strdup(o->help ? o->help : ""))) {
		family_free(m);
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"", o->name);
	}
	pthread_mutex_init(&m->mu, NULL);
	m->type = o->type;
	m->is_double = o->is_double || o->type == GAZ_METRIC_HISTOGRAM;
	rc = parse_labels(m, o->labels, st);
	if (!rc && m->type == GAZ_METRIC_HISTOGRAM)
		rc = copy_buckets(m, o, st);
	if (!rc && m->nlabels == 0 && !gaz_metric_withv(m, NULL))
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"", o->name);
	if (rc) {
		family_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static bool same_definition(const struct gaz_metric *a, const struct gaz_metric *b)
{
	if (a->type != b->type || a->is_double != b->is_double || a->nlabels != b->nlabels ||
	    a->nbuckets != b->nbuckets)
		return false;
	for (size_t i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i], b->labels[i]))
			return false;
	for (size_t i = 0; i < a->nbuckets; i++)
		if (a->buckets[i] != b->buckets[i])
			return false;
	return true;
}

/* Inserts `m` into the sorted family array, or finds its twin. Under r->mu. */
static int insert_family(struct gaz_metrics *r, struct gaz_metric **m, struct gaz_status *st)
{
	size_t i = 0;

	while (i < r->nfams && strcmp(r->fams[i]->name, (*m)->name) < 0)
		i++;
	if (i < r->nfams && !strcmp(r->fams[i]->name, (*m)->name)) {
		if (!same_definition(r->fams[i], *m))
			return gaz_status_set(st, GAZ_EEXIST,
					      "metric %s already registered differently",
					      (*m)->name);
		family_free(*m);
		*m = r->fams[i];
		return 0;
	}
	if (r->nfams == r->capfams) {
		size_t cap = r->capfams ? r->capfams * 2 : 32;
		struct gaz_metric **nf = realloc(r->fams, cap * sizeof(*nf));
		if (!nf)
			return gaz_status_set(st, GAZ_ENOMEM, "out of memory registering \"%s\"",
					      (*m)->name);
		r->fams = nf;
		r->capfams = cap;
	}
	memmove(&r->fams[i + 1], &r->fams[i], (r->nfams - i) * sizeof(*r->fams));
	r->fams[i] = *m;
	r->nfams++;
	return 0;
}

int gaz_metrics_register(struct gaz_metrics *r, const struct gaz_metric_opts *o,
			 struct gaz_metric **out, struct gaz_status *st)
{
	struct gaz_metric *m = NULL;
	int rc;

	if (!r && !(r = gaz_metrics_default()))
		return gaz_status_set(st, GAZ_ENOMEM, "no default metrics registry");
	if (!valid_name(o->name, true))
		return gaz_status_set(st, GAZ_EINVAL, "invalid metric name \"%s\"",
				      o->name ? o->name : "(null)");
	if ((rc = family_new(o, &m, st)))
		return rc;
	pthread_mutex_lock(&r->mu);
	rc = insert_family(r, &m, st);
	pthread_mutex_unlock(&r->mu);
	if (rc) {
		family_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static struct gaz_metric *reg_simple(struct gaz_metrics *r, const struct gaz_metric_opts *o)
{
	struct gaz_status st = {0};
	struct gaz_metric *m = NULL;

	if (gaz_metrics_register(r, o, &m, &st)) {
		gaz_error(st.msg, "metric=%s", o->name ? o->name : "(null)");
		return NULL;
	}
	return m;
}

struct gaz_metric *gaz_metrics_counter(struct gaz_metrics *r, const char *name,
				       const char *help, const char *labels)
{
	struct gaz_metric_opts o = {GAZ_METRIC_COUNTER, name, help, labels, false, NULL, 0};
	return reg_simple(r, &o);
}

struct gaz_metric *gaz_metrics_counterf(struct gaz_metrics *r, const char *name,
					const char *help, const char *labels)
{
	struct gaz_metric_opts o = {GAZ_METRIC_COUNTER, name, help, labels, true, NULL, 0};
	return reg_simple(r, &o);
}

struct gaz_metric *gaz_metrics_gauge(struct gaz_metrics *r, const char *name,
				     const char *help, const char *labels)
{
	struct gaz_metric_opts o = {GAZ_METRIC_GAUGE, name, help, labels, false, NULL, 0};
	return reg_simple(r, &o);
}

struct gaz_metric *gaz_metrics_gaugef(struct gaz_metrics *r, const char *name,
				      const char *help, const char *labels)
{
	struct gaz_metric_opts o = {GAZ_METRIC_GAUGE, name, help, labels, true, NULL, 0};
	return reg_simple(r, &o);
}

struct gaz_metric *gaz_metrics_histogram(struct gaz_metrics *r, const char *name,
					 const char *help, const char *labels,
					 const double *buckets, size_t nbuckets)
{
	struct gaz_metric_opts o = {GAZ_METRIC_HISTOGRAM, name, help, labels, true, buckets,
				    nbuckets};
	return reg_simple(r, &o);
}

int gaz_metrics_on_render(struct gaz_metrics *r, void (*fn)(void *arg), void *arg)
{
	int rc = 0;

	if (!r && !(r = gaz_metrics_default()))
		return GAZ_ENOMEM;
	if (!fn)
		return GAZ_EINVAL;
	pthread_mutex_lock(&r->mu);
	if (r->nhooks == MAX_HOOKS) {
		rc = GAZ_ERANGE;
	} else {
		r->hooks[r->nhooks].fn = fn;
		r->hooks[r->nhooks++].arg = arg;
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* ---- rendering ------------------------------------------------------------ */

struct rbuf {
	char *p;
	size_t len, cap;
	int err;
};

static void rb_put(struct rbuf *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > GAZ_METRICS_RENDER_MAX) {
			b->err = GAZ_ERANGE;
			return;
		}
		if (!(np = realloc(b->p, cap))) {
			b->err = GAZ_ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void rb_str(struct rbuf *b, const char *s)
{
	rb_put(b, s, strlen(s));
}

/* Escapes `\` and newline (and `"` in label values) per format 0.0.4. */
static void rb_escaped(struct rbuf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			rb_put(b, "\\\\", 2);
		else if (*s == '\n')
			rb_put(b, "\\n", 2);
		else if (quote && *s == '"')
			rb_put(b, "\\\"", 2);
		else
			rb_put(b, s, 1);
	}
}

/* Go's strconv 'g' shortest formatting, as client_golang's expfmt writes. */
static void fmt_double(double d, char *buf, size_t cap)
{
	int prec = 1, exp;
	char *e;

	if (isnan(d)) {
		snprintf(buf, cap, "NaN");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, cap, d > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (d == 0) {
		snprintf(buf, cap, "%s", signbit(d) ? "-0" : "0");
		return;
	}
	for (; prec < 17; prec++) {
		snprintf(buf, cap, "%.*e", prec - 1, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	snprintf(buf, cap, "%.*e", prec - 1, d);
	e = strchr(buf, 'e');
	exp = atoi(e + 1);
	if (exp < -4 || exp >= 6)
		return; /* keep the exponent form, "1e+06" */
	snprintf(buf, cap, "%.*f", prec - 1 - exp > 0 ? prec - 1 - exp : 0, d);
}

static void rb_double(struct rbuf *b, double d)
{
	char buf[40];

	fmt_double(d, buf, sizeof(buf));
	rb_str(b, buf);
}

static void rb_labels(struct rbuf *b, const struct gaz_metric_child *c, const char *le)
{
	const struct gaz_metric *m = c->fam;

	if (!m->nlabels && !le)
		return;
	rb_put(b, "{", 1);
	for (size_t i = 0; i < m->nlabels; i++) {
		if (i)
			rb_put(b, ",", 1);
		rb_str(b, m->labels[i]);
		rb_put(b, "=\"", 2);
		rb_escaped(b, c->values[i], true);
		rb_put(b, "\"", 1);
	}
	if (le) {
		rb_str(b, m->nlabels ? ",le=\"" : "le=\"");
		rb_str(b, le);
		rb_put(b, "\"", 1);
	}
	rb_put(b, "}", 1);
}

static void render_histogram(struct rbuf *b, const struct gaz_metric_child *c)
{
	const struct gaz_metric *m = c->fam;
	uint64_t cum = 0;
	char le[40];

	for (size_t i = 0; i <= m->nbuckets; i++) {
		cum += atomic_load_explicit(&c->counts[i], memory_order_relaxed);
		if (i < m->nbuckets)
			fmt_double(m->buckets[i], le, sizeof(le));
		else
			snprintf(le, sizeof(le), "+Inf");
		rb_str(b, m->name);
		rb_str(b, "_bucket");
		rb_labels(b, c, le);
		snprintf(le, sizeof(le), " %llu\n", (unsigned long long)cum);
		rb_str(b, le);
	}
	rb_str(b, m->name);
	rb_str(b, "_sum");
	rb_labels(b, c, NULL);
	rb_put(b, " ", 1);
	rb_double(b, bitsd(atomic_load_explicit(&c->sum, memory_order_relaxed)));
	rb_str(b, "\n");
	rb_str(b, m->name);
	rb_str(b, "_count");
	rb_labels(b, c, NULL);
	snprintf(le, sizeof(le), " %llu\n", (unsigned long long)cum);
	rb_str(b, le);
}

static void render_sample(struct rbuf *b, const struct gaz_metric_child *c)
{
	uint64_t v = atomic_load_explicit(&c->v, memory_order_relaxed);
	char num[32];

	rb_str(b, c->fam->name);
	rb_labels(b, c, NULL);
	rb_put(b, " ", 1);
	if (c->fam->is_double) {
		rb_double(b, bitsd(v));
	} else {
		snprintf(num, sizeof(num), "%lld", (long long)(int64_t)v);
		rb_str(b, num);
	}
	rb_put(b, "\n", 1);
}

static int child_cmp(const void *a, const void *b)
{
	const struct gaz_metric_child *x = *(const struct gaz_metric_child *const *)a;
	const struct gaz_metric_child *y = *(const struct gaz_metric_child *const *)b;

	for (size_t i = 0; i < x->fam->nlabels; i++) {
		int c = strcmp(x->values[i], y->values[i]);
		if (c)
			return c;
	}
	return 0;
}

/* Snapshot of a family's children, sorted by label values. */
static struct gaz_metric_child **family_children(struct gaz_metric *m, size_t *n)
{
	struct gaz_metric_child **v;

	pthread_mutex_lock(&m->mu);
	*n = 0;
	v = malloc((m->nchildren + 1) * sizeof(*v));
	for (size_t s = 0; v && s < CHILD_SLOTS; s++)
		for (struct gaz_metric_child *c = atomic_load(&m->slots[s]); c;
		     c = atomic_load(&c->next))
			v[(*n)++] = c;
	pthread_mutex_unlock(&m->mu);
	if (v)
		qsort(v, *n, sizeof(*v), child_cmp);
	return v;
}

static void render_family(struct rbuf *b, struct gaz_metric *m)
{
	static const char *const types[] = {"counter", "gauge", "histogram"};
	struct gaz_metric_child **kids;
	size_t n;

	if (!(kids = family_children(m, &n))) {
		b->err = b->err ? b->err : GAZ_ENOMEM;
		return;
	}
	if (n) {
		rb_str(b, "# HELP ");
		rb_str(b, m->name);
		rb_put(b, " ", 1);
		rb_escaped(b, m->help, false);
		rb_str(b, "\n# TYPE ");
		rb_str(b, m->name);
		rb_put(b, " ", 1);
		rb_str(b, types[m->type]);
		rb_put(b, "\n", 1);
	}
	for (size_t i = 0; i < n; i++) {
		if (m->type == GAZ_METRIC_HISTOGRAM)
			render_histogram(b, kids[i]);
		else
			render_sample(b, kids[i]);
	}
	free(kids);
}

static void run_hooks(struct gaz_metrics *r)
{
	struct {
		void (*fn)(void *);
		void *arg;
	} hooks[MAX_HOOKS];
	size_t n;

	pthread_mutex_lock(&r->mu);
	n = r->nhooks;
	memcpy(hooks, r->hooks, n * sizeof(hooks[0]));
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < n; i++)
		hooks[i].fn(hooks[i].arg);
}

int gaz_metrics_render(struct gaz_metrics *r, char **out, size_t *len, struct gaz_status *st)
{
	struct rbuf b = {0};

	if (!r && !(r = gaz_metrics_default()))
		return gaz_status_set(st, GAZ_ENOMEM, "no default metrics registry");
	run_hooks(r);
	rb_put(&b, "", 0);
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->nfams && !b.err; i++)
		render_family(&b, r->fams[i]);
	pthread_mutex_unlock(&r->mu);
	if (b.err) {
		free(b.p);
		return gaz_status_set(st, b.err, "render of metrics failed: %s", gaz_err_str(b.err));
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- process collector ------------------------------------------------------ */

struct proc_children {
	struct gaz_metric_child *cpu, *rss, *vsz, *vszmax, *fds, *maxfds, *start, *net_in, *net_out;
};

/* IpExt InOctets and OutOctets of /proc/self/net/netstat (what
 * client_golang's process collector reports as the process's network
 * bytes: its network namespace's). Returns 0 or GAZ_EIO. */
static int read_netstat(double *in, double *out)
{
	char *names = NULL, *vals = NULL;
	size_t ncap = 0, vcap = 0;
	FILE *fp = fopen("/proc/self/net/netstat", "r");
	int rc = GAZ_EIO;

	/* Lines come in pairs, names then values; TcpExt's run past 2 KiB. */
	while (fp && getline(&names, &ncap, fp) > 0 && getline(&vals, &vcap, fp) > 0) {
		char *ns = NULL, *vs = NULL, *n, *v;
		if (strncmp(names, "IpExt:", 6))
			continue;
		strtok_r(names, " \n", &ns);
		strtok_r(vals, " \n", &vs);
		while ((n = strtok_r(NULL, " \n", &ns)) && (v = strtok_r(NULL, " \n", &vs))) {
			if (!strcmp(n, "InOctets")) {
				*in = strtod(v, NULL);
				rc = 0;
			} else if (!strcmp(n, "OutOctets")) {
				*out = strtod(v, NULL);
			}
		}
		break;
	}
	if (fp)
		fclose(fp);
	free(names);
	free(vals);
	return rc;
}

/* Fields of /proc/self/stat: utime, stime, starttime (ticks), vsize, rss (pages). */
static int read_self_stat(unsigned long long f[5])
{
	char buf[1024], *p;
	FILE *fp = fopen("/proc/self/stat", "r");
	size_t n;

	if (!fp)
		return GAZ_EIO;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return GAZ_EIO;
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
		   "%llu %llu %llu",
		   &f[0], &f[1], &f[2], &f[3], &f[4]) != 5)
		return GAZ_EIO;
	return 0;
}

static double boot_time_s(void)
{
	char line[256];
	unsigned long long bt = 0;
	FILE *fp = fopen("/proc/stat", "r");

	while (fp && fgets(line, sizeof(line), fp))
		if (sscanf(line, "btime %llu", &bt) == 1)
			break;
	if (fp)
		fclose(fp);
	return (double)bt;
}

static int64_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int64_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void proc_refresh(void *arg)
{
	struct proc_children *p = arg;
	unsigned long long f[5];
	double tck = (double)sysconf(_SC_CLK_TCK);
	struct rlimit rl;

	if (read_self_stat(f) == 0) {
		gaz_metric_setf(p->cpu, (double)(f[0] + f[1]) / tck);
		gaz_metric_setf(p->vsz, (double)f[3]);
		gaz_metric_setf(p->rss, (double)f[4] * (double)sysconf(_SC_PAGESIZE));
	}
	gaz_metric_setf(p->fds, (double)count_fds());
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		gaz_metric_setf(p->maxfds, rl.rlim_cur == RLIM_INFINITY ? INFINITY
									 : (double)rl.rlim_cur);
	/* Unlimited is the largest uint64, as procfs reads it. */
	if (getrlimit(RLIMIT_AS, &rl) == 0)
		gaz_metric_setf(p->vszmax, (double)(uint64_t)rl.rlim_cur);
	double in = 0, out = 0;
	if (read_netstat(&in, &out) == 0) {
		gaz_metric_setf(p->net_in, in);
		gaz_metric_setf(p->net_out, out);
	}
}

static int proc_register(struct gaz_metrics *r, struct proc_children *p, struct gaz_status *st)
{
	static const struct {
		enum gaz_metric_type type;
		const char *name, *help;
		size_t off;
	} defs[] = {
		{GAZ_METRIC_COUNTER, "process_cpu_seconds_total",
		 "Total user and system CPU time spent in seconds.",
		 offsetof(struct proc_children, cpu)},
		{GAZ_METRIC_GAUGE, "process_resident_memory_bytes", "Resident memory size in bytes.",
		 offsetof(struct proc_children, rss)},
		{GAZ_METRIC_GAUGE, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		 offsetof(struct proc_children, vsz)},
		{GAZ_METRIC_GAUGE, "process_virtual_memory_max_bytes",
		 "Maximum amount of virtual memory available in bytes.",
		 offsetof(struct proc_children, vszmax)},
		{GAZ_METRIC_COUNTER, "process_network_receive_bytes_total",
		 "Number of bytes received by the process over the network.",
		 offsetof(struct proc_children, net_in)},
		{GAZ_METRIC_COUNTER, "process_network_transmit_bytes_total",
		 "Number of bytes sent by the process over the network.",
		 offsetof(struct proc_children, net_out)},
		{GAZ_METRIC_GAUGE, "process_open_fds", "Number of open file descriptors.",
		 offsetof(struct proc_children, fds)},
		{GAZ_METRIC_GAUGE, "process_max_fds", "Maximum number of open file descriptors.",
		 offsetof(struct proc_children, maxfds)},
		{GAZ_METRIC_GAUGE, "process_start_time_seconds",
		 "Start time of the process since unix epoch in seconds.",
		 offsetof(struct proc_children, start)},
	};
	struct gaz_metric *m;
	int rc;

	for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
		struct gaz_metric_opts o = {defs[i].type, defs[i].name, defs[i].help, NULL, true,
					    NULL, 0};
		if ((rc = gaz_metrics_register(r, &o, &m, st)))
			return rc;
		*(struct gaz_metric_child **)((char *)p + defs[i].off) = gaz_metric_with(m);
	}
	return 0;
}

int gaz_metrics_process(struct gaz_metrics *r, struct gaz_status *st)
{
	struct proc_children *p;
	unsigned long long f[5];
	bool claimed;
	int rc;

	if (!r && !(r = gaz_metrics_default()))
		return gaz_status_set(st, GAZ_ENOMEM, "no default metrics registry");
	pthread_mutex_lock(&r->mu);
	claimed = r->proc_claimed;
	r->proc_claimed = true;
	pthread_mutex_unlock(&r->mu);
	if (claimed)
		return 0;
	if (!(p = calloc(1, sizeof(*p))))
		rc = gaz_status_set(st, GAZ_ENOMEM, "out of memory registering process metrics");
	else if (!(rc = proc_register(r, p, st)) && (rc = gaz_metrics_on_render(r, proc_refresh, p)))
		gaz_status_set(st, rc, "process metrics: no room for another render hook");
	pthread_mutex_lock(&r->mu);
	if (rc) {
		r->proc_claimed = false;
		free(p);
	} else {
		r->proc = p;
	}
	pthread_mutex_unlock(&r->mu);
	if (!rc && read_self_stat(f) == 0)
		gaz_metric_setf(p->start, boot_time_s() + (double)f[2] / (double)sysconf(_SC_CLK_TCK));
	return rc;
}

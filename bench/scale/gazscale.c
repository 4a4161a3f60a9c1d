/*
 * gazscale.c - the allocator at scale (`make bench-scale`, issue 21 item 3).
 *
 * One real broker, ours or Gazette's, started by bench/scale.sh with
 * --broker.limit 0 before anything else, is the oldest member and so the
 * allocator's leader; it holds no journal itself and only allocates. This
 * program puts the journals' specs into a real etcd and then stands in for
 * every other member of the cluster:
 *   - each simulated member is a BrokerSpec under R/members/ on a lease of
 *     its own, kept alive by lib/etcd's keep-alive, in one of --zones zones;
 *   - a simulated pulse does what each journal's primary broker does after
 *     its pipeline synchronised: it writes the route into every assignment
 *     of a journal whose assignments disagree with it (compares on each
 *     assignment's mod revision, up to 128 puts per transaction, as etcd's
 *     --max-txn-ops allows). Only then may an allocator remove a surplus
 *     member or move a primary, in Gazette's rules as in ours.
 * Keys, leases and transactions are real; the members' replicas are not.
 *
 * Phases, each ending once every journal has exactly its replication of
 * consistent assignments with a primary and the keyspace has not moved for
 * QUIET_S (the leader is done):
 *   empty  --members members join a cluster holding no assignment;
 *   leave  one member's lease is revoked (its assignments vanish);
 *   join   --join members join.
 * Each reports wall time to the last change, the leader's CPU over the
 * phase (from /proc), assignments added against the fewest any allocator
 * must add, max/mean assignments and primaries over members, and routes on
 * fewer than two zones. After the first phase: etcd key+value bytes per
 * journal replica (the logical size: the MVCC history etcd also keeps is
 * compacted away in production) and the leader's RSS per journal replica.
 *
 * Usage:
 *   gazscale specs --etcd URL --root R --journals N [--replication 3]
 *   gazscale run --etcd URL --root R --leader-pid PID [--members 100]
 *                [--join 10] [--zones 3] [--member-limit 10000]
 *                [--replication 3] [--timeout 900] [--out FILE]
 *
 * GAZSCALE_DEBUG=1 also prints each phase's loads per member and every
 * added (journal, member) pair on stderr.
 *
 * A program: allocation failures abort (bench_xmalloc).
 *
 * Locks: the keyspace's read lock around every read of it; `stop` is an
 * atomic the pulse thread polls. Nothing else is shared between threads.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"
#include "etcd/etcd.h"
#include "etcd/txn.h"
#include "keyspace/journals.h"
#include "rpc/rpc.h"

#define TXN_OPS 128       /* etcd's default --max-txn-ops */
/* A phase ends after this long without a change to the keyspace. */
#define QUIET_S 10
#define CHECK_MS 500

struct sim_member {
	char zone[16], suffix[32];
	int64_t lease;
	struct gaz_etcd_keepalive *ka;
	bool gone;
};

struct scale {
	const char *etcd_url, *root, *out_path;
	int64_t journals, replication, members, join, zones, member_limit, timeout_s;
	int leader_pid;
	struct gaz_etcd *etcd;
	struct gaz_keyspace *ks;
	struct sim_member *sims;
	size_t n_sims;
	atomic_bool stop;
	atomic_llong pulse_writes, pulse_txns;
	FILE *out;
};

static void die(const char *what, const struct gaz_status *st)
{
	fprintf(stderr, "gazscale: %s: %s\n", what, st ? st->msg : "");
	exit(1);
}

static void put_result(struct scale *s, const char *phase, const char *key, double v)
{
	if (s->out)
		fprintf(s->out, "%s.%s %.6g\n", phase, key, v);
}

/* ---- specs ---------------------------------------------------------------- */

/* journal_name writes the name of journal i: 100 "topics" of partitions,
 * as applications name them. */
static void journal_name(char *buf, size_t cap, int64_t i)
{
	snprintf(buf, cap, "scale/topic-%03" PRId64 "/part-%05" PRId64, i % 100, i / 100);
}

static void put_specs(struct scale *s)
{
	Protocol__JournalSpec js = PROTOCOL__JOURNAL_SPEC__INIT;
	Protocol__JournalSpec__Fragment fr = PROTOCOL__JOURNAL_SPEC__FRAGMENT__INIT;
	Google__Protobuf__Duration refresh = GOOGLE__PROTOBUF__DURATION__INIT;
	char *stores[] = {"file:///"}, name[128];
	struct gaz_status st = {0};
	struct gaz_txn t;
	int64_t t0 = gaz_mono_ns();

	refresh.seconds = 300;
	fr.length = 1 << 29;
	fr.compression_codec = PROTOCOL__COMPRESSION_CODEC__NONE;
	fr.n_stores = 1;
	fr.stores = stores;
	fr.refresh_interval = &refresh;
	js.replication = (int32_t)s->replication;
	js.fragment = &fr;
	js.name = name;
	gaz_txn_init(&t);
	for (int64_t i = 0; i < s->journals; i++) {
		uint8_t val[512];
		char *key;
		journal_name(name, sizeof(name), i);
		size_t len = protocol__journal_spec__get_packed_size(&js);
		if (len > sizeof(val))
			die("spec too large", NULL);
		protocol__journal_spec__pack(&js, val);
		key = gaz_ks_item_key(s->root, name);
		gaz_txn_put(&t, key, val, len, 0, false);
		free(key);
		if (gaz_txn_ops(&t) == TXN_OPS || i + 1 == s->journals) {
			if (gaz_txn_commit(s->etcd, &t, NULL, NULL, &st))
				die("putting specs", &st);
			gaz_txn_release(&t);
			gaz_txn_init(&t);
		}
	}
	gaz_txn_release(&t);
	printf("specs: %" PRId64 " journals at replication %" PRId64 " in %.1f s\n", s->journals,
	       s->replication, (double)(gaz_mono_ns() - t0) / 1e9);
}

/* ---- simulated members ------------------------------------------------------ */

/* member_join registers members [from, to) of s->sims: a lease and its
 * keep-alive each, then every member key in one transaction, so that
 * they join at one revision. */
static void member_join_one(struct scale *s, struct sim_member *m, size_t index, struct gaz_txn *t);

static void member_join(struct scale *s, size_t from, size_t to)
{
	struct gaz_status st = {0};
	struct gaz_txn t;

	for (size_t lo = from; lo < to; lo += TXN_OPS) {
		gaz_txn_init(&t);
		for (size_t i = lo; i < to && i < lo + TXN_OPS; i++)
			member_join_one(s, &s->sims[i], i, &t);
		if (gaz_txn_commit(s->etcd, &t, NULL, NULL, &st))
			die("member put", &st);
		gaz_txn_release(&t);
	}
	s->n_sims = to;
}

static void member_join_one(struct scale *s, struct sim_member *m, size_t index, struct gaz_txn *t)
{
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	Protocol__ProcessSpec ps = PROTOCOL__PROCESS_SPEC__INIT;
	Protocol__BrokerSpec bs = PROTOCOL__BROKER_SPEC__INIT;
	struct gaz_status st = {0};
	uint8_t val[256];
	char endpoint[64], *key;

	snprintf(m->zone, sizeof(m->zone), "zone-%c", (char)('a' + index % (size_t)s->zones));
	snprintf(m->suffix, sizeof(m->suffix), "sim-%04zu", index);
	/* Port 9 (discard): nothing answers, as nothing needs to. */
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:9/sim-%04zu", index);
	id.zone = m->zone;
	id.suffix = m->suffix;
	ps.id = &id;
	ps.endpoint = endpoint;
	bs.process_spec = &ps;
	bs.journal_limit = (uint32_t)s->member_limit;
	size_t len = protocol__broker_spec__pack(&bs, val);
	if (gaz_etcd_lease_grant(s->etcd, 20, &m->lease, &st))
		die("lease grant", &st);
	if (!(m->ka = gaz_etcd_keepalive_start(s->etcd, m->lease, 20, NULL, NULL, &st)))
		die("keep-alive", &st);
	key = gaz_ks_member_key(s->root, m->zone, m->suffix);
	gaz_txn_compare_mod(t, key, 0);
	gaz_txn_put(t, key, val, len, m->lease, false);
	free(key);
}

static void member_leave(struct scale *s, struct sim_member *m)
{
	struct gaz_status st = {0};

	gaz_etcd_keepalive_stop(m->ka);
	m->ka = NULL;
	if (gaz_etcd_lease_revoke(s->etcd, m->lease, &st))
		die("lease revoke", &st);
	m->gone = true;
}

/* sim_index: the simulated member of (zone, suffix), or -1 (the leader). */
static ssize_t sim_index(const struct scale *s, const char *suffix)
{
	unsigned long i;

	if (sscanf(suffix, "sim-%lu", &i) != 1 || i >= s->n_sims)
		return -1;
	return (ssize_t)i;
}

/* ---- the simulated pulse ------------------------------------------------------ */

static void *pulse_main(void *arg)
{
	struct scale *s = arg;
	char *prefix = NULL;
	int64_t seen = 0;

	if (asprintf(&prefix, "%s/items/", s->root) < 0)
		abort();
	while (!atomic_load(&s->stop)) {
		struct gaz_txn *txns = NULL;
		size_t n_txns = 0, lo, hi;
		int64_t rev;

		if (gaz_keyspace_wait_revision(s->ks, seen + 1, gaz_deadline_in(200)))
			continue;
		gaz_keyspace_rlock(s->ks);
		rev = gaz_keyspace_revision(s->ks);
		gaz_keyspace_prefix(s->ks, prefix, &lo, &hi);
		for (size_t i = lo; i < hi; i++) {
			const struct gaz_ks_value *v = gaz_keyspace_at(s->ks, i)->decoded;
			struct gaz_route r;
			bool bad = false;
			if (gaz_route_build(s->ks, s->root, v->item, &r))
				abort();
			for (size_t k = 0; k < r.n; k++)
				bad |= !r.consistent[k];
			if (bad && r.primary >= 0) {
				Protocol__Route *p = gaz_route_to_proto(&r, true);
				size_t len = protocol__route__get_packed_size(p);
				uint8_t *val = bench_xmalloc(len + 1);
				protocol__route__pack(p, val);
				if (!n_txns || gaz_txn_ops(&txns[n_txns - 1]) + r.n > TXN_OPS) {
					txns = realloc(txns, (n_txns + 1) * sizeof(*txns));
					if (!txns)
						abort();
					gaz_txn_init(&txns[n_txns++]);
				}
				for (size_t k = 0; k < r.n; k++) {
					char *key = gaz_ks_assign_key(s->root, v->item, r.zone[k], r.suffix[k],
								      r.slot[k]);
					gaz_txn_compare_mod(&txns[n_txns - 1], key, r.mod_revision[k]);
					gaz_txn_put(&txns[n_txns - 1], key, val, len, 0, true);
					free(key);
				}
				free(val);
				gaz_route_proto_free(p);
			}
			gaz_route_release(&r);
		}
		gaz_keyspace_runlock(s->ks);
		seen = rev;
		for (size_t i = 0; i < n_txns; i++) {
			struct gaz_status st = {0};
			bool ok = false;
			if (gaz_txn_commit(s->etcd, &txns[i], &ok, NULL, &st))
				fprintf(stderr, "gazscale: pulse write failed: %s\n", st.msg);
			else if (ok)
				atomic_fetch_add(&s->pulse_writes, (long long)gaz_txn_ops(&txns[i]));
			atomic_fetch_add(&s->pulse_txns, 1);
			gaz_txn_release(&txns[i]);
		}
		free(txns);
	}
	free(prefix);
	return NULL;
}

/* ---- what the keyspace says ------------------------------------------------------ */

struct view {
	int64_t revision;
	bool converged;              /* every journal: its replication, consistent, a primary */
	int64_t journals, not_converged, single_zone;
	int64_t *load, *primaries;   /* per simulated member */
	char **pairs;                /* "journal#zone#suffix", sorted */
	size_t n_pairs;
	int64_t leader_assignments;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void view_release(struct view *v)
{
	for (size_t i = 0; i < v->n_pairs; i++)
		free(v->pairs[i]);
	free(v->pairs);
	free(v->load);
	free(v->primaries);
	memset(v, 0, sizeof(*v));
}

/* view_take reads the keyspace once (read lock held throughout). With
 * `pairs`, also the sorted (journal, member) pairs. */
static void view_take(struct scale *s, struct view *v, bool pairs)
{
	char *prefix = NULL;
	size_t lo, hi;

	memset(v, 0, sizeof(*v));
	v->load = bench_xcalloc(s->n_sims + 1, sizeof(int64_t));
	v->primaries = bench_xcalloc(s->n_sims + 1, sizeof(int64_t));
	if (asprintf(&prefix, "%s/items/", s->root) < 0)
		abort();
	gaz_keyspace_rlock(s->ks);
	v->revision = gaz_keyspace_revision(s->ks);
	gaz_keyspace_prefix(s->ks, prefix, &lo, &hi);
	v->journals = (int64_t)(hi - lo);
	v->converged = true;
	if (pairs)
		v->pairs = bench_xcalloc((hi - lo) * (size_t)(s->replication + 2) + 1, sizeof(char *));
	for (size_t i = lo; i < hi; i++) {
		const struct gaz_ks_value *jv = gaz_keyspace_at(s->ks, i)->decoded;
		struct gaz_route r;
		bool ok;
		size_t zones = 0;
		if (gaz_route_build(s->ks, s->root, jv->item, &r))
			abort();
		ok = (int64_t)r.n == s->replication && r.primary >= 0;
		for (size_t k = 0; k < r.n; k++) {
			ssize_t m = sim_index(s, r.suffix[k]);
			bool seen = false;
			ok &= r.consistent[k];
			for (size_t j = 0; j < k; j++)
				seen |= !strcmp(r.zone[j], r.zone[k]);
			zones += !seen;
			if (m < 0) {
				v->leader_assignments++;
			} else {
				v->load[m]++;
				v->primaries[m] += r.slot[k] == 0;
			}
			if (pairs && v->n_pairs < (hi - lo) * (size_t)(s->replication + 2)) {
				char *p = NULL;
				if (asprintf(&p, "%s#%s#%s", jv->item, r.zone[k], r.suffix[k]) < 0)
					abort();
				v->pairs[v->n_pairs++] = p;
			}
		}
		if (!ok)
			v->not_converged++;
		if (r.n && zones < 2 && s->zones >= 2)
			v->single_zone++;
		gaz_route_release(&r);
	}
	gaz_keyspace_runlock(s->ks);
	v->converged = v->not_converged == 0;
	free(prefix);
	if (pairs)
		qsort(v->pairs, v->n_pairs, sizeof(char *), cmp_str);
}

/* added_pairs: pairs of `b` not in `a` (both sorted); *to_old counts
 * those on members other than the last `fresh` simulated ones. */
static int64_t added_pairs(const struct scale *s, const struct view *a, const struct view *b,
			   size_t fresh, int64_t *to_old)
{
	size_t i = 0, j = 0;
	int64_t added = 0;

	*to_old = 0;
	while (j < b->n_pairs) {
		int c = i < a->n_pairs ? strcmp(a->pairs[i], b->pairs[j]) : 1;
		if (c < 0) {
			i++;
		} else if (c == 0) {
			i++, j++;
		} else {
			const char *tail = strrchr(b->pairs[j], '#');
			ssize_t m = tail ? sim_index(s, tail + 1) : -1;
			*to_old += m < 0 || (size_t)m + fresh < s->n_sims;
			if (getenv("GAZSCALE_DEBUG"))
				fprintf(stderr, "added %s\n", b->pairs[j]);
			added++, j++;
		}
	}
	return added;
}

/* ---- measuring a phase --------------------------------------------------------------- */

static void max_mean(const struct scale *s, const int64_t *x, double *max, double *mean)
{
	int64_t sum = 0, top = 0, n = 0;

	for (size_t i = 0; i < s->n_sims; i++) {
		if (s->sims[i].gone)
			continue;
		sum += x[i];
		top = x[i] > top ? x[i] : top;
		n++;
	}
	*mean = n ? (double)sum / (double)n : 0;
	*max = (double)top;
}

/* run_phase waits until the cluster converged and the keyspace stayed at
 * one revision for QUIET_S, then reports. `before` is the view the event
 * started from (its pairs), `lost` the pairs the event itself removed. */
static bool run_phase(struct scale *s, const char *phase, const struct view *before, int64_t lost,
		      size_t fresh, int64_t t0, const struct bench_cpu *c0)
{
	int64_t last_rev = -1, last_change = t0, deadline = t0 + s->timeout_s * GAZ_NS_PER_S;
	int64_t pw0 = atomic_load(&s->pulse_writes);
	struct view v = {0};
	struct bench_cpu c1;
	bool done = false;

	while (!done) {
		usleep(CHECK_MS * 1000);
		int64_t now = gaz_mono_ns(), rev = gaz_keyspace_revision_now(s->ks);
		if (rev != last_rev) {
			last_rev = rev;
			last_change = now;
			continue;
		}
		if (now - last_change < QUIET_S * GAZ_NS_PER_S)
			continue;
		view_take(s, &v, false);
		done = v.converged && v.revision == last_rev;
		if (!done) {
			if (now > deadline) {
				printf("%s: NOT converged after %" PRId64 " s: %" PRId64 " of %" PRId64
				       " journals short\n", phase, s->timeout_s, v.not_converged, v.journals);
				put_result(s, phase, "converged", 0);
				view_release(&v);
				return false;
			}
			view_release(&v);
			last_rev = -1;
		}
	}
	view_release(&v);
	bench_cpu_take(&c1, &s->leader_pid, 1);
	view_take(s, &v, true);

	double wall = (double)(last_change - t0) / 1e9;
	double cpu = c0->broker_ns < 0 || c1.broker_ns < 0 ? -1 : (double)(c1.broker_ns - c0->broker_ns) / 1e9;
	double lmax, lmean, pmax, pmean;
	int64_t to_old, added = added_pairs(s, before, &v, fresh, &to_old), underfill = 0, live = 0, total = 0;
	max_mean(s, v.load, &lmax, &lmean);
	max_mean(s, v.primaries, &pmax, &pmean);
	for (size_t i = 0; i < s->n_sims; i++)
		if (!s->sims[i].gone)
			live++, total += v.load[i];
	/* The fewest additions any allocator must make: every pair the event
	 * removed, and enough to bring each member up to the floor of the
	 * mean from what it held before the event. */
	for (size_t i = 0; live && i < s->n_sims; i++) {
		int64_t had = 0;
		const char *tail;
		if (s->sims[i].gone)
			continue;
		for (size_t k = 0; k < before->n_pairs; k++)
			if ((tail = strrchr(before->pairs[k], '#')) && !strcmp(tail + 1, s->sims[i].suffix))
				had++;
		if (total / live > had)
			underfill += total / live - had;
	}
	int64_t minimum = lost > underfill ? lost : underfill;
	if (getenv("GAZSCALE_DEBUG"))
		for (size_t i = 0; i < s->n_sims; i++)
			fprintf(stderr, "%s: member %zu load %lld -> %lld primaries %lld -> %lld\n", phase, i,
				(long long)(i < s->n_sims - fresh ? before->load[i] : 0), (long long)v.load[i],
				(long long)(i < s->n_sims - fresh ? before->primaries[i] : 0),
				(long long)v.primaries[i]);
	printf("%-6s converged in %6.1f s, leader CPU %6.2f s; assignments added %" PRId64
	       " (%" PRId64 " to members that were there, minimum %" PRId64 ", %.2fx); load max/mean %.0f/%.1f = %.3f; primaries max/mean "
	       "%.0f/%.1f = %.3f; routes on < 2 zones %" PRId64 "; pulse writes %lld\n",
	       phase, wall, cpu, added, to_old, minimum, minimum ? (double)added / (double)minimum : 0, lmax,
	       lmean, lmean ? lmax / lmean : 0, pmax, pmean, pmean ? pmax / pmean : 0, v.single_zone,
	       (long long)(atomic_load(&s->pulse_writes) - pw0));
	fflush(stdout);
	put_result(s, phase, "converged", 1);
	put_result(s, phase, "wall_s", wall);
	put_result(s, phase, "leader_cpu_s", cpu);
	put_result(s, phase, "added", (double)added);
	put_result(s, phase, "minimum", (double)minimum);
	put_result(s, phase, "moved_ratio", minimum ? (double)added / (double)minimum : 0);
	put_result(s, phase, "load_max_mean", lmean ? lmax / lmean : 0);
	put_result(s, phase, "primaries_max_mean", pmean ? pmax / pmean : 0);
	put_result(s, phase, "single_zone_routes", (double)v.single_zone);
	put_result(s, phase, "leader_assignments", (double)v.leader_assignments);
	view_release(&v);
	return true;
}

/* etcd_bytes sums key and value bytes under the root (paged range reads). */
static int64_t etcd_bytes(struct scale *s, int64_t *keys)
{
	char *start = NULL, *prefix = NULL;
	uint8_t end[512];
	int64_t sum = 0, rev = 0;

	*keys = 0;
	if (asprintf(&prefix, "%s/", s->root) < 0 || !(start = strdup(prefix)))
		abort();
	size_t elen = gaz_etcd_prefix_range_end((const uint8_t *)prefix, strlen(prefix), end);
	for (;;) {
		Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
		Etcdserverpb__RangeResponse *resp = NULL;
		struct gaz_status st = {0};
		req.key.data = (uint8_t *)start;
		req.key.len = strlen(start);
		req.range_end.data = end;
		req.range_end.len = elen;
		req.limit = 5000;
		req.revision = rev;
		if (gaz_etcd_range(s->etcd, &req, &resp, &st))
			die("range", &st);
		rev = resp->header ? resp->header->revision : 0;
		for (size_t i = 0; i < resp->n_kvs; i++)
			sum += (int64_t)(resp->kvs[i]->key.len + resp->kvs[i]->value.len);
		*keys += (int64_t)resp->n_kvs;
		bool more = resp->more && resp->n_kvs;
		if (more) {
			const ProtobufCBinaryData *k = &resp->kvs[resp->n_kvs - 1]->key;
			free(start);
			start = bench_xmalloc(k->len + 2);
			memcpy(start, k->data, k->len);
			start[k->len] = '\x01'; /* the next key after it: keys hold no \x00 */
			start[k->len + 1] = '\0';
		}
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		if (!more)
			break;
	}
	free(start);
	free(prefix);
	return sum;
}

static int run(struct scale *s)
{
	struct gaz_status st = {0};
	struct view before = {0};
	struct bench_cpu c0;
	pthread_t pulse;
	int64_t t0, keys;
	bool ok;

	if (!(s->ks = gaz_journals_keyspace_new(s->etcd, s->root)))
		die("keyspace", NULL);
	if (gaz_keyspace_load(s->ks, 0, &st) || gaz_keyspace_watch(s->ks, &st))
		die("keyspace load", &st);
	s->sims = bench_xcalloc((size_t)(s->members + s->join + 1), sizeof(*s->sims));
	if (pthread_create(&pulse, NULL, pulse_main, s))
		die("pthread_create", NULL);
	int64_t rss0 = bench_proc_status_kib(s->leader_pid, "VmRSS");

	/* empty: the members join at once. */
	view_take(s, &before, true);
	bench_cpu_take(&c0, &s->leader_pid, 1);
	t0 = gaz_mono_ns();
	member_join(s, 0, (size_t)s->members);
	ok = run_phase(s, "empty", &before, 0, (size_t)s->members, t0, &c0);
	view_release(&before);
	if (ok) {
		int64_t bytes = etcd_bytes(s, &keys), rss1 = bench_proc_status_kib(s->leader_pid, "VmRSS");
		double replicas = (double)(s->journals * s->replication);
		printf("etcd: %" PRId64 " keys, %.1f MB of keys and values: %.0f B per journal "
		       "replica; leader RSS %.1f MB (+%.1f MB while allocating): %.2f KiB per "
		       "journal replica mirrored\n", keys, (double)bytes / 1e6, (double)bytes / replicas,
		       (double)rss1 / 1024, (double)(rss1 - rss0) / 1024, (double)rss1 / replicas);
		put_result(s, "etcd", "bytes_per_replica", (double)bytes / replicas);
		put_result(s, "leader", "rss_kib_per_replica", (double)rss1 / replicas);
	}
	/* leave: the member holding the most assignments leaves. */
	if (ok) {
		view_take(s, &before, true);
		size_t top = 0;
		for (size_t i = 1; i < s->n_sims; i++)
			if (before.load[i] > before.load[top])
				top = i;
		int64_t lost = before.load[top];
		bench_cpu_take(&c0, &s->leader_pid, 1);
		t0 = gaz_mono_ns();
		member_leave(s, &s->sims[top]);
		ok = run_phase(s, "leave", &before, lost, 0, t0, &c0);
		view_release(&before);
	}
	/* join: more members at once. */
	if (ok && s->join > 0) {
		view_take(s, &before, true);
		bench_cpu_take(&c0, &s->leader_pid, 1);
		t0 = gaz_mono_ns();
		member_join(s, s->n_sims, s->n_sims + (size_t)s->join);
		ok = run_phase(s, "join", &before, 0, (size_t)s->join, t0, &c0);
		view_release(&before);
	}
	atomic_store(&s->stop, true);
	pthread_join(pulse, NULL);
	for (size_t i = 0; i < s->n_sims; i++)
		if (!s->sims[i].gone)
			member_leave(s, &s->sims[i]);
	gaz_keyspace_free(s->ks);
	return ok ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: gazscale specs|run --etcd URL --root R [--journals N] [--replication R]\n"
			"       [--leader-pid PID] [--members M] [--join J] [--zones Z]\n"
			"       [--member-limit L] [--timeout S] [--out FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct scale s = {.journals = 100000, .replication = 3, .members = 100, .join = 10,
			  .zones = 3, .member_limit = 10000, .timeout_s = 900};
	struct gaz_status st = {0};
	int rc = 2;

	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(f, "--etcd"))
			s.etcd_url = v;
		else if (!strcmp(f, "--root"))
			s.root = v;
		else if (!strcmp(f, "--out"))
			s.out_path = v;
		else if (!strcmp(f, "--journals"))
			s.journals = atoll(v);
		else if (!strcmp(f, "--replication"))
			s.replication = atoll(v);
		else if (!strcmp(f, "--members"))
			s.members = atoll(v);
		else if (!strcmp(f, "--join"))
			s.join = atoll(v);
		else if (!strcmp(f, "--zones"))
			s.zones = atoll(v);
		else if (!strcmp(f, "--member-limit"))
			s.member_limit = atoll(v);
		else if (!strcmp(f, "--timeout"))
			s.timeout_s = atoll(v);
		else if (!strcmp(f, "--leader-pid"))
			s.leader_pid = atoi(v);
		else
			usage();
	}
	if (!s.etcd_url || !s.root || s.journals < 1 || s.replication < 1 || s.members < 1 ||
	    s.zones < 1 || s.zones > 26 || s.join < 0 || s.member_limit < 1)
		usage();
	if (gaz_rpc_init(1))
		die("grpc init", NULL);
	if (!(s.etcd = gaz_etcd_new(s.etcd_url, 30000, &st)))
		die("etcd", &st);
	if (!strcmp(argv[1], "specs")) {
		put_specs(&s);
		rc = 0;
	} else if (!strcmp(argv[1], "run")) {
		if (s.leader_pid <= 0)
			usage();
		if (s.out_path && !(s.out = fopen(s.out_path, "w")))
			die("opening --out", NULL);
		rc = run(&s);
		if (s.out)
			fclose(s.out);
	} else {
		usage();
	}
	gaz_etcd_free(s.etcd);
	return rc;
}

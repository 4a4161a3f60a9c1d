/*
 * gazload - a continuous appender that checks what it was promised: it
 * appends numbered records to journals until told to stop, then reads
 * every journal back and checks that each acknowledged append's bytes are
 * at exactly the offsets its AppendResponse named. For rolling upgrades,
 * drains and kills of brokers under load (e2e/run-kind.sh) and for a
 * user's smoke test of a cluster.
 *
 *   gazload --broker.address URL --journals a/b,a/c [--size 256]
 *           [--pause 20ms] [--duration 60s | --until-file PATH]
 *           [--stop-grace 60s] [--broker.auth-keys KEYS | --broker.auth-token TOKEN]
 *           [--broker.trusted-ca-file PEM] [--broker.cert-file PEM --broker.cert-key-file PEM]
 *
 * As gazctl's, --broker.address, --broker.auth-keys and --broker.auth-token
 * default to $BROKER_ADDRESS, $BROKER_AUTH_KEYS and $BROKER_AUTH_TOKEN: keys
 * sign each call with Gazette's default claims (they win over a token).
 * For https:// brokers, --broker.trusted-ca-file (the brokers' CA; the
 * system's roots without it) and --broker.cert-file/--broker.cert-key-file
 * (a client certificate, for brokers that require one) default to
 * $BROKER_TRUSTED_CA_FILE, $BROKER_CERT_FILE and $BROKER_CERT_KEY_FILE, as
 * gazctl's (Gazette's mbp.ClientConfig).
 *
 * One thread per journal appends one record after the other with the
 * client library's one-shot append (gaz_client_append: it retries
 * unavailable brokers and routing statuses from the first byte, as
 * Gazette's client.Append, so a broker going away shows as a pause, not a
 * failure). Records are "gazload <journal> <seq> ....\n", `size` bytes.
 * It stops at SIGTERM/SIGINT, after `duration`, or once `until-file`
 * exists; appends in flight then get `stop-grace` to finish before the
 * client is cancelled (those count as unfinished). Then each journal is
 * read from its first acknowledged offset to its last with a retrying
 * reader, and every acknowledged record compared byte for byte.
 *
 * Output: one summary line on stdout,
 *   gazload: journals=J attempted=N acknowledged=A failed=F unfinished=U
 *            verified_bytes=B lost=L max_append_ms=M seconds=S
 * where failed counts appends the client returned an error for, lost
 * acknowledged records not found intact at their offsets, max_append_ms
 * the longest time one acknowledged append took (retries included).
 * Errors go to stderr. Exit status 0 only when failed, unfinished and lost
 * are all 0; 2 on bad usage.
 *
 * Threads: the appenders share `struct load` fields only through atomics
 * (`stop`) or after joining them (their `struct journal_run`).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/duration.h"
#include "gazette/client.h"
#include "rpc/rpc.h"

/* One acknowledged append: record `seq` at [begin, end). */
struct ack {
	int64_t seq, begin, end;
};

struct journal_run {
	const char *journal;      /* borrowed from the journals list */
	struct load *load;
	pthread_t thread;
	bool joined;
	struct ack *acks;
	size_t n_acks, cap_acks;
	int64_t attempted, failed, unfinished, max_ns;
};

struct load {
	struct gaz_client *client;
	size_t size;              /* bytes per record */
	int64_t pause_ns;
	atomic_bool stop;
	struct journal_run *runs;
	size_t n_runs;
};

/* record writes `seq`'s record of `journal` into buf[size]. */
static void record(char *buf, size_t size, const char *journal, int64_t seq)
{
	int n = snprintf(buf, size, "gazload %s %lld ", journal, (long long)seq);

	if (n < 0 || (size_t)n >= size)
		n = (int)size - 1;
	memset(buf + n, '.', size - (size_t)n);
	buf[size - 1] = '\n';
}

static void *append_main(void *arg)
{
	struct journal_run *j = arg;
	struct load *l = j->load;
	char *buf = malloc(l->size);

	for (int64_t seq = 0; buf && !atomic_load(&l->stop); seq++) {
		struct gaz_append_opts o = {.journal = j->journal};
		struct gaz_append_src src = {.buf = buf, .len = l->size, .fd = -1};
		Protocol__AppendResponse *r = NULL;
		struct gaz_status st = {0};
		int64_t t0 = gaz_mono_ns();
		int rc;

		record(buf, l->size, j->journal, seq);
		j->attempted++;
		rc = gaz_client_append(l->client, &o, &src, &r, &st);
		int64_t took = gaz_mono_ns() - t0;
		if (rc == 0 && j->n_acks == j->cap_acks) {
			size_t ncap = j->cap_acks ? 2 * j->cap_acks : 1024;
			struct ack *p = realloc(j->acks, ncap * sizeof(*p));
			if (p) {
				j->acks = p;
				j->cap_acks = ncap;
			}
		}
		if (rc == 0 && j->n_acks == j->cap_acks) {
			/* Acknowledged but not recorded: it cannot be verified, so it
			 * counts as failed, and the run stops. */
			fprintf(stderr, "gazload: out of memory recording an acknowledged append\n");
			j->failed++;
			atomic_store(&l->stop, true);
		} else if (rc == 0) {
			j->acks[j->n_acks++] = (struct ack){seq, r->commit->begin, r->commit->end};
			if (took > j->max_ns)
				j->max_ns = took;
		} else if (rc == GAZ_ECANCELLED) {
			j->unfinished++;
		} else if (rc) {
			j->failed++;
			fprintf(stderr, "gazload: append to %s failed: %s\n", j->journal,
				st.msg[0] ? st.msg : gaz_err_str(rc));
		}
		if (r)
			protobuf_c_message_free_unpacked(&r->base, NULL);
		if (l->pause_ns && !atomic_load(&l->stop))
			usleep((useconds_t)(l->pause_ns / 1000));
	}
	free(buf);
	return NULL;
}

/* verify reads j's acknowledged range back; returns lost records, adds
 * the bytes checked to *verified. -1 when the read failed. */
static int64_t verify(struct load *l, struct journal_run *j, int64_t *verified)
{
	struct gaz_read_opts o = {.journal = j->journal, .retry = true, .block = true};
	struct gaz_status st = {0};
	struct gaz_reader *rd;
	int64_t lost = 0, from, to;
	char *got, *want;
	size_t have = 0;
	int rc = 0;

	if (!j->n_acks)
		return 0;
	from = j->acks[0].begin;
	to = j->acks[j->n_acks - 1].end;
	for (size_t i = 0; i < j->n_acks; i++)
		from = j->acks[i].begin < from ? j->acks[i].begin : from;
	o.offset = from;
	o.end_offset = to;
	got = malloc((size_t)(to - from) + 1);
	want = malloc(l->size);
	if (!got || !want || gaz_reader_new(l->client, &o, &rd, &st)) {
		fprintf(stderr, "gazload: reading %s: %s\n", j->journal, st.msg[0] ? st.msg : "out of memory");
		free(got);
		free(want);
		return -1;
	}
	while (have < (size_t)(to - from)) {
		size_t n = 0;
		rc = gaz_reader_read(rd, got + have, (size_t)(to - from) - have, &n, &st);
		if (rc == 0)
			have += n;
		else if (rc == GAZ_READ_JUMP)
			/* Content below the offset is gone: what follows is at the new offset. */
			have = (size_t)(gaz_reader_offset(rd) - from);
		else if (rc != GAZ_READ_META)
			break;
	}
	gaz_reader_free(rd);
	if (have < (size_t)(to - from))
		fprintf(stderr, "gazload: reading %s stopped at %lld of [%lld, %lld): %s\n", j->journal,
			(long long)(from + (int64_t)have), (long long)from, (long long)to,
			st.msg[0] ? st.msg : gaz_err_str(rc));
	for (size_t i = 0; i < j->n_acks; i++) {
		const struct ack *a = &j->acks[i];
		record(want, l->size, j->journal, a->seq);
		if (a->end - a->begin != (int64_t)l->size || a->end - from > (int64_t)have ||
		    memcmp(got + (a->begin - from), want, l->size)) {
			if (lost < 5)
				fprintf(stderr, "gazload: %s record %lld not found at [%lld, %lld)\n",
					j->journal, (long long)a->seq, (long long)a->begin,
					(long long)a->end);
			lost++;
		} else {
			*verified += a->end - a->begin;
		}
	}
	free(got);
	free(want);
	return lost;
}

static void usage(void)
{
	fprintf(stderr, "usage: gazload --broker.address URL --journals J1,J2,.. [--size BYTES] "
			"[--pause DURATION] [--duration DURATION | --until-file PATH] "
			"[--stop-grace DURATION] [--broker.auth-keys KEYS | --broker.auth-token TOKEN] "
			"[--broker.trusted-ca-file PEM] [--broker.cert-file PEM --broker.cert-key-file PEM]\n");
}

static int parse_duration(const char *flag, const char *v, int64_t *ns)
{
	struct gaz_status st = {0};

	if (gaz_duration_parse(v, ns, &st) || *ns < 0) {
		fprintf(stderr, "gazload: --%s: %s\n", flag, st.msg[0] ? st.msg : "negative");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"broker.address", required_argument, NULL, 'a'},
		{"journals", required_argument, NULL, 'j'},
		{"size", required_argument, NULL, 's'},
		{"pause", required_argument, NULL, 'p'},
		{"duration", required_argument, NULL, 'd'},
		{"until-file", required_argument, NULL, 'u'},
		{"stop-grace", required_argument, NULL, 'g'},
		{"broker.auth-keys", required_argument, NULL, 'k'},
		{"broker.auth-token", required_argument, NULL, 't'},
		{"broker.trusted-ca-file", required_argument, NULL, 'C'},
		{"broker.cert-file", required_argument, NULL, 'c'},
		{"broker.cert-key-file", required_argument, NULL, 'K'},
		{0},
	};
	const char *address = getenv("BROKER_ADDRESS"), *until = NULL;
	const char *auth_keys = getenv("BROKER_AUTH_KEYS"), *auth_token = getenv("BROKER_AUTH_TOKEN");
	const char *ca_file = getenv("BROKER_TRUSTED_CA_FILE"), *cert_file = getenv("BROKER_CERT_FILE");
	const char *cert_key_file = getenv("BROKER_CERT_KEY_FILE");
	char *journals = NULL;
	int64_t duration_ns = 0, grace_ns = 60 * GAZ_NS_PER_S, lost = 0, verified = 0;
	struct load l = {.size = 256, .pause_ns = 20 * GAZ_NS_PER_MS};
	struct gaz_client_opts co = {0};
	struct gaz_status st = {0};
	int64_t t0, attempted = 0, acked = 0, failed = 0, unfinished = 0, max_ns = 0;
	sigset_t sigs;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a': address = optarg; break;
		case 'j': journals = optarg; break;
		case 's': l.size = (size_t)strtoul(optarg, NULL, 10); break;
		case 'p': bad |= parse_duration("pause", optarg, &l.pause_ns); break;
		case 'd': bad |= parse_duration("duration", optarg, &duration_ns); break;
		case 'u': until = optarg; break;
		case 'g': bad |= parse_duration("stop-grace", optarg, &grace_ns); break;
		case 'k': auth_keys = optarg; break;
		case 't': auth_token = optarg; break;
		case 'C': ca_file = optarg; break;
		case 'c': cert_file = optarg; break;
		case 'K': cert_key_file = optarg; break;
		default: bad = 1;
		}
	}
	if (bad || optind != argc || !address || !*address || !journals || !*journals) {
		usage();
		return 2;
	}
	if (l.size < 64 || l.size > (1u << 20)) {
		fprintf(stderr, "gazload: --size must be 64 to 1048576 bytes\n");
		return 2;
	}
	for (char *p = journals; p; p = strchr(p + 1, ','))
		l.n_runs++;
	l.runs = calloc(l.n_runs, sizeof(*l.runs));
	for (size_t i = 0; l.runs && i < l.n_runs; i++) {
		l.runs[i].journal = strtok(i ? NULL : journals, ",");
		l.runs[i].load = &l;
		if (!l.runs[i].journal) {
			usage();
			free(l.runs);
			return 2;
		}
	}
	/* Signals are taken by sigtimedwait below, not by handlers. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	co.broker_address = address;
	co.zone = getenv("BROKER_ZONE");
	co.auth_keys = auth_keys;
	co.auth_token = auth_token;
	co.trusted_ca_file = ca_file;
	co.cert_file = cert_file;
	co.cert_key_file = cert_key_file;
	if (!l.runs || gaz_rpc_init(1) || gaz_client_new(&co, &l.client, &st)) {
		fprintf(stderr, "gazload: %s\n", st.msg[0] ? st.msg : "cannot start");
		free(l.runs);
		return 2;
	}
	t0 = gaz_mono_ns();
	for (size_t i = 0; i < l.n_runs; i++)
		pthread_create(&l.runs[i].thread, NULL, append_main, &l.runs[i]);
	for (;;) {
		struct timespec tick = {0, 200 * 1000 * 1000};
		struct stat sb;
		if (sigtimedwait(&sigs, NULL, &tick) > 0)
			break;
		if (duration_ns && gaz_mono_ns() - t0 >= duration_ns)
			break;
		if (until && stat(until, &sb) == 0)
			break;
	}
	atomic_store(&l.stop, true);
	/* In-flight appends may be retrying against a broker that is going
	 * away: give them the grace, then cancel. */
	for (int64_t waited = 0;; waited += 100 * GAZ_NS_PER_MS) {
		size_t left = 0;
		for (size_t i = 0; i < l.n_runs; i++) {
			if (!l.runs[i].joined && pthread_tryjoin_np(l.runs[i].thread, NULL) == 0)
				l.runs[i].joined = true;
			left += !l.runs[i].joined;
		}
		if (!left)
			break;
		if (waited >= grace_ns) {
			gaz_client_cancel(l.client);
			for (size_t i = 0; i < l.n_runs; i++)
				if (!l.runs[i].joined && pthread_join(l.runs[i].thread, NULL) == 0)
					l.runs[i].joined = true;
			break;
		}
		usleep(100 * 1000);
	}
	if (gaz_client_cancelled(l.client)) {
		/* The verification needs a client that is not cancelled. */
		gaz_client_free(l.client);
		if (gaz_client_new(&co, &l.client, &st)) {
			fprintf(stderr, "gazload: %s\n", st.msg);
			for (size_t i = 0; i < l.n_runs; i++)
				free(l.runs[i].acks);
			free(l.runs);
			return 1;
		}
	}
	for (size_t i = 0; i < l.n_runs; i++) {
		struct journal_run *j = &l.runs[i];
		int64_t n = verify(&l, j, &verified);
		lost += n < 0 ? (int64_t)j->n_acks : n;
		attempted += j->attempted;
		acked += (int64_t)j->n_acks;
		failed += j->failed;
		unfinished += j->unfinished;
		max_ns = j->max_ns > max_ns ? j->max_ns : max_ns;
		free(j->acks);
	}
	printf("gazload: journals=%zu attempted=%lld acknowledged=%lld failed=%lld unfinished=%lld "
	       "verified_bytes=%lld lost=%lld max_append_ms=%lld seconds=%.1f\n",
	       l.n_runs, (long long)attempted, (long long)acked, (long long)failed,
	       (long long)unfinished, (long long)verified, (long long)lost,
	       (long long)(max_ns / GAZ_NS_PER_MS), (double)(gaz_mono_ns() - t0) / 1e9);
	fflush(stdout);
	gaz_client_free(l.client);
	free(l.runs);
	gaz_rpc_shutdown();
	return failed || unfinished || lost ? 1 : 0;
}

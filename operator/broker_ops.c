/*
 * broker_ops.c - what the operator asks of a broker, through the
 * gazette-c client library and --broker.address: suspend a journal before
 * its spec is deleted, and summarise its fragment index for the CR status.
 *
 * Each operation gets its own client and a watchdog that cancels it after
 * --broker.timeout, so a broker that hangs cannot stall the reconcile
 * worker (an Append stream has no deadline of its own).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gazette/client.h"
#include "operator/operator.h"
#include "rpc/rpc.h"

struct watchdog {
	struct gaz_client *c;
	int64_t deadline_ns;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* CLOCK_MONOTONIC */
	pthread_t t;
};

static void *watch(void *arg)
{
	struct watchdog *w = arg;
	struct timespec ts = gaz_abstime_of(w->deadline_ns);

	pthread_mutex_lock(&w->mu);
	while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
		;
	bool fire = !w->done;
	pthread_mutex_unlock(&w->mu);
	if (fire)
		gaz_client_cancel(w->c);
	return NULL;
}

/* Makes a client for one operation and arms its watchdog. */
static int open_client(struct gaz_op *op, struct watchdog *w, struct gaz_status *st)
{
	/* Keys sign each call with Gazette's default claims (auth_keys wins
	 * over auth_token in the client, as in Gazette's clients). */
	struct gaz_client_opts o = {.broker_address = op->cfg.broker_address,
				    .auth_keys = op->cfg.broker_auth_keys,
				    .auth_token = op->cfg.broker_auth_token,
				    .rpc_timeout_ms = op->cfg.broker_timeout_ns / GAZ_NS_PER_MS,
				    .cert_file = op->cfg.broker_cert_file,
				    .cert_key_file = op->cfg.broker_cert_key_file,
				    .trusted_ca_file = op->cfg.broker_trusted_ca_file};
	pthread_condattr_t ca;
	int rc;

	memset(w, 0, sizeof(*w));
	if ((rc = gaz_client_new(&o, &w->c, st)))
		return rc;
	w->deadline_ns = gaz_mono_ns() + op->cfg.broker_timeout_ns;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->t, NULL, watch, w)) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		gaz_client_free(w->c);
		return gaz_status_set(st, GAZ_ENOMEM, "starting a watchdog thread failed");
	}
	return 0;
}

/* Says which flag is missing when a broker refuses the operator's call
 * for want of authorization (gRPC UNAUTHENTICATED, facts §11). */
static void explain_auth(struct gaz_op *op, struct gaz_status *st)
{
	size_t n = strlen(st->msg);

	if (st->grpc != GAZ_GRPC_UNAUTHENTICATED)
		return;
	if (op->cfg.broker_auth_keys[0] || op->cfg.broker_auth_token[0])
		snprintf(st->msg + n, sizeof(st->msg) - n, " (the broker refused the operator's "
			 "--broker.auth-%s: are they the brokers' keys?)",
			 op->cfg.broker_auth_keys[0] ? "keys" : "token");
	else
		snprintf(st->msg + n, sizeof(st->msg) - n, " (the brokers verify authorization "
			 "tokens: give gazette-operator their --broker.auth-keys)");
}

static void close_client(struct watchdog *w)
{
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->t, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	gaz_client_free(w->c);
}

int gaz_broker_suspend(struct gaz_op *op, const char *journal, struct gaz_status *st)
{
	struct gaz_append_opts o = {.journal = journal,
				    .suspend = PROTOCOL__APPEND_REQUEST__SUSPEND__SUSPEND_NOW};
	Protocol__AppendResponse *resp = NULL;
	struct gaz_appender *a = NULL;
	struct watchdog w;
	int rc;

	if ((rc = open_client(op, &w, st)))
		return rc;
	if ((rc = gaz_appender_begin(w.c, &o, &a, st)) == 0)
		rc = gaz_appender_commit(a, &resp, st);
	if (rc && resp && resp->status == PROTOCOL__STATUS__SUSPENDED) {
		gaz_status_clear(st);
		rc = 0;
	}
	if (rc) {
		explain_auth(op, st);
		gaz_status_prefix(st, "suspending \"%s\" through %s: ", journal,
				  op->cfg.broker_address);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	close_client(&w);
	return rc;
}

/* Fills `out` from fragments sorted by begin (ListFragments' order). */
static void summarise(const Protocol__FragmentsResponse *r, struct gaz_fragsum *out)
{
	int64_t first_local = -1;

	for (size_t i = 0; i < r->n_fragments; i++) {
		const Protocol__Fragment *f = r->fragments[i]->spec;
		if (!f)
			continue;
		if (f->end > out->write_head)
			out->write_head = f->end;
		if (!f->mod_time) {
			out->unpersisted++;
			if (first_local < 0 || f->begin < first_local)
				first_local = f->begin;
		}
	}
	out->persisted_through = first_local >= 0 ? first_local : out->write_head;
}

int gaz_broker_fragments(struct gaz_op *op, const char *journal, struct gaz_fragsum *out,
			 struct gaz_status *st)
{
	struct gaz_fragments_opts o = {.journal = journal};
	Protocol__FragmentsResponse *resp = NULL;
	struct watchdog w;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = open_client(op, &w, st)))
		return rc;
	rc = gaz_client_list_fragments(w.c, &o, &resp, st);
	if (rc == GAZ_EPERM && strstr(st->msg, "SUSPENDED")) {
		gaz_status_clear(st);
		out->suspended = true;
		rc = 0;
	} else if (rc == 0) {
		summarise(resp, out);
	} else {
		explain_auth(op, st);
		gaz_status_prefix(st, "listing fragments of \"%s\" through %s: ", journal,
				  op->cfg.broker_address);
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	close_client(&w);
	return rc;
}

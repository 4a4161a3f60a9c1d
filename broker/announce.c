/*
 * announce.c - the broker's membership in etcd (facts §4.2): a lease kept
 * alive, the BrokerSpec under <root>/members/<zone>#<suffix> on that lease,
 * and the `exiting` mark written on SIGTERM.
 */
#include "broker/broker.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "keyspace/member.h"

/* Packs this broker's BrokerSpec into a malloc'd buffer. */
static uint8_t *broker_spec_pack(struct gaz_broker *b, bool exiting, size_t *len)
{
	Protocol__BrokerSpec spec = PROTOCOL__BROKER_SPEC__INIT;
	Protocol__ProcessSpec ps = PROTOCOL__PROCESS_SPEC__INIT;
	Protocol__ProcessSpec__ID id = PROTOCOL__PROCESS_SPEC__ID__INIT;
	uint8_t *buf;

	id.zone = b->cfg.zone;
	id.suffix = b->cfg.id;
	ps.id = &id;
	ps.endpoint = b->endpoint;
	spec.process_spec = &ps;
	spec.journal_limit = (uint32_t)b->cfg.limit;
	spec.exiting = exiting;
	*len = protocol__broker_spec__get_packed_size(&spec);
	buf = malloc(*len ? *len : 1);
	if (buf)
		protocol__broker_spec__pack(&spec, buf);
	return buf;
}

static void on_lease_lost(void *arg, const char *why)
{
	struct gaz_broker *b = arg;

	gaz_error("unable to keep member lease alive", "err=%s", why);
	atomic_store(&b->lease_lost, true);
	kill(getpid(), SIGTERM);
}

bool gaz_broker_lease_valid(struct gaz_broker *b)
{
	if (atomic_load(&b->lease_lost))
		return false;
	if (!atomic_load(&b->announced) || !b->keepalive)
		return true; /* nothing is assigned to an unannounced broker */
	return gaz_mono_ns() < gaz_etcd_keepalive_valid_until(b->keepalive);
}

int gaz_announce(struct gaz_broker *b, struct gaz_status *st)
{
	int64_t ttl_s = b->cfg.etcd_lease_ns / GAZ_NS_PER_S;
	size_t len;
	uint8_t *val;
	int rc;

	if (ttl_s < 1)
		ttl_s = 1;
	if ((rc = gaz_etcd_lease_grant(b->etcd, ttl_s, &b->lease_id, st)))
		return rc;
	b->keepalive = gaz_etcd_keepalive_start(b->etcd, b->lease_id, ttl_s, on_lease_lost, b, st);
	if (!b->keepalive)
		return st->code ? st->code : GAZ_EUNAVAIL;
	if (!(val = broker_spec_pack(b, false, &len)))
		return gaz_status_set(st, GAZ_ENOMEM, "announce: out of memory");
	while ((rc = gaz_member_put_once(b->etcd, b->member_key, b->lease_id, val, len, st)) == GAZ_EEXIST && !atomic_load(&b->exiting)) {
		/* An earlier process with our id still holds the key until its
		 * lease expires; Gazette retries every 10 s. */
		gaz_warn("member key already exists; retrying", "key=%s", b->member_key);
		gaz_status_clear(st);
		for (int i = 0; i < 20 && !atomic_load(&b->exiting); i++)
			usleep(500 * 1000);
	}
	free(val);
	if (!rc)
		atomic_store(&b->announced, true);
	return rc;
}

int gaz_announce_exiting(struct gaz_broker *b, struct gaz_status *st)
{
	size_t len;
	uint8_t *val = broker_spec_pack(b, true, &len);
	int rc;

	if (!val)
		return gaz_status_set(st, GAZ_ENOMEM, "announce exiting: out of memory");
	rc = gaz_member_update(b->etcd, b->member_key, val, len, st);
	free(val);
	return rc;
}

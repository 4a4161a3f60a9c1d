/*
 * keyspace_values.c - fuzz target: etcd keys and values as a keyspace
 * decodes them on load and on every watch event (lib/keyspace/journals.c,
 * included here for its decode function): items (JournalSpec, or a
 * consumer application's ShardSpec), members (BrokerSpec, ConsumerSpec)
 * and assignments (Route, ReplicaStatus), each unpacked, validated and
 * checked against its key as Gazette's keyspace does, then freed.
 *
 * Input: byte 0 even = a broker's keyspace, odd = a consumer
 * application's; then "<etcd key>\n<value bytes>" under root
 * "/gazette/cluster".
 */
#include "fuzz.h"

#include "../../lib/keyspace/journals.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct journals_ctx c = {.root = "/gazette/cluster", .root_len = 16};
	struct gaz_status st = {0};
	const uint8_t *nl;
	char *key;
	void *v;

	if (size < 1)
		return 0;
	c.shards = data[0] & 1;
	data++, size--;
	nl = size ? memchr(data, '\n', size) : NULL;
	if (!nl)
		return 0;
	key = fuzz_str(data, (size_t)(nl - data));
	v = decode(&c, key, nl + 1, size - (size_t)(nl - data) - 1, &st);
	value_free(&c, v);
	free(key);
	return 0;
}

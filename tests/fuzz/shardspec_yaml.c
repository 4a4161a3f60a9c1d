/*
 * shardspec_yaml.c - fuzz target: the shard set YAML of `gazctl shards
 * apply` (client/lib/shardspec_yaml.c, on libyaml and client/lib/
 * yaml_util.c, duration.c): parse, validate the ApplyRequest as the
 * consumer's Apply handler does (lib/protocol/shard.c), and encode it.
 *
 * Input: the YAML text as it would be read from a file or stdin.
 */
#include "fuzz.h"

#include "common/err.h"
#include "gazette/shardspec_yaml.h"
#include "protocol/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Consumer__ApplyRequest *req = NULL;
	struct gaz_status st = {0};

	if (gaz_shardspec_yaml_parse((const char *)data, size, &req, &st))
		return 0;
	gaz_validate_shard_apply_request(req, &st);
	fuzz_pack(&req->base);
	gaz_shardspec_apply_free(req);
	return 0;
}

/*
 * journalspec_yaml.c - fuzz target: the JournalSpec YAML of `gazctl
 * journals apply` (client/lib/journalspec_yaml.c, on libyaml and
 * client/lib/yaml_util.c, duration.c, journalspec_tree.c): parse, then
 * what cmd_apply.c does with a parsed tree, validate the ApplyRequest
 * (lib/protocol), and encode it (protobuf-c pack, as the RPC sends it).
 *
 * Input: the YAML text as it would be read from a file or stdin.
 */
#include "fuzz.h"

#include "common/err.h"
#include "gazette/journalspec_yaml.h"
#include "protocol/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Protocol__ApplyRequest *req = NULL;
	struct gaz_status st = {0};

	if (gaz_journalspec_yaml_parse((const char *)data, size, &req, &st))
		return 0;
	gaz_validate_apply_request(req, &st);
	fuzz_pack(&req->base);
	gaz_journalspec_apply_free(req);
	return 0;
}

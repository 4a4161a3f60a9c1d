/*
 * cmd_print_config.c - `gazctl print-config`: parse the combined
 * configuration (gazctl.ini, environment, flags) of every command and
 * write it to stdout as INI, the way go-flags' IniParser does for Gazette
 * (sections [attach-uuids], [journals], [journals.Logging],
 * [journals.Broker], one per journals command, then the same for shards;
 * defaults commented out).
 */
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"


static size_t count(const struct gaz_flag *t)
{
	size_t n = 0;

	while (t && t[n].name)
		n++;
	return n;
}

/* Storage of the `shards` group's global options while printing: the
 * run-time table shares gazctl_cfg with `journals` (only one group runs at
 * a time), but each has its own INI section. */
union slot {
	char *s;
	int64_t i;
	bool b;
};

static void append(struct gaz_flag **t, size_t *n, const struct gaz_flag *add, union slot *own)
{
	size_t k = count(add);

	*t = gazctl_xrealloc(*t, (*n + k + 1) * sizeof(**t));
	memcpy(*t + *n, add, k * sizeof(**t));
	for (size_t i = 0; own && i < k; i++)
		(*t)[*n + i].ptr = &own[i];
	*n += k;
	memset(*t + *n, 0, sizeof(**t));
}

/* all_flags: every option of gazctl, in Gazette's section order:
 * attach-uuids, the journals group and its commands, the shards group and
 * its commands. *slots is the shards group's own storage (free it). */
static struct gaz_flag *all_flags(union slot **slots)
{
	struct gaz_flag *t = NULL;
	size_t n = 0;

	*slots = gazctl_xcalloc(count(gazctl_shards_flags) + 1, sizeof(**slots));
	append(&t, &n, gazctl_attach_uuids_flags, NULL);
	append(&t, &n, gazctl_global_flags, NULL);
	for (size_t i = 0; gazctl_journals_cmds[i]; i++)
		append(&t, &n, gazctl_journals_cmds[i]->flags, NULL);
	append(&t, &n, gazctl_shards_flags, *slots);
	for (size_t i = 0; gazctl_shards_cmds[i]; i++)
		append(&t, &n, gazctl_shards_cmds[i]->flags, NULL);
	for (size_t i = 0; i < n; i++)
		t[i].flags &= ~GAZ_FLAG_REQUIRED; /* nothing is required to print */
	return t;
}

int gazctl_print_config(int argc, char **argv, struct gaz_status *st)
{
	static char ini[4096];
	struct gaz_flags f = {.prog = "gazctl", .usage = "[OPTIONS] print-config",
			      .description = "print-config parses the combined configuration from "
					     "gazctl.ini, flags,\nand environment variables, and "
					     "then writes the configuration to stdout in INI format."};
	union slot *slots;
	int rc;

	f.table = all_flags(&slots);
	f.ini_path = gaz_flags_find_ini("gazctl.ini", ini, sizeof(ini)) == 0 ? ini : NULL;
	rc = gaz_flags_parse(&f, argc, argv, st);
	if (rc == 0)
		gaz_flags_print_ini(&f, stdout);
	if (rc == GAZ_FLAGS_HELP) { /* go-flags' ErrHelp: version, exit 1 */
		fflush(stdout);
		gaz_flags_print_version(stderr);
	}
	gaz_flags_release(&f);
	free((void *)f.table);
	free(slots);
	return rc;
}

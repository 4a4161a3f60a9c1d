/*
 * cmd_print_config.c - `gazctl print-config`: parse the combined
 * configuration (gazctl.ini, environment, flags) of every journals
 * command and write it to stdout as INI, the way go-flags' IniParser does
 * for Gazette (sections [journals], [journals.Logging], [journals.Broker],
 * then one per command; defaults commented out).
 */
#include <stdlib.h>
#include <string.h>

#include "client/gazctl/gazctl.h"


static size_t ncmds(void)
{
	size_t n = 0;

	while (gazctl_journals_cmds[n])
		n++;
	return n;
}

static size_t count(const struct gaz_flag *t)
{
	size_t n = 0;

	while (t && t[n].name)
		n++;
	return n;
}

/* all_flags concatenates the global table and every command's table. */
static struct gaz_flag *all_flags(void)
{
	size_t n = count(gazctl_global_flags), at;
	struct gaz_flag *t;

	for (size_t i = 0; i < ncmds(); i++)
		n += count(gazctl_journals_cmds[i]->flags);
	t = gazctl_xcalloc(n + 1, sizeof(*t));
	at = count(gazctl_global_flags);
	memcpy(t, gazctl_global_flags, at * sizeof(*t));
	for (size_t i = 0; i < ncmds(); i++) {
		size_t k = count(gazctl_journals_cmds[i]->flags);
		memcpy(t + at, gazctl_journals_cmds[i]->flags, k * sizeof(*t));
		at += k;
	}
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
	int rc;

	f.table = all_flags();
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
	return rc;
}

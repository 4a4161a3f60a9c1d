/*
 * fragment_name.c - fuzz target: fragment file names as a store listing
 * or a FragmentsResponse names them (lib/fragment/fragment.c:
 * gaz_fragment_parse_path). A name that parses must print back
 * (gaz_fragment_content_path) to a path that parses to an equal fragment,
 * as Gazette's ParseSpoolName round-trips ContentName (for a valid
 * journal name: the path is path.Join's).
 *
 * Input: "<journal>\n<path relative to the journal's directory>".
 */
#include "fuzz.h"

#include <stdio.h>

#include "fragment/fragment.h"
#include "protocol/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gaz_fragment f, g;
	struct gaz_status st = {0};
	char *journal, *rel, path[GAZ_FRAGMENT_PATH_MAX], name[GAZ_FRAGMENT_NAME_MAX];

	fuzz_split2(data, size, &journal, &rel);
	if (gaz_fragment_parse_path(journal, rel, &f, &st) == 0) {
		gaz_fragment_content_name(&f, name, sizeof(name), &st);
		/* path.Join cleans: the round trip holds for valid journal names. */
		bool valid = gaz_validate_journal(journal, NULL) == 0 && !strchr(journal, ';');
		if (valid && gaz_fragment_content_path(&f, path, sizeof(path), &st) == 0) {
			size_t jl = strlen(journal);
			/* The path is "<journal>/<postfix>/<name>": parse what follows the journal. */
			if (strncmp(path, journal, jl) || path[jl] != '/' ||
			    gaz_fragment_parse_path(journal, path + jl + 1, &g, &st)) {
				fprintf(stderr, "content path %s of %s does not parse back: %s\n", path, rel,
					st.msg);
				abort();
			}
			if (!gaz_fragment_equal(&f, &g)) {
				fprintf(stderr, "content path %s of %s parses to another fragment\n", path, rel);
				abort();
			}
			gaz_fragment_release(&g);
		}
		gaz_fragment_release(&f);
	}
	free(journal);
	free(rel);
	return 0;
}

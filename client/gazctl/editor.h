/*
 * editor.h - gazctl's edit loop (editor.c): list specs into a temporary
 * file, open $GAZ_EDITOR / $EDITOR / vi on it, apply what the user saved,
 * and reopen the editor with the error when applying fails (Gazette's
 * gazctlcmd/editor).
 */
#ifndef GAZ_GAZCTL_EDITOR_H
#define GAZ_GAZCTL_EDITOR_H

#include <stdbool.h>
#include <stddef.h>

#include "client/gazctl/gazctl.h"

struct gazctl_edit {
	const char *file_prefix; /* temporary file name prefix, "gazctl-shards-edit-" */
	/* select writes the specs to edit into *text (malloc'd, *len bytes). */
	int (*select)(void *arg, char **text, size_t *len, struct gaz_status *st);
	/* apply applies the edited text; on failure it sets *retry when the
	 * error is the user's to fix (decode, validation), so the editor
	 * reopens with it, else the loop ends with the error. */
	int (*apply)(void *arg, const char *text, size_t len, bool *retry, struct gaz_status *st);
	void *arg;
	bool abort_if_unchanged; /* an unchanged file cancels */
};

/* gazctl_edit_loop runs the loop. Returns 0 (applied, or cancelled by an
 * empty or unchanged file) or the error of select, the editor, or apply. */
int gazctl_edit_loop(const struct gazctl_edit *e, struct gaz_status *st);

#endif

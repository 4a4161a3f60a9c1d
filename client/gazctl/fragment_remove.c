/*
 * fragment_remove.c - removing persisted fragments from their stores, for
 * `journals prune` and `shards prune`: each backing store is opened once
 * (file:// rooted at --file-root; s3:// with the environment's
 * credentials), a fragment is removed at its content path, and what
 * happened is printed: "would prune"/"pruned <store><path> (N bytes)" on
 * stdout, a failure on stderr naming the fragment. A dry run opens the
 * stores (so a run that cannot work says so) but removes nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"
#include "store/store.h"

/* One opened (or unopenable) store, by backing_store URL. */
struct gazctl_store_slot {
	char *url;             /* owned */
	struct gaz_store *s;   /* one reference; NULL when opening failed */
	struct gaz_status err; /* why opening failed */
};

/* store_for returns the slot for `url`, opening it on first use. */
static struct gazctl_store_slot *store_for(struct gazctl_remover *r, const char *url)
{
	struct gazctl_store_slot *slot;

	for (size_t i = 0; i < r->nstores; i++)
		if (!strcmp(r->stores[i].url, url))
			return &r->stores[i];
	r->stores = gazctl_xrealloc(r->stores, (r->nstores + 1) * sizeof(*r->stores));
	slot = &r->stores[r->nstores++];
	memset(slot, 0, sizeof(*slot));
	slot->url = gazctl_xstrdup(url);
	if (!strncasecmp(url, "file:", 5) && (!r->file_root || !*r->file_root)) {
		gaz_status_set(&slot->err, GAZ_EINVAL,
		               "file:// store \"%s\" needs --file-root (the directory that "
		               "roots it, as the broker's --broker.file-root)",
		               url);
		return slot;
	}
	if (gaz_store_open(url, r->file_root, &slot->s, &slot->err))
		slot->s = NULL;
	return slot;
}

int gazctl_remove_fragment(struct gazctl_remover *r, const Protocol__Fragment *pb,
			   const char *journal)
{
	struct gaz_fragment f = {0};
	struct gaz_status st = {0};
	struct gazctl_store_slot *slot = store_for(r, pb->backing_store);
	char path[GAZ_FRAGMENT_PATH_MAX] = "";
	int rc;

	if ((rc = gaz_fragment_from_proto(&f, pb, &st)) == 0)
		rc = gaz_fragment_content_path(&f, path, sizeof(path), &st);
	gaz_fragment_release(&f);
	if (rc == 0 && !slot->s)
		rc = gaz_status_set(&st, slot->err.code ? slot->err.code : GAZ_EINVAL, "%s",
		                    slot->err.msg);
	if (rc == 0 && !r->dry_run)
		rc = gaz_store_remove(slot->s, path, &st);
	if (rc == 0)
		printf("%s %s%s (%lld bytes)\n", r->dry_run ? "would prune" : "pruned",
		       pb->backing_store, path, (long long)(pb->end - pb->begin));
	else if (rc == GAZ_ENOTFOUND)
		gaz_warn("fragment was already removed from its store", "journal=%s fragment=%s%s",
		         journal, pb->backing_store, path);
	else
		fprintf(stderr,
		        "gazctl: failed to prune fragment %s%s [%lld, %lld) of \"%s\": %s\n",
		        pb->backing_store, path, (long long)pb->begin, (long long)pb->end, journal,
		        st.msg[0] ? st.msg : gaz_err_str(rc));
	return rc;
}

void gazctl_remover_release(struct gazctl_remover *r)
{
	for (size_t i = 0; i < r->nstores; i++) {
		gaz_store_unref(r->stores[i].s);
		free(r->stores[i].url);
	}
	free(r->stores);
	r->stores = NULL;
	r->nstores = 0;
}

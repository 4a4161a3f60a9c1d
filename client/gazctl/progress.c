/*
 * progress.c - a progress line on stderr for long appends and reads:
 * "appended 512.0 MiB (85.3 MiB/s)", redrawn in place with '\r'. Shown only
 * when enabled (stderr is a terminal) and after one second, so short or
 * scripted runs print nothing. Updates may come from several threads; a
 * mutex serialises drawing.
 */
#include <pthread.h>
#include <stdio.h>

#include "client/gazctl/gazctl.h"
#include "common/clock.h"

static pthread_mutex_t draw_mu = PTHREAD_MUTEX_INITIALIZER;

void gazctl_progress_init(struct gazctl_progress *p, const char *verb, bool enabled)
{
	p->verb = verb;
	p->enabled = enabled;
	p->shown = false;
	p->start_ns = p->last_ns = gaz_mono_ns();
}

static void draw(struct gazctl_progress *p, int64_t bytes, int64_t now)
{
	char size[32], rate[32];
	double secs = (double)(now - p->start_ns) / 1e9;

	gazctl_ibytes((uint64_t)bytes, size, sizeof(size));
	gazctl_ibytes((uint64_t)(secs > 0 ? (double)bytes / secs : 0), rate, sizeof(rate));
	fprintf(stderr, "\r%s %s (%s/s)\033[K", p->verb, size, rate);
	fflush(stderr);
	p->shown = true;
	p->last_ns = now;
}

void gazctl_progress_update(struct gazctl_progress *p, int64_t bytes)
{
	int64_t now;

	if (!p->enabled)
		return;
	now = gaz_mono_ns();
	pthread_mutex_lock(&draw_mu);
	if (now - p->start_ns >= GAZ_NS_PER_S && now - p->last_ns >= GAZ_NS_PER_S / 4)
		draw(p, bytes, now);
	pthread_mutex_unlock(&draw_mu);
}

void gazctl_progress_done(struct gazctl_progress *p, int64_t bytes)
{
	if (!p->enabled)
		return;
	pthread_mutex_lock(&draw_mu);
	if (p->shown) {
		draw(p, bytes, gaz_mono_ns());
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&draw_mu);
}

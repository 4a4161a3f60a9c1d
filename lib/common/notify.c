/* notify.c - waiter lists. See notify.h. */
#include "common/notify.h"

void gaz_notifier_init(struct gaz_notifier *n)
{
	pthread_mutex_init(&n->mu, NULL);
	n->head = NULL;
}

void gaz_notifier_release(struct gaz_notifier *n)
{
	pthread_mutex_destroy(&n->mu);
}

void gaz_notifier_add(struct gaz_notifier *n, struct gaz_waiter *w)
{
	pthread_mutex_lock(&n->mu);
	w->prev = NULL;
	w->next = n->head;
	if (n->head)
		n->head->prev = w;
	n->head = w;
	pthread_mutex_unlock(&n->mu);
}

void gaz_notifier_remove(struct gaz_notifier *n, struct gaz_waiter *w)
{
	pthread_mutex_lock(&n->mu);
	if (w->prev)
		w->prev->next = w->next;
	else if (n->head == w)
		n->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	pthread_mutex_unlock(&n->mu);
}

void gaz_notifier_broadcast(struct gaz_notifier *n)
{
	pthread_mutex_lock(&n->mu);
	for (struct gaz_waiter *w = n->head; w; w = w->next)
		w->wake(w->arg);
	pthread_mutex_unlock(&n->mu);
}

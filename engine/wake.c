/*
 * wake.c - see wake.h.
 */
#include "config.h"
#include "engine/wake.h"

#include <errno.h>

void wake_init(struct wake *w)
{
	pthread_mutex_init(&w->lock, NULL);
	w->gen = 0;
	w->head = NULL;
	w->nparked = 0;
}

void wake_destroy(struct wake *w)
{
	pthread_mutex_destroy(&w->lock);
}

uint64_t wake_capture(struct wake *w)
{
	uint64_t g;

	pthread_mutex_lock(&w->lock);
	g = w->gen;
	pthread_mutex_unlock(&w->lock);
	return g;
}

int wake_park(struct wake *w, uint64_t gen, struct wake_waiter *wt)
{
	pthread_mutex_lock(&w->lock);
	if (w->gen != gen) {
		pthread_mutex_unlock(&w->lock);
		return -EAGAIN;
	}
	wt->prev = NULL;
	wt->next = w->head;
	if (w->head)
		w->head->prev = wt;
	w->head = wt;
	wt->parked = true;
	w->nparked++;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

bool wake_unpark(struct wake *w, struct wake_waiter *wt)
{
	bool was;

	pthread_mutex_lock(&w->lock);
	was = wt->parked;
	if (was) {
		if (wt->prev)
			wt->prev->next = wt->next;
		else
			w->head = wt->next;
		if (wt->next)
			wt->next->prev = wt->prev;
		wt->parked = false;
		w->nparked--;
	}
	pthread_mutex_unlock(&w->lock);
	return was;
}

uint32_t wake_close(struct wake *w)
{
	struct wake_waiter *list;
	uint32_t n = 0;

	pthread_mutex_lock(&w->lock);
	w->gen++;
	list = w->head;
	w->head = NULL;
	for (struct wake_waiter *p = list; p; p = p->next)
		p->parked = false;
	w->nparked = 0;
	pthread_mutex_unlock(&w->lock);
	/* Invariant 2: off the list, no lock held.  The owner may free the
	 * waiter inside fn, so read next first. */
	while (list) {
		struct wake_waiter *next = list->next;

		list->fn(list);
		list = next;
		n++;
	}
	return n;
}

uint32_t wake_parked(struct wake *w)
{
	uint32_t n;

	pthread_mutex_lock(&w->lock);
	n = w->nparked;
	pthread_mutex_unlock(&w->lock);
	return n;
}

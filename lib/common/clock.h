/* clock.h - monotonic and wall time helpers. Units are in the names. */
#ifndef GAZ_COMMON_CLOCK_H
#define GAZ_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#define GAZ_NS_PER_MS INT64_C(1000000)
#define GAZ_NS_PER_S INT64_C(1000000000)
/* A deadline that never passes. */
#define GAZ_DEADLINE_NEVER INT64_MAX

/* gaz_mono_ns: CLOCK_MONOTONIC in nanoseconds. */
static inline int64_t gaz_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * GAZ_NS_PER_S + ts.tv_nsec;
}

/* gaz_wall_ns: CLOCK_REALTIME in nanoseconds since the Unix epoch. */
static inline int64_t gaz_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * GAZ_NS_PER_S + ts.tv_nsec;
}

/* gaz_deadline_in: a monotonic deadline `ms` milliseconds from now. */
static inline int64_t gaz_deadline_in(int64_t ms)
{
	return gaz_mono_ns() + ms * GAZ_NS_PER_MS;
}

/* gaz_abstime_of converts a monotonic deadline to a timespec for
 * pthread_cond_timedwait on a condvar set to CLOCK_MONOTONIC. */
static inline struct timespec gaz_abstime_of(int64_t deadline_ns)
{
	struct timespec ts;
	if (deadline_ns == GAZ_DEADLINE_NEVER)
		deadline_ns = gaz_mono_ns() + INT64_C(3600) * GAZ_NS_PER_S * 24 * 365;
	ts.tv_sec = deadline_ns / GAZ_NS_PER_S;
	ts.tv_nsec = deadline_ns % GAZ_NS_PER_S;
	return ts;
}

#endif

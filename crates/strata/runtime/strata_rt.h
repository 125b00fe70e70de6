/* strata runtime: the few platform services emitted code needs.
 * Kernels are written in the PULP style: every core runs the same function
 * on the same argument struct and picks its share of the work by core id.
 * On the host the cores run one after another; on PULP the fork is
 * pi_cl_team_fork. Kernels never need a barrier inside one fork: each core
 * writes disjoint outputs. */
#ifndef STRATA_RT_H
#define STRATA_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef ST_NUM_CORES
#define ST_NUM_CORES 8
#endif

#define ST_NO_IGNORE (-0x7fffffffffffffffLL - 1)

typedef void (*st_task_fn)(void *args);

/* Id of the calling core, 0 .. ST_NUM_CORES-1. */
int st_core_id(void);
/* Run fn(args) on every core of the cluster and wait for all of them. */
void st_fork(st_task_fn fn, void *args);

/* This core's half-open share [*lo, *hi) of n work items. */
static inline void st_split(size_t n, size_t *lo, size_t *hi) {
    size_t chunk = (n + ST_NUM_CORES - 1) / ST_NUM_CORES;
    size_t a = (size_t)st_core_id() * chunk;
    size_t b = a + chunk;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

#endif

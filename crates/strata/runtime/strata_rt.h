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
/* DMA between memory levels. A transfer moves c1 x c0 runs of `bytes`
 * contiguous bytes; run (j, i) starts at j*ss1 + i*ss0 in the source and
 * j*ds1 + i*ds0 in the destination (c0 = c1 = 1: a 1D transfer). `id`
 * names it for st_dma_wait; its data may be read only after that wait.
 * On the host the copy happens at once and the wait has nothing to do. */
void st_dma(uint32_t id, void *dst, const void *src, uint32_t bytes, uint32_t c0,
            uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);
void st_dma_wait(uint32_t id);

#endif

#define ST_NO_IGNORE (-0x7fffffffffffffffLL - 1)

/* Run-time faults. A kernel that meets run-time data it cannot process (an
 * index or a class label out of range) records the first fault here, skips
 * that element (reads nothing out of bounds) and goes on; the results of
 * that step are unspecified. The caller checks st_fault_code after a step;
 * 0: no fault. */
#define ST_FAULT_INDEX 1 /* Gather, MaxPoolGrad: index out of range */
#define ST_FAULT_LABEL 2 /* a loss: label out of range and not ignore_index */
extern volatile int st_fault_code;
static inline void st_fault(int code) {
    if (!st_fault_code) st_fault_code = code;
}
/* What a fault code means, for messages. */
const char *st_fault_name(int code);

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

/* DMA between memory levels. A transfer moves c1 x c0 runs of `bytes`
 * contiguous bytes; run (j, i) starts at j*ss1 + i*ss0 in the source and
 * j*ds1 + i*ds0 in the destination (c0 = c1 = 1: a 1D transfer). `id`
 * names it for st_dma_wait; its data may be read only after that wait.
 * On the host the copy happens at once and the wait has nothing to do. */
void st_dma(uint32_t id, void *dst, const void *src, uint32_t bytes, uint32_t c0,
            uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);
void st_dma_wait(uint32_t id);

/* Transfers between L3 (HyperRAM: not addressable from the cluster; an L3
 * location is a byte offset into the L3 arena) and L2, with the shape
 * arguments of st_dma, completed by st_dma_wait(id). st_ram_attach names
 * the L3 arena once, before any transfer; every transfer must stay inside
 * it (a transfer past it stops the program with a message). */
void st_ram_attach(uint8_t *base, uint32_t bytes);
void st_ram_read(uint32_t id, void *dst, uint32_t l3_off, uint32_t bytes, uint32_t c0,
                 uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);
void st_ram_write(uint32_t id, uint32_t l3_off, const void *src, uint32_t bytes, uint32_t c0,
                  uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);

/* Pairwise summation of a stream, for the sums that feed statistics and
 * gradients (BatchNorm and LayerNorm statistics, dW and dB, reductions,
 * losses): its error grows with log2 of the length, not linearly. s[i]
 * holds the sum of a block of 2^i terms; the set bits of n say which are
 * full. Adding a term merges equal blocks (older + newer) like a binary
 * carry; the total adds the blocks from the smallest up. The reference
 * kernels (ops::util::Psum) do exactly the same additions. */
typedef struct {
    float s[32];
    uint32_t n; /* at most 2^32 - 1 terms */
} st_psum;
static inline void st_psum_init(st_psum *p) { p->n = 0; }
static inline void st_psum_add(st_psum *p, float v) {
    int i = 0;
    while ((p->n >> i) & 1u) {
        v = p->s[i] + v;
        i++;
    }
    p->s[i] = v;
    p->n++;
}
static inline float st_psum_total(const st_psum *p) {
    float t = 0.0f;
    int first = 1;
    for (int i = 0; i < 32; i++) {
        if ((p->n >> i) & 1u) {
            t = first ? p->s[i] : p->s[i] + t;
            first = 0;
        }
    }
    return t;
}

#endif

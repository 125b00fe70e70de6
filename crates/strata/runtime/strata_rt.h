/* strata runtime: the few platform services emitted code needs (the target
 * API below), run-time faults and pairwise sums.
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

/* ---- The target API --------------------------------------------------
 * Everything emitted code and the harness need of a machine. Each target
 * implements it in one file: strata_host.c (the build machine: cores run
 * one after another, DMA is memcpy) or strata_pulp.c (the PULP SDK's
 * PMSIS). Nothing else in a project differs between targets. */

/* Memory levels, as st_store / st_load / st_fill name them. */
#define ST_L1 1
#define ST_L2 2
#define ST_L3 3
/* Arena bases are aligned to this many bytes (strata's plan::ALIGN). */
#define ST_ALIGN 16

/* Arena bases of the addressable levels, set by st_init; NULL for a level
 * without an arena. L3 (HyperRAM) is not addressable: its locations are
 * byte offsets into the L3 arena, moved with st_ram_read / st_ram_write. */
extern uint8_t *st_l1, *st_l2;

/* Open the machine and allocate each arena (a level of 0 bytes gets no
 * allocation). Returns 0, or -1 after printing what failed. */
int st_init(uint32_t l1_bytes, uint32_t l2_bytes, uint32_t l3_bytes);
/* Free the arenas and close the machine. */
void st_close(void);
/* Run fn(arg) where the program runs (on PULP: the cluster's master core)
 * and wait for it. Steps, st_store/st_load and the cycle counter are used
 * inside it. Returns 0, or -1 when it could not be started. */
int st_run(st_task_fn fn, void *arg);

/* Id of the calling core, 0 .. ST_NUM_CORES-1. */
int st_core_id(void);
/* Run fn(args) on every core of the cluster and wait for all of them. */
void st_fork(st_task_fn fn, void *args);
/* Wait until every core of the current fork reaches it. Kernels need none
 * (each core writes disjoint outputs); on the host, where the cores of a
 * fork run one after another, it can only be called outside a fork. */
void st_barrier(void);

/* DMA between L2 and L1. A transfer moves c1 x c0 runs of `bytes`
 * contiguous bytes; run (j, i) starts at j*ss1 + i*ss0 in the source and
 * j*ds1 + i*ds0 in the destination (c0 = c1 = 1: a 1D transfer). `id`
 * names it for st_dma_wait; its data may be read only after that wait,
 * and neither side may be touched before it. */
void st_dma(uint32_t id, void *dst, const void *src, uint32_t bytes, uint32_t c0,
            uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);
/* Transfers between L3 and L2, shaped as st_dma, asynchronous, completed
 * by st_dma_wait(id): the L3 side is a byte offset into the L3 arena. */
void st_ram_read(uint32_t id, void *dst_l2, uint32_t l3_off, uint32_t bytes, uint32_t c0,
                 uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1);
void st_ram_write(uint32_t id, uint32_t l3_off, const void *src_l2, uint32_t bytes,
                  uint32_t c0, uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1,
                  uint32_t ds1);
/* Wait for every command of transfer `id` (st_dma, st_ram_read, st_ram_write). */
void st_dma_wait(uint32_t id);
/* Blocking copies to and from the L3 arena, for the harness. */
void st_l3_store(uint32_t l3_off, const void *src, uint32_t bytes);
void st_l3_load(void *dst, uint32_t l3_off, uint32_t bytes);

/* The cycle counter (on PULP the cluster's performance counter; on the
 * host the processor time in clock() ticks). */
void st_cycles_reset(void);
void st_cycles_start(void);
void st_cycles_stop(void);
uint32_t st_cycles_read(void);

/* ---- Built on the target API (strata_rt.c) ---------------------------- */

/* Copy to, fill or copy from `bytes` bytes at offset `off` of a level's
 * arena (ST_L1, ST_L2 or ST_L3): how the harness reaches a tensor at home,
 * whichever level that is. */
void st_store(int level, uint32_t off, const void *src, uint32_t bytes);
void st_fill(int level, uint32_t off, int value, uint32_t bytes);
void st_load(void *dst, int level, uint32_t off, uint32_t bytes);

/* ---- Checked builds ---------------------------------------------------
 * With ST_CHECKED (the PULP target built against strata's host PMSIS,
 * pulp_host/), every kernel operand's byte range is checked to lie inside
 * an arena or a registered read-only constant before the call, and every
 * step ends with no transfer in flight. Without it (the host, real
 * silicon) the macros are no-ops. */
#define ST_HARNESS_NODE 0xffffffffu
#ifdef ST_CHECKED
void st_check_access(const void *p, uint32_t bytes, uint32_t node, uint32_t operand);
void st_check_const(const void *p, uint32_t bytes, const char *name);
void st_check_idle(const char *step);
#define ST_ACCESS(p, bytes, node, operand) st_check_access((p), (bytes), (node), (operand))
#define ST_CONST(p, bytes, name) st_check_const((p), (bytes), (name))
#define ST_STEP_END(step) st_check_idle(step)
#else
#define ST_ACCESS(p, bytes, node, operand) ((void)0)
#define ST_CONST(p, bytes, name) ((void)0)
#define ST_STEP_END(step) ((void)0)
#endif

/* This core's half-open share [*lo, *hi) of n work items. */
static inline void st_split(size_t n, size_t *lo, size_t *hi) {
    size_t chunk = (n + ST_NUM_CORES - 1) / ST_NUM_CORES;
    size_t a = (size_t)st_core_id() * chunk;
    size_t b = a + chunk;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

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

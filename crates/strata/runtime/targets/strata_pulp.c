/* The target API on PULP, through the PULP SDK's PMSIS: a cluster task runs
 * the program on the cluster's master core, st_fork is pi_cl_team_fork,
 * L1 and L2 arenas come from pmsis_l1_malloc / pi_l2_malloc, L2<->L1
 * transfers are cluster DMA commands, L3 is a HyperRAM allocation reached
 * with cluster-side RAM copies, and the cycle counter is the cluster's.
 *
 * One transfer of the program (an id) becomes one or more PMSIS commands:
 * a command carries at most 65,535 bytes (the SDK's 16-bit size field),
 * a 2D command is strided on the L2 (or RAM) side only, with 16-bit stride
 * and line length, and a 3D transfer is a loop of 2D commands. Commands
 * in flight take one of ST_CMDS slots (the DMA's hardware counters); when
 * all are taken the oldest is waited for first, which only waits early.
 *
 * Built with ST_CHECKED against strata's host PMSIS (pulp_host/), it also
 * checks the program's transfer ids (no id reused while in flight, no wait
 * on an id not in flight, none in flight at the end of a step) and every
 * kernel operand's bytes; on silicon those checks compile away. */
#include <stdio.h>

#include "pmsis.h"
#include "bsp/ram.h"
#include "bsp/ram/hyperram.h"

#include "strata_rt.h"

#if defined(ST_CHECKED) && !defined(PMSIS_HOST)
#error "ST_CHECKED needs strata's host PMSIS (pulp_host/)"
#endif

#ifndef ST_STACK_SIZE
#define ST_STACK_SIZE 12000
#endif
#ifndef ST_SLAVE_STACK_SIZE
#define ST_SLAVE_STACK_SIZE 3800
#endif
#ifndef ST_CMDS
#define ST_CMDS 16
#endif
/* The most bytes, 2D stride or line length one command carries. */
#define ST_CMD_MAX 65535u
/* The L2 buffer st_l3_store / st_l3_load go through (the RAM is reached
 * from L2 only; the caller's bytes may be anywhere, e.g. on a stack in L1). */
#define ST_BOUNCE 1024u

uint8_t *st_l1, *st_l2;
static uint32_t st_l1_bytes, st_l2_bytes, st_l3_bytes;
static void *st_l1_block, *st_l2_block;
static uint32_t st_l3_base;
static struct pi_device st_cluster_dev, st_ram_dev;
static struct pi_cluster_conf st_cluster_conf;
static struct pi_hyperram_conf st_ram_conf;
static struct pi_cluster_task st_task;
static uint8_t *st_bounce;

#ifdef ST_CHECKED
#define ST_FAIL(...) pi_host_fail(__VA_ARGS__)
#else
#define ST_FAIL(...) ((void)0)
#endif

/* An arena base aligned to ST_ALIGN inside a block ST_ALIGN bytes larger. */
static uint8_t *st_aligned(void *block) {
    uint8_t *p = (uint8_t *)block;
    return p + (ST_ALIGN - (uintptr_t)p % ST_ALIGN) % ST_ALIGN;
}

int st_init(uint32_t l1_bytes, uint32_t l2_bytes, uint32_t l3_bytes) {
    pi_cluster_conf_init(&st_cluster_conf);
    st_cluster_conf.id = 0;
    pi_open_from_conf(&st_cluster_dev, &st_cluster_conf);
    if (pi_cluster_open(&st_cluster_dev)) {
        printf("st_init: cannot open the cluster\n");
        return -1;
    }
    if (l1_bytes) {
        st_l1_block = pmsis_l1_malloc(l1_bytes + ST_ALIGN);
        if (!st_l1_block) {
            printf("st_init: cannot allocate the L1 arena (%lu bytes)\n", (unsigned long)l1_bytes);
            return -1;
        }
        st_l1 = st_aligned(st_l1_block);
        st_l1_bytes = l1_bytes;
#ifdef ST_CHECKED
        pi_host_name(st_l1, l1_bytes, "the L1 arena");
#endif
    }
    if (l2_bytes) {
        st_l2_block = pi_l2_malloc((int)(l2_bytes + ST_ALIGN));
        if (!st_l2_block) {
            printf("st_init: cannot allocate the L2 arena (%lu bytes)\n", (unsigned long)l2_bytes);
            return -1;
        }
        st_l2 = st_aligned(st_l2_block);
        st_l2_bytes = l2_bytes;
#ifdef ST_CHECKED
        pi_host_name(st_l2, l2_bytes, "the L2 arena");
#endif
    }
    if (l3_bytes) {
        pi_hyperram_conf_init(&st_ram_conf);
        pi_open_from_conf(&st_ram_dev, &st_ram_conf);
        if (pi_ram_open(&st_ram_dev)) {
            printf("st_init: cannot open the HyperRAM\n");
            return -1;
        }
        if (pi_ram_alloc(&st_ram_dev, &st_l3_base, l3_bytes)) {
            printf("st_init: cannot allocate the L3 arena (%lu bytes)\n", (unsigned long)l3_bytes);
            return -1;
        }
        st_l3_bytes = l3_bytes;
        st_bounce = (uint8_t *)pi_l2_malloc((int)ST_BOUNCE);
        if (!st_bounce) {
            printf("st_init: cannot allocate the L3 staging buffer (%u bytes)\n", ST_BOUNCE);
            return -1;
        }
#ifdef ST_CHECKED
        pi_host_name(st_bounce, ST_BOUNCE, "the L3 staging buffer");
        pi_host_name((const void *)(uintptr_t)st_l3_base, l3_bytes, "the L3 arena");
#endif
    }
    return 0;
}

void st_close(void) {
    if (st_l3_bytes) {
        pi_l2_free(st_bounce, (int)ST_BOUNCE);
        st_bounce = NULL;
        pi_ram_free(&st_ram_dev, st_l3_base, st_l3_bytes);
        pi_ram_close(&st_ram_dev);
    }
    if (st_l2_block) pi_l2_free(st_l2_block, (int)(st_l2_bytes + ST_ALIGN));
    if (st_l1_block) pmsis_l1_malloc_free(st_l1_block, st_l1_bytes + ST_ALIGN);
    pi_cluster_close(&st_cluster_dev);
    st_l1 = st_l2 = NULL;
    st_l1_block = st_l2_block = NULL;
    st_l1_bytes = st_l2_bytes = st_l3_bytes = 0;
}

int st_run(st_task_fn fn, void *arg) {
    pi_cluster_task(&st_task, fn, arg);
    st_task.stack_size = ST_STACK_SIZE;
    st_task.slave_stack_size = ST_SLAVE_STACK_SIZE;
    return pi_cluster_send_task_to_cl(&st_cluster_dev, &st_task) ? -1 : 0;
}

int st_core_id(void) { return (int)pi_core_id(); }
void st_fork(st_task_fn fn, void *args) { pi_cl_team_fork(ST_NUM_CORES, fn, args); }
void st_barrier(void) { pi_cl_team_barrier(); }

/* ---- Transfers ---- */

typedef struct {
    uint32_t id;
    uint32_t seq;
    uint8_t busy;
    uint8_t ram;
    pi_cl_dma_cmd_t dma;
    pi_cl_ram_req_t req;
} st_cmd_t;

static st_cmd_t st_cmds[ST_CMDS];
static uint32_t st_seq;

static void st_cmd_finish(st_cmd_t *c) {
    if (c->ram)
        pi_cl_ram_copy_wait(&c->req);
    else
        pi_cl_dma_cmd_wait(&c->dma);
    c->busy = 0;
}

/* A free command slot for transfer `id`; the oldest command is waited for
 * when every slot is taken. */
static st_cmd_t *st_cmd_take(uint32_t id, int ram) {
    st_cmd_t *c = NULL, *oldest = NULL;
    int k;
    for (k = 0; k < ST_CMDS; k++) {
        if (!st_cmds[k].busy) {
            c = &st_cmds[k];
            break;
        }
        if (!oldest || (int32_t)(st_cmds[k].seq - oldest->seq) < 0) oldest = &st_cmds[k];
    }
    if (!c) {
        st_cmd_finish(oldest);
        c = oldest;
    }
    c->id = id;
    c->seq = st_seq++;
    c->busy = 1;
    c->ram = (uint8_t)ram;
    return c;
}

#ifdef ST_CHECKED
/* The program's transfer ids in flight. */
#define ST_IDS 1024
static uint32_t st_ids[ST_IDS];
static uint32_t st_n_ids;

static int st_id_find(uint32_t id) {
    uint32_t k;
    for (k = 0; k < st_n_ids; k++)
        if (st_ids[k] == id) return (int)k;
    return -1;
}

static void st_id_issue(uint32_t id, const char *what) {
    if (st_id_find(id) >= 0) ST_FAIL("%s %lu: transfer id %lu reused while in flight", what, (unsigned long)id, (unsigned long)id);
    if (st_n_ids == ST_IDS) ST_FAIL("%s %lu: more than %d transfers in flight", what, (unsigned long)id, ST_IDS);
    st_ids[st_n_ids++] = id;
}

void st_check_access(const void *p, uint32_t bytes, uint32_t node, uint32_t operand) {
    char what[80];
    if (node == ST_HARNESS_NODE)
        snprintf(what, sizeof what, "the harness's access");
    else
        snprintf(what, sizeof what, "kernel of node %lu, operand %lu", (unsigned long)node, (unsigned long)operand);
    pi_host_check_access(p, bytes, what);
}

void st_check_const(const void *p, uint32_t bytes, const char *name) {
    pi_host_register_const(p, bytes, name);
}

void st_check_idle(const char *step) {
    if (st_n_ids) ST_FAIL("the %s step ends with transfer id %lu in flight (a missing st_dma_wait)", step, (unsigned long)st_ids[0]);
    pi_host_check_idle(step);
}
#define ST_ID_ISSUE(id, what) st_id_issue((id), (what))
#else
#define ST_ID_ISSUE(id, what) ((void)0)
#endif

static int st_in_l1(const void *p) {
    const uint8_t *b = (const uint8_t *)p;
    return st_l1 && b >= st_l1 && b < st_l1 + st_l1_bytes;
}

/* Contiguous bytes between L2 (ext) and L1 (loc), in commands of at most ST_CMD_MAX. */
static void st_dma_1d(uint32_t id, uint8_t *ext, uint8_t *loc, uint32_t bytes, pi_cl_dma_dir_e dir) {
    while (bytes) {
        uint32_t n = bytes < ST_CMD_MAX ? bytes : ST_CMD_MAX;
        st_cmd_t *c = st_cmd_take(id, 0);
        pi_cl_dma_cmd((uintptr_t)ext, (uintptr_t)loc, n, dir, &c->dma);
        ext += n;
        loc += n;
        bytes -= n;
    }
}

/* Lines of `bytes` at `ext_stride` on the L2 side, dense on the L1 side, in 2D
 * commands of at most ST_CMD_MAX bytes. */
static void st_dma_2d(uint32_t id, uint8_t *ext, uint8_t *loc, uint32_t bytes, uint32_t lines,
                      uint32_t ext_stride, pi_cl_dma_dir_e dir) {
    uint32_t per = ST_CMD_MAX / bytes;
    while (lines) {
        uint32_t n = lines < per ? lines : per;
        st_cmd_t *c = st_cmd_take(id, 0);
        pi_cl_dma_cmd_2d((uintptr_t)ext, (uintptr_t)loc, n * bytes, ext_stride, bytes, dir, &c->dma);
        ext += (size_t)n * ext_stride;
        loc += (size_t)n * bytes;
        lines -= n;
    }
}

void st_dma(uint32_t id, void *dst, const void *src, uint32_t bytes, uint32_t c0,
            uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    /* The L1 side is whichever is in the L1 arena: a store when the source is. */
    int store = st_in_l1(src);
    pi_cl_dma_dir_e dir = store ? PI_CL_DMA_DIR_LOC2EXT : PI_CL_DMA_DIR_EXT2LOC;
    uint32_t ext_s0 = store ? ds0 : ss0, loc_s0 = store ? ss0 : ds0;
    uint32_t ext_s1 = store ? ds1 : ss1, loc_s1 = store ? ss1 : ds1;
    uint8_t *ext = (uint8_t *)(uintptr_t)(store ? dst : src);
    uint8_t *loc = (uint8_t *)(uintptr_t)(store ? src : dst);
    uint32_t i, j;
    ST_ID_ISSUE(id, "st_dma");
    for (j = 0; j < c1; j++) {
        uint8_t *e = ext + (size_t)j * ext_s1, *l = loc + (size_t)j * loc_s1;
        if (c0 == 1 || (ext_s0 == bytes && loc_s0 == bytes)) {
            st_dma_1d(id, e, l, bytes * c0, dir);
        } else if (loc_s0 == bytes && bytes <= ST_CMD_MAX && ext_s0 <= ST_CMD_MAX) {
            st_dma_2d(id, e, l, bytes, c0, ext_s0, dir);
        } else {
            for (i = 0; i < c0; i++) st_dma_1d(id, e + (size_t)i * ext_s0, l + (size_t)i * loc_s0, bytes, dir);
        }
    }
}

/* One RAM copy: `lines` lines of `bytes`, `ram_stride` apart in RAM, dense in L2. */
static void st_ram_copy(uint32_t id, uint32_t ram, uint8_t *mem, uint32_t bytes, uint32_t lines,
                        uint32_t ram_stride, int ext2loc) {
    st_cmd_t *c = st_cmd_take(id, 1);
    if (lines == 1)
        pi_cl_ram_copy(&st_ram_dev, ram, mem, bytes, ext2loc, &c->req);
    else
        pi_cl_ram_copy_2d(&st_ram_dev, ram, mem, bytes * lines, ram_stride, bytes, ext2loc, &c->req);
}

static void st_ram(uint32_t id, uint32_t l3_off, uint8_t *mem, uint32_t bytes, uint32_t c0,
                   uint32_t ram_s0, uint32_t mem_s0, uint32_t c1, uint32_t ram_s1, uint32_t mem_s1,
                   int ext2loc) {
    uint32_t i, j;
    for (j = 0; j < c1; j++) {
        uint32_t r = st_l3_base + l3_off + j * ram_s1;
        uint8_t *m = mem + (size_t)j * mem_s1;
        if (c0 == 1 || (ram_s0 == bytes && mem_s0 == bytes)) {
            st_ram_copy(id, r, m, bytes * c0, 1, 0, ext2loc);
        } else if (mem_s0 == bytes && bytes <= ST_CMD_MAX && ram_s0 <= ST_CMD_MAX) {
            st_ram_copy(id, r, m, bytes, c0, ram_s0, ext2loc);
        } else {
            for (i = 0; i < c0; i++) st_ram_copy(id, r + i * ram_s0, m + (size_t)i * mem_s0, bytes, 1, 0, ext2loc);
        }
    }
}

void st_ram_read(uint32_t id, void *dst_l2, uint32_t l3_off, uint32_t bytes, uint32_t c0,
                 uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    ST_ID_ISSUE(id, "st_ram_read");
    st_ram(id, l3_off, (uint8_t *)dst_l2, bytes, c0, ss0, ds0, c1, ss1, ds1, 1);
}

void st_ram_write(uint32_t id, uint32_t l3_off, const void *src_l2, uint32_t bytes,
                  uint32_t c0, uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1,
                  uint32_t ds1) {
    ST_ID_ISSUE(id, "st_ram_write");
    st_ram(id, l3_off, (uint8_t *)(uintptr_t)src_l2, bytes, c0, ds0, ss0, c1, ds1, ss1, 0);
}

void st_dma_wait(uint32_t id) {
    int k;
#ifdef ST_CHECKED
    int at = st_id_find(id);
    if (at < 0) ST_FAIL("st_dma_wait(%lu): transfer id %lu is not in flight", (unsigned long)id, (unsigned long)id);
    st_ids[at] = st_ids[--st_n_ids];
#endif
    /* Every command of the transfer, oldest first. */
    for (;;) {
        st_cmd_t *first = NULL;
        for (k = 0; k < ST_CMDS; k++)
            if (st_cmds[k].busy && st_cmds[k].id == id && (!first || (int32_t)(st_cmds[k].seq - first->seq) < 0))
                first = &st_cmds[k];
        if (!first) break;
        st_cmd_finish(first);
    }
}

void st_l3_store(uint32_t l3_off, const void *src, uint32_t bytes) {
    const uint8_t *s = (const uint8_t *)src;
    pi_cl_ram_req_t req;
    while (bytes) {
        uint32_t n = bytes < ST_BOUNCE ? bytes : ST_BOUNCE;
        memcpy(st_bounce, s, n);
        pi_cl_ram_write(&st_ram_dev, st_l3_base + l3_off, st_bounce, n, &req);
        pi_cl_ram_write_wait(&req);
        s += n;
        l3_off += n;
        bytes -= n;
    }
}

void st_l3_load(void *dst, uint32_t l3_off, uint32_t bytes) {
    uint8_t *d = (uint8_t *)dst;
    pi_cl_ram_req_t req;
    while (bytes) {
        uint32_t n = bytes < ST_BOUNCE ? bytes : ST_BOUNCE;
        pi_cl_ram_read(&st_ram_dev, st_l3_base + l3_off, st_bounce, n, &req);
        pi_cl_ram_read_wait(&req);
        memcpy(d, st_bounce, n);
        d += n;
        l3_off += n;
        bytes -= n;
    }
}

/* ---- Cycles ---- */

void st_cycles_reset(void) {
    pi_perf_conf(1 << PI_PERF_CYCLES);
    pi_perf_cl_reset();
}
void st_cycles_start(void) { pi_perf_cl_start(); }
void st_cycles_stop(void) { pi_perf_cl_stop(); }
uint32_t st_cycles_read(void) { return (uint32_t)pi_perf_cl_read(PI_PERF_CYCLES); }

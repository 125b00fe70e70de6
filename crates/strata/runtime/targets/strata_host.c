/* The target API on the build machine: arenas are separate mallocs (L3
 * too, addressed by offsets), the cores of a fork run one after another,
 * every transfer is a copy at issue and its wait has nothing to do. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "strata_rt.h"

uint8_t *st_l1, *st_l2;
static uint8_t *st_l3;
static uint32_t st_l3_bytes;
/* The blocks malloc returned, for st_close (bases are aligned within them). */
static void *st_block[3];

static uint8_t *st_arena(int k, uint32_t bytes, const char *name) {
    uint8_t *p;
    if (bytes == 0) return NULL;
    st_block[k] = malloc((size_t)bytes + ST_ALIGN);
    if (!st_block[k]) {
        printf("st_init: cannot allocate the %s arena (%lu bytes)\n", name, (unsigned long)bytes);
        return NULL;
    }
    p = (uint8_t *)st_block[k];
    return p + (ST_ALIGN - (uintptr_t)p % ST_ALIGN) % ST_ALIGN;
}

int st_init(uint32_t l1_bytes, uint32_t l2_bytes, uint32_t l3_bytes) {
    st_l1 = st_arena(0, l1_bytes, "L1");
    st_l2 = st_arena(1, l2_bytes, "L2");
    st_l3 = st_arena(2, l3_bytes, "L3");
    st_l3_bytes = l3_bytes;
    if ((l1_bytes && !st_l1) || (l2_bytes && !st_l2) || (l3_bytes && !st_l3)) {
        st_close();
        return -1;
    }
    return 0;
}

void st_close(void) {
    int k;
    for (k = 0; k < 3; k++) {
        free(st_block[k]);
        st_block[k] = NULL;
    }
    st_l1 = st_l2 = st_l3 = NULL;
    st_l3_bytes = 0;
}

int st_run(st_task_fn fn, void *arg) {
    fn(arg);
    return 0;
}

static int st_current_core;
static int st_in_fork;

int st_core_id(void) { return st_current_core; }

void st_fork(st_task_fn fn, void *args) {
    int c;
    st_in_fork = 1;
    for (c = 0; c < ST_NUM_CORES; c++) {
        st_current_core = c;
        fn(args);
    }
    st_current_core = 0;
    st_in_fork = 0;
}

void st_barrier(void) {
    if (st_in_fork && ST_NUM_CORES > 1) {
        printf("st_barrier: called inside a fork; on the host the cores run one after another\n");
        exit(4);
    }
}

void st_dma(uint32_t id, void *dst, const void *src, uint32_t bytes, uint32_t c0,
            uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    uint32_t i, j;
    (void)id;
    for (j = 0; j < c1; j++)
        for (i = 0; i < c0; i++)
            memcpy(d + j * ds1 + i * ds0, s + j * ss1 + i * ss0, bytes);
}

/* L3 is reached by offsets: a range past the arena stops the run. */
static uint8_t *st_l3_at(uint32_t off, uint64_t extent, const char *what) {
    if (!st_l3 || (uint64_t)off + extent > st_l3_bytes) {
        printf("%s: L3 bytes [%lu, %llu) are outside the L3 arena (%lu bytes)\n", what,
               (unsigned long)off, (unsigned long long)off + extent, (unsigned long)st_l3_bytes);
        exit(5);
    }
    return st_l3 + off;
}

/* The bytes a shaped transfer spans on one side, from its first byte. */
static uint64_t st_extent(uint32_t bytes, uint32_t c0, uint32_t st0, uint32_t c1, uint32_t st1) {
    if (c0 == 0 || c1 == 0 || bytes == 0) return 0;
    return (uint64_t)(c1 - 1) * st1 + (uint64_t)(c0 - 1) * st0 + bytes;
}

void st_ram_read(uint32_t id, void *dst_l2, uint32_t l3_off, uint32_t bytes, uint32_t c0,
                 uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    const uint8_t *s = st_l3_at(l3_off, st_extent(bytes, c0, ss0, c1, ss1), "st_ram_read");
    st_dma(id, dst_l2, s, bytes, c0, ss0, ds0, c1, ss1, ds1);
}

void st_ram_write(uint32_t id, uint32_t l3_off, const void *src_l2, uint32_t bytes,
                  uint32_t c0, uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1,
                  uint32_t ds1) {
    uint8_t *d = st_l3_at(l3_off, st_extent(bytes, c0, ds0, c1, ds1), "st_ram_write");
    st_dma(id, d, src_l2, bytes, c0, ss0, ds0, c1, ss1, ds1);
}

void st_dma_wait(uint32_t id) { (void)id; }

void st_l3_store(uint32_t l3_off, const void *src, uint32_t bytes) {
    memcpy(st_l3_at(l3_off, bytes, "st_l3_store"), src, bytes);
}

void st_l3_load(void *dst, uint32_t l3_off, uint32_t bytes) {
    memcpy(dst, st_l3_at(l3_off, bytes, "st_l3_load"), bytes);
}

static clock_t st_t0, st_elapsed;
void st_cycles_reset(void) { st_elapsed = 0; }
void st_cycles_start(void) { st_t0 = clock(); }
void st_cycles_stop(void) { st_elapsed += clock() - st_t0; }
uint32_t st_cycles_read(void) { return (uint32_t)st_elapsed; }

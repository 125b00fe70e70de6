#include "strata_rt.h"

#include <stdio.h>
#include <stdlib.h>

volatile int st_fault_code;

const char *st_fault_name(int code) {
    switch (code) {
    case 0: return "no fault";
    case ST_FAULT_INDEX: return "index out of range (Gather, MaxPoolGrad)";
    case ST_FAULT_LABEL: return "loss label out of range";
    default: return "unknown fault";
    }
}

#ifdef ST_TARGET_PULP
#include "pmsis.h"
int st_core_id(void) { return pi_core_id(); }
void st_fork(st_task_fn fn, void *args) { pi_cl_team_fork(ST_NUM_CORES, fn, args); }
#else
static int st_current_core;
int st_core_id(void) { return st_current_core; }
void st_fork(st_task_fn fn, void *args) {
    for (int c = 0; c < ST_NUM_CORES; c++) {
        st_current_core = c;
        fn(args);
    }
    st_current_core = 0;
}
#endif

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

void st_dma_wait(uint32_t id) { (void)id; }

static uint8_t *st_ram;
static uint32_t st_ram_bytes;

void st_ram_attach(uint8_t *base, uint32_t bytes) {
    st_ram = base;
    st_ram_bytes = bytes;
}

/* The L3 range a transfer touches, checked against the arena. */
static uint8_t *st_ram_at(uint32_t id, uint32_t off, uint32_t bytes, uint32_t c0, uint32_t s0,
                          uint32_t c1, uint32_t s1) {
    uint64_t end = (uint64_t)off + (uint64_t)(c1 - 1) * s1 + (uint64_t)(c0 - 1) * s0 + bytes;
    if (!st_ram || end > st_ram_bytes) {
        fprintf(stderr, "strata: L3 transfer %u reaches byte %llu of an L3 arena of %u bytes\n",
                (unsigned)id, (unsigned long long)end, (unsigned)st_ram_bytes);
        exit(4);
    }
    return st_ram + off;
}

void st_ram_read(uint32_t id, void *dst, uint32_t l3_off, uint32_t bytes, uint32_t c0,
                 uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    st_dma(id, dst, st_ram_at(id, l3_off, bytes, c0, ss0, c1, ss1), bytes, c0, ss0, ds0, c1, ss1,
           ds1);
}

void st_ram_write(uint32_t id, uint32_t l3_off, const void *src, uint32_t bytes, uint32_t c0,
                  uint32_t ss0, uint32_t ds0, uint32_t c1, uint32_t ss1, uint32_t ds1) {
    st_dma(id, st_ram_at(id, l3_off, bytes, c0, ds0, c1, ds1), src, bytes, c0, ss0, ds0, c1, ss1,
           ds1);
}

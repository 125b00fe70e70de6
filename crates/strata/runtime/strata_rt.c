#include "strata_rt.h"

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

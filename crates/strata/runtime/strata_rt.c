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

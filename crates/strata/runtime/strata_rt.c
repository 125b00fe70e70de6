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

/* The address of `off` in an addressable level's arena. */
static uint8_t *st_at(int level, uint32_t off) {
    return (level == ST_L1 ? st_l1 : st_l2) + off;
}

void st_store(int level, uint32_t off, const void *src, uint32_t bytes) {
    if (level == ST_L3) {
        st_l3_store(off, src, bytes);
        return;
    }
    ST_ACCESS(st_at(level, off), bytes, ST_HARNESS_NODE, 0);
    memcpy(st_at(level, off), src, bytes);
}

void st_fill(int level, uint32_t off, int value, uint32_t bytes) {
    if (level == ST_L3) {
        uint8_t chunk[64];
        memset(chunk, value, sizeof chunk);
        while (bytes) {
            uint32_t n = bytes < sizeof chunk ? bytes : (uint32_t)sizeof chunk;
            st_l3_store(off, chunk, n);
            off += n;
            bytes -= n;
        }
        return;
    }
    ST_ACCESS(st_at(level, off), bytes, ST_HARNESS_NODE, 0);
    memset(st_at(level, off), value, bytes);
}

void st_load(void *dst, int level, uint32_t off, uint32_t bytes) {
    if (level == ST_L3) {
        st_l3_load(dst, off, bytes);
        return;
    }
    ST_ACCESS(st_at(level, off), bytes, ST_HARNESS_NODE, 0);
    memcpy(dst, st_at(level, off), bytes);
}

#include "st_eltwise.h"

static float st_bin_apply(int op, float a, float b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    default: return powf(a, b);
    }
}

void st_binary(void *args) {
    const st_binary_args *g = (const st_binary_args *)args;
    size_t n = 1;
    for (int d = 0; d < g->rank; d++) n *= (size_t)g->dims[d];
    size_t lo, hi;
    st_split(n, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        size_t oa = 0, ob = 0, rem = o;
        for (int d = g->rank - 1; d >= 0; d--) {
            size_t i = rem % (size_t)g->dims[d];
            rem /= (size_t)g->dims[d];
            oa += i * (size_t)g->sa[d];
            ob += i * (size_t)g->sb[d];
        }
        g->y[o] = st_bin_apply(g->op, g->a[oa], g->b[ob]);
    }
}

void st_unary(void *args) {
    const st_unary_args *u = (const st_unary_args *)args;
    size_t lo, hi;
    st_split((size_t)u->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        switch (u->op) {
        default: u->y[i] = sqrtf(u->x[i]); break;
        }
    }
}

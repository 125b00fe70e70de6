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
        float x = u->x[i];
        switch (u->op) {
        case 1: u->y[i] = fabsf(x); break;
        case 2: u->y[i] = -x; break;
        case 3: u->y[i] = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; break;
        case 4: u->y[i] = expf(x); break;
        case 5: u->y[i] = logf(x); break;
        case 6: u->y[i] = 1.0f / (1.0f + expf(-x)); break;
        case 7: u->y[i] = tanhf(x); break;
        case 8: u->y[i] = x < 0.0f ? u->alpha * x : x; break;
        default: u->y[i] = sqrtf(x); break;
        }
    }
}

void st_act_grad(void *args) {
    const st_act_grad_args *a = (const st_act_grad_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float y = a->y[i];
        switch (a->op) {
        case 0: a->dx[i] = a->dy[i] * y * (1.0f - y); break;
        case 1: a->dx[i] = a->dy[i] * (1.0f - y * y); break;
        default: a->dx[i] = y > 0.0f ? a->dy[i] : a->alpha * a->dy[i]; break;
        }
    }
}

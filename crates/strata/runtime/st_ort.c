#include "st_ort.h"

void st_expand(void *args) {
    const st_expand_args *a = (const st_expand_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        size_t rem = o, xi = 0;
        for (int d = a->rank - 1; d >= 0; d--) {
            xi += (rem % (size_t)a->dims[d]) * (size_t)a->xs[d];
            rem /= (size_t)a->dims[d];
        }
        a->y[o] = a->x[xi];
    }
}

void st_scale(void *args) {
    const st_scale_args *a = (const st_scale_args *)args;
    float f = a->f;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->y[i] = a->x[i] * f;
}

void st_sum(void *args) {
    const st_sum_args *a = (const st_sum_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float acc = a->x[0][i];
        for (int q = 1; q < a->k; q++) acc += a->x[q][i];
        a->y[i] = acc;
    }
}

void st_fused_matmul(void *args) {
    const st_fused_matmul_args *g = (const st_fused_matmul_args *)args;
    size_t nb = 1;
    for (int d = 0; d < g->nbd; d++) nb *= (size_t)g->bdims[d];
    size_t lo, hi;
    st_split(nb * (size_t)g->m, &lo, &hi);
    for (size_t r = lo; r < hi; r++) {
        size_t bi = r / (size_t)g->m, i = r % (size_t)g->m;
        size_t oa = 0, ob = 0, rem = bi;
        for (int d = g->nbd - 1; d >= 0; d--) {
            size_t q = rem % (size_t)g->bdims[d];
            rem /= (size_t)g->bdims[d];
            oa += q * (size_t)g->sa[d];
            ob += q * (size_t)g->sb[d];
        }
        const float *a = g->a + oa + i * (size_t)g->am;
        for (int j = 0; j < g->n; j++) {
            const float *b = g->b + ob + (size_t)j * (size_t)g->bn;
            float acc = 0.0f;
            for (int q = 0; q < g->k; q++)
                acc += a[(size_t)q * (size_t)g->ak] * b[(size_t)q * (size_t)g->bk];
            g->y[r * (size_t)g->n + (size_t)j] = g->alpha * acc;
        }
    }
}

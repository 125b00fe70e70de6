#include "st_bn.h"

/* The per-channel sums every kernel below takes, pairwise over channel c's
 * values of [n, c, sp] (batch, then spatial), cs = c * sp apart. */
static float chan_sum(const float *x, int n, size_t cs, size_t sp, size_t c) {
    st_psum sum;
    st_psum_init(&sum);
    for (int k = 0; k < n; k++) {
        const float *xp = x + (size_t)k * cs + c * sp;
        for (size_t i = 0; i < sp; i++) st_psum_add(&sum, xp[i]);
    }
    return st_psum_total(&sum);
}

static float chan_sqdev(const float *x, float mean, int n, size_t cs, size_t sp, size_t c) {
    st_psum sq;
    st_psum_init(&sq);
    for (int k = 0; k < n; k++) {
        const float *xp = x + (size_t)k * cs + c * sp;
        for (size_t i = 0; i < sp; i++) {
            float d = xp[i] - mean;
            st_psum_add(&sq, d * d);
        }
    }
    return st_psum_total(&sq);
}

/* sum dy and sum dy (x - mean). */
static void chan_grad_sums(const float *dy, const float *x, float mean, int n, size_t cs,
                           size_t sp, size_t c, float *db, float *dxm) {
    st_psum sdb, sdxm;
    st_psum_init(&sdb);
    st_psum_init(&sdxm);
    for (int k = 0; k < n; k++) {
        const float *dyp = dy + (size_t)k * cs + c * sp;
        const float *xp = x + (size_t)k * cs + c * sp;
        for (size_t i = 0; i < sp; i++) {
            st_psum_add(&sdb, dyp[i]);
            st_psum_add(&sdxm, dyp[i] * (xp[i] - mean));
        }
    }
    *db = st_psum_total(&sdb);
    *dxm = st_psum_total(&sdxm);
}

/* Channels split over cores. */
void st_bn_train(void *args) {
    const st_bn_train_args *a = (const st_bn_train_args *)args;
    size_t sp = (size_t)a->sp, cs = (size_t)a->c * sp;
    float m = (float)((size_t)a->n * sp);
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++) {
        float mean = chan_sum(a->x, a->n, cs, sp, c) / m;
        float var = chan_sqdev(a->x, mean, a->n, cs, sp, c) / m;
        float inv = 1.0f / sqrtf(var + a->eps);
        if (a->y) {
            float k = a->scale[c] * inv, b = a->b[c];
            for (int n = 0; n < a->n; n++) {
                const float *xp = a->x + (size_t)n * cs + c * sp;
                float *yp = a->y + (size_t)n * cs + c * sp;
                for (size_t i = 0; i < sp; i++) yp[i] = (xp[i] - mean) * k + b;
            }
        }
        if (a->smean) a->smean[c] = mean;
        if (a->sinv) a->sinv[c] = inv;
        if (a->rm_out) a->rm_out[c] = a->mom * a->rm[c] + (1.0f - a->mom) * mean;
        if (a->rv_out) a->rv_out[c] = a->mom * a->rv[c] + (1.0f - a->mom) * var;
    }
}

/* Channels split over cores. */
void st_bn_grad(void *args) {
    const st_bn_grad_args *a = (const st_bn_grad_args *)args;
    size_t sp = (size_t)a->sp, cs = (size_t)a->c * sp;
    float m = (float)((size_t)a->n * sp);
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++) {
        float mean = a->mean[c], inv = a->inv[c], db, dxm;
        chan_grad_sums(a->dy, a->x, mean, a->n, cs, sp, c, &db, &dxm);
        if (a->dbias) a->dbias[c] = db;
        if (a->dscale) a->dscale[c] = dxm * inv;
        if (a->dx) {
            float k1 = db / m, k2 = dxm * inv * inv / m, coef = a->scale[c] * inv;
            for (int n = 0; n < a->n; n++) {
                const float *dyp = a->dy + (size_t)n * cs + c * sp;
                const float *xp = a->x + (size_t)n * cs + c * sp;
                float *dxp = a->dx + (size_t)n * cs + c * sp;
                for (size_t i = 0; i < sp; i++)
                    dxp[i] = coef * (dyp[i] - k1 - (xp[i] - mean) * k2);
            }
        }
    }
}

/* Channels split over cores. */
void st_bn_sum(void *args) {
    const st_bn_sum_args *a = (const st_bn_sum_args *)args;
    size_t sp = (size_t)a->sp, cs = (size_t)a->c * sp;
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++) a->s[c] = chan_sum(a->x, a->n, cs, sp, c);
}

/* Channels split over cores. */
void st_bn_sqdev(void *args) {
    const st_bn_sqdev_args *a = (const st_bn_sqdev_args *)args;
    size_t sp = (size_t)a->sp, cs = (size_t)a->c * sp;
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++)
        a->q[c] = chan_sqdev(a->x, a->s[c] / a->m, a->n, cs, sp, c);
}

/* Channels split over cores. */
void st_bn_stats(void *args) {
    const st_bn_stats_args *a = (const st_bn_stats_args *)args;
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++) {
        float mean = a->s[c] / a->m, var = a->q[c] / a->m;
        float rm = a->rm[c], rv = a->rv[c];
        if (a->mean) a->mean[c] = mean;
        if (a->inv) a->inv[c] = 1.0f / sqrtf(var + a->eps);
        if (a->rm_out) a->rm_out[c] = a->mom * rm + (1.0f - a->mom) * mean;
        if (a->rv_out) a->rv_out[c] = a->mom * rv + (1.0f - a->mom) * var;
    }
}

/* (n, c) planes split over cores. */
void st_bn_apply(void *args) {
    const st_bn_apply_args *a = (const st_bn_apply_args *)args;
    size_t sp = (size_t)a->sp, planes = (size_t)a->n * (size_t)a->c;
    size_t lo, hi;
    st_split(planes, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        size_t c = p % (size_t)a->c;
        float mean = a->mean[c], k = a->scale[c] * a->inv[c], b = a->b[c];
        const float *xp = a->x + p * sp;
        float *yp = a->y + p * sp;
        for (size_t i = 0; i < sp; i++) yp[i] = (xp[i] - mean) * k + b;
    }
}

/* Channels split over cores. */
void st_bn_grad_sum(void *args) {
    const st_bn_grad_sum_args *a = (const st_bn_grad_sum_args *)args;
    size_t sp = (size_t)a->sp, cs = (size_t)a->c * sp;
    size_t lo, hi;
    st_split((size_t)a->c, &lo, &hi);
    for (size_t c = lo; c < hi; c++) {
        float db, dxm;
        chan_grad_sums(a->dy, a->x, a->mean[c], a->n, cs, sp, c, &db, &dxm);
        if (a->sdb) a->sdb[c] = db;
        if (a->sdxm) a->sdxm[c] = dxm;
    }
}

/* (n, c) planes split over cores. */
void st_bn_grad_apply(void *args) {
    const st_bn_grad_apply_args *a = (const st_bn_grad_apply_args *)args;
    size_t sp = (size_t)a->sp, planes = (size_t)a->n * (size_t)a->c;
    size_t lo, hi;
    st_split(planes, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        size_t c = p % (size_t)a->c;
        float mean = a->mean[c], inv = a->inv[c];
        float k1 = a->sdb[c] / a->m, k2 = a->sdxm[c] * inv * inv / a->m;
        float coef = a->scale[c] * inv;
        const float *dyp = a->dy + p * sp, *xp = a->x + p * sp;
        float *dxp = a->dx + p * sp;
        for (size_t i = 0; i < sp; i++)
            dxp[i] = coef * (dyp[i] - k1 - (xp[i] - mean) * k2);
    }
}

#include "st_train.h"

void st_accumulate(void *args) {
    const st_accumulate_args *a = (const st_accumulate_args *)args;
    int overwrite = a->flag && a->flag[0];
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    if (overwrite)
        for (size_t i = lo; i < hi; i++) a->buf[i] = a->val[i];
    else
        for (size_t i = lo; i < hi; i++) a->buf[i] = a->buf[i] + a->val[i];
}

void st_sgd(void *args) {
    const st_sgd_args *a = (const st_sgd_args *)args;
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->w[i] = a->w[i] - a->lr * a->g[i];
}

void st_adamw(void *args) {
    const st_adamw_args *a = (const st_adamw_args *)args;
    float lr = a->lr[0];
    float ac = 1.0f, bc = 1.0f;
    if (a->correct_bias) {
        ac = 1.0f - (float)pow((double)a->alpha, (double)a->step[0]);
        bc = 1.0f - (float)pow((double)a->beta, (double)a->step[0]);
    }
    float lrc = lr * (sqrtf(bc) / ac);
    size_t lo, hi;
    st_split((size_t)a->n, &lo, &hi);
    for (size_t i = lo; i < hi; i++) {
        float w = a->w[i], g = a->g[i];
        if (a->mode == 0) w = w - w * lr * a->weight_decay;
        float m1 = a->alpha * a->m1[i] + (1.0f - a->alpha) * g;
        float m2 = a->beta * a->m2[i] + (1.0f - a->beta) * g * g;
        if (a->mode == 0) {
            float denom = sqrtf(m2 / bc) + a->epsilon;
            w = w - (lr * m1) / (ac * denom);
        } else {
            float denom = sqrtf(m2) + a->epsilon;
            w = w - lrc * m1 / denom;
            w = w - lr * a->weight_decay * w;
        }
        a->w[i] = w;
        a->m1[i] = m1;
        a->m2[i] = m2;
    }
}

void st_step_count(void *args) {
    const st_step_count_args *a = (const st_step_count_args *)args;
    if (st_core_id() == 0) a->step[0] += 1;
}

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

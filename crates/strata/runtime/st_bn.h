/* Batch normalization in training mode and its gradient, per channel over
 * [n, c, sp] (sp = product of the spatial dims). */
#ifndef ST_BN_H
#define ST_BN_H
#include "strata_rt.h"

/* Batch statistics (biased variance) per channel; y = (x - mean) * (scale *
 * inv_std) + b with inv_std = 1 / sqrt(var + eps). Any of y, rm_out, rv_out,
 * smean, sinv may be NULL. rm_out/rv_out may be rm/rv (in-place update):
 * out = mom * old + (1 - mom) * batch. */
typedef struct {
    const float *x, *scale, *b, *rm, *rv;
    float *y, *rm_out, *rv_out, *smean, *sinv;
    int n, c, sp;
    float eps, mom;
} st_bn_train_args;
void st_bn_train(void *args);

/* dbias = sum dy; dscale = sum dy (x - mean) inv_std;
 * dx = scale inv_std (dy - dbias / M - (x - mean) inv_std^2 sum(dy (x - mean)) / M).
 * Any of dx, dscale, dbias may be NULL. */
typedef struct {
    const float *dy, *x, *scale, *mean, *inv;
    float *dx, *dscale, *dbias;
    int n, c, sp;
} st_bn_grad_args;
void st_bn_grad(void *args);

/* The stages of a batch normalization split where one channel does not fit
 * L1 (each the arithmetic of st_bn_train / st_bn_grad at that point; m is
 * the whole node's count of values per channel, a tile sees only its own):
 * st_bn_sum: s = sum x; st_bn_sqdev: q = sum (x - s/m)^2 (per channel, over
 * [n, c, sp]); st_bn_stats: mean, inv_std and the running statistics from
 * s and q (any output may be NULL; rm_out/rv_out may be rm/rv);
 * st_bn_apply: y = (x - mean) * (scale * inv) + b; st_bn_grad_sum: sdb =
 * sum dy, sdxm = sum dy (x - mean) (either may be NULL); st_bn_grad_apply:
 * dx from those sums as st_bn_grad computes it. */
typedef struct {
    const float *x;
    float *s;
    int n, c, sp;
} st_bn_sum_args;
void st_bn_sum(void *args);

typedef struct {
    const float *x, *s;
    float *q;
    float m;
    int n, c, sp;
} st_bn_sqdev_args;
void st_bn_sqdev(void *args);

typedef struct {
    const float *s, *q, *rm, *rv;
    float *mean, *inv, *rm_out, *rv_out;
    float m, eps, mom;
    int n, c, sp;
} st_bn_stats_args;
void st_bn_stats(void *args);

typedef struct {
    const float *x, *mean, *inv, *scale, *b;
    float *y;
    int n, c, sp;
} st_bn_apply_args;
void st_bn_apply(void *args);

typedef struct {
    const float *dy, *x, *mean;
    float *sdb, *sdxm;
    int n, c, sp;
} st_bn_grad_sum_args;
void st_bn_grad_sum(void *args);

typedef struct {
    const float *dy, *x, *scale, *mean, *inv, *sdb, *sdxm;
    float *dx;
    float m;
    int n, c, sp;
} st_bn_grad_apply_args;
void st_bn_grad_apply(void *args);

#endif

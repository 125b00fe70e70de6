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

#endif
